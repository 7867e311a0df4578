"""What the approval path reports as it works, for metrics: decisions, refusals, deliveries.

The authority calls :func:`report_decision` each time it judges an answer (a
resolution it records, an answer it rejects, a conflict) and the ledger's
:class:`~aais_langgraph.ledger.LedgerIntegrityError` calls
:func:`report_integrity_error` when a stored row is refused; a webhook sender's
:func:`~.traces.delivery_span` calls :func:`report_delivery`. Observers — the
Prometheus metrics of :mod:`.metrics` — subscribe with :func:`subscribe` and are
held weakly, so nothing is counted, and nothing is kept alive, unless someone
listens. A report also annotates the current OpenTelemetry span (:mod:`.traces`).

The channel an answer arrived on (``agui``, ``http``, ``websocket``, ``cli``,
``stdio``; ``runtime`` for in-process code, sweeps and the run itself) is a context
variable a transport sets with :func:`decision_channel` around its work; it follows
the work into worker threads (``asyncio.to_thread`` copies the context).

A report carries ids, the digest, the risk level and the outcome: never an
argument value of the action.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal

from ..protocol.errors import AAISValidationError
from ..protocol.timestamps import parse_timestamp
from . import traces

__all__ = [
    "DEFAULT_CHANNEL",
    "DecisionKind",
    "DecisionReport",
    "DeliveryReport",
    "IntegrityReport",
    "Report",
    "current_channel",
    "decision_channel",
    "report_decision",
    "report_delivery",
    "report_integrity_error",
    "subscribe",
]

logger = logging.getLogger(__name__)

DEFAULT_CHANNEL = "runtime"
"""The channel of an answer no transport named: in-process code, a sweep, the run itself."""

_channel: ContextVar[str] = ContextVar("aais_decision_channel", default=DEFAULT_CHANNEL)

DecisionKind = Literal["recorded", "rejected", "replayed"]
"""``recorded``: the request's one resolution was recorded now; ``rejected``: nothing was
recorded (``stale``, ``invalid``, ``conflict``); ``replayed``: an identical answer got the
resolution recorded before."""


@dataclass(frozen=True)
class DecisionReport:
    """One answer the authority judged."""

    authority: Any
    """The :class:`~aais_langgraph.authority.ApprovalAuthority` that judged it."""
    request_id: str
    action_digest: str
    outcome: str
    kind: DecisionKind
    channel: str
    risk: str | None = None
    """The request's risk level (``low`` ... ``critical``), when the request was at hand."""
    waited: float | None = None
    """Seconds from the request's ``created_at`` to its resolution (``recorded`` only)."""


@dataclass(frozen=True)
class IntegrityReport:
    """A stored row the audit (or its seal) does not vouch for was refused."""

    table: str


@dataclass(frozen=True)
class DeliveryReport:
    """A webhook delivery attempt ended with ``result`` (``delivered``, ``failed``, ...)."""

    result: str


Report = DecisionReport | IntegrityReport | DeliveryReport
Observer = Callable[[Report], None]

_observers: list[weakref.WeakMethod[Observer] | weakref.ref[Observer]] = []
_lock = threading.Lock()


@contextmanager
def decision_channel(name: str) -> Iterator[None]:
    """Name the channel of every answer judged inside the block (a transport's)."""
    token = _channel.set(name)
    try:
        yield
    finally:
        _channel.reset(token)


def current_channel() -> str:
    """The channel named by the innermost :func:`decision_channel` (default ``runtime``)."""
    return _channel.get()


def subscribe(observer: Observer) -> Callable[[], None]:
    """Call ``observer`` with every report from now on; returns the unsubscribe. Held
    weakly: a bound method's object (or a function) that is gone is dropped."""
    ref: weakref.WeakMethod[Observer] | weakref.ref[Observer] = (
        weakref.WeakMethod(observer) if hasattr(observer, "__self__") else weakref.ref(observer)
    )
    with _lock:
        _observers.append(ref)

    def unsubscribe() -> None:
        with _lock:
            if ref in _observers:
                _observers.remove(ref)

    return unsubscribe


def _publish(report: Report) -> None:
    with _lock:
        live = [(ref, ref()) for ref in _observers]
        _observers[:] = [ref for ref, observer in live if observer is not None]
    for _ref, observer in live:
        if observer is None:
            continue
        try:
            observer(report)
        except Exception:  # an observer's failure never changes what the authority did
            logger.exception("an observability observer failed")


def report_decision(
    authority: Any,
    resolved: Any,
    *,
    kind: DecisionKind,
    request: Any = None,
) -> None:
    """Report an answer the authority judged: ``resolved`` is the ``approval.resolved`` it
    returns, ``request`` the AAIS request when at hand (for its risk and ``created_at``).

    Args:
        authority: the authority that judged it.
        resolved: the ``approval.resolved`` it returned.
        kind: ``recorded``, ``replayed`` or ``rejected``.
        request: the AAIS request, when at hand.
    """
    resolution = resolved.resolution
    channel = current_channel()
    risk = None if request is None else str(request.risk.level)
    waited = None
    if kind == "recorded" and request is not None:
        waited = _seconds_between(request.created_at, resolution.resolved_at)
    report = DecisionReport(
        authority=authority,
        request_id=resolution.request_id,
        action_digest=resolution.action_digest,
        outcome=resolution.outcome,
        kind=kind,
        channel=channel,
        risk=risk,
        waited=waited,
    )
    traces.annotate_decision(report)
    if _observers:
        _publish(report)


def report_delivery(result: str) -> None:
    """Report a webhook delivery attempt's result (:func:`~.traces.delivery_span` does)."""
    if _observers:
        _publish(DeliveryReport(result=result))


def report_integrity_error(table: str) -> None:
    """Report a stored row of ``table`` that was refused (the ledger's integrity error)."""
    if _observers:
        _publish(IntegrityReport(table=table))


def _seconds_between(start: str, end: str) -> float | None:
    try:
        first, last = parse_timestamp(start), parse_timestamp(end)
    except AAISValidationError:
        return None
    return max(0.0, (last - first).total_seconds())

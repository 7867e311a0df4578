"""OpenTelemetry spans of the approval path: request, decide, resume and delivery.

Spans go through the OpenTelemetry API (the ``traces`` extra,
``opentelemetry-api``): without an SDK configured they are the API's no-op spans,
and without the API installed nothing is traced at all. The application chooses
the exporter, as with any library instrumented this way.

=====================  ==============================================================
span                   made by
=====================  ==============================================================
``aais.request``       the authority storing an ``approval.requested``
``aais.decide``        the authority judging an answer (decide, cancel, expire, stale)
``aais.resume``        the thread driver resuming a paused thread under its lease
``aais.delivery``      a notification delivery attempt (:func:`delivery_span`)
=====================  ==============================================================

Attributes carry ids, the action digest and name, the risk level, the outcome and the
channel (:data:`ATTRIBUTES`); never an argument value of the action, its summary or an
error message (a failed span records the error's type only).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar, cast

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

    from .signals import DecisionReport

__all__ = [
    "ATTRIBUTES",
    "DECIDE_SPAN",
    "DELIVERY_SPAN",
    "REQUEST_SPAN",
    "RESUME_SPAN",
    "TRACER_NAME",
    "SpanNotes",
    "annotate_decision",
    "delivery_span",
    "requested_attributes",
    "resumed_attributes",
    "span",
    "traced",
]

TRACER_NAME = "aais_langgraph"
"""The instrumentation scope of every span."""

REQUEST_SPAN = "aais.request"
DECIDE_SPAN = "aais.decide"
RESUME_SPAN = "aais.resume"
DELIVERY_SPAN = "aais.delivery"

ATTRIBUTES = {
    "aais.request_id": "the AAIS request id",
    "aais.request_ids": "the request ids a resume carried resolutions for",
    "aais.action_digest": "the request's action digest (sha256:...)",
    "aais.action_digests": "the action digests a resume carried, in request-id order",
    "aais.action_name": "the action's name (never its arguments)",
    "aais.risk": "the request's risk level",
    "aais.outcome": "the resolution's outcome",
    "aais.outcomes": "the outcomes a resume carried, in request-id order",
    "aais.channel": "the channel the answer arrived on (agui, http, websocket, cli, ...)",
    "aais.decision_kind": "recorded, rejected (nothing recorded) or replayed",
    "aais.thread_id": "the LangGraph thread",
    "aais.delivery.id": "the delivery's id",
    "aais.delivery.event_type": "the AAIS envelope type delivered",
    "aais.delivery.attempt": "the attempt number, from 1",
    "aais.delivery.result": "the delivery attempt's result",
    "aais.delivery.status_code": "the receiver's HTTP status",
    "error.type": "the type of the error a failed span raised",
}
"""Every attribute a span of this library may carry, with what it holds."""

AttributeValue = str | bool | int | float | Sequence[str]
Describe = Callable[[tuple[Any, ...], Mapping[str, Any], Any], Mapping[str, AttributeValue | None]]
F = TypeVar("F", bound=Callable[..., Any])

_UNSET: Any = object()
_api: Any = _UNSET


def _trace_api() -> Any:
    """``opentelemetry.trace``, or None when the API is not installed (imported once)."""
    global _api
    if _api is _UNSET:
        try:
            from opentelemetry import trace
        except ImportError:
            trace = None  # type: ignore[assignment]
        _api = trace
    return _api


_tracers: list[Tracer] = []


def _tracer() -> Tracer | None:
    """This library's tracer, or None while no SDK is configured: the API alone records
    nothing, so no span is started (a tracer provider set later is found then)."""
    api = _trace_api()
    if api is None or isinstance(api.get_tracer_provider(), api.ProxyTracerProvider):
        return None
    if not _tracers:
        _tracers.append(cast("Tracer", api.get_tracer(TRACER_NAME)))
    return _tracers[0]


class SpanNotes:
    """Adds attributes to one span (nothing when tracing is off)."""

    def __init__(self, current: Span | None) -> None:
        self._span = current

    def set(self, key: str, value: AttributeValue | None) -> None:
        """Set one attribute from :data:`ATTRIBUTES` (None: left unset)."""
        if self._span is not None and value is not None:
            self._span.set_attribute(key, value)


def _failed(current: Span, error: BaseException) -> None:
    from opentelemetry.trace import Status, StatusCode

    name = type(error).__qualname__
    current.set_attribute("error.type", name)
    current.set_status(Status(StatusCode.ERROR, name))


@contextmanager
def span(name: str, attributes: Mapping[str, AttributeValue] | None = None) -> Iterator[SpanNotes]:
    """A span named ``name`` around the block, current while it runs; an error raised in
    it marks the span failed with the error's type (its message is not recorded)."""
    tracer = _tracer()
    if tracer is None:
        yield SpanNotes(None)
        return
    with tracer.start_as_current_span(
        name,
        attributes=dict(attributes or {}),
        record_exception=False,
        set_status_on_exception=False,
    ) as current:
        try:
            yield SpanNotes(current)
        except BaseException as error:
            _failed(current, error)
            raise


def traced(name: str, describe: Describe | None = None) -> Callable[[F], F]:
    """Decorate a function (or coroutine function) to run in a span named ``name``;
    ``describe(args, kwargs, result)`` gives attributes from its arguments and result."""

    def decorate(function: F) -> F:
        if inspect.iscoroutinefunction(function):

            @functools.wraps(function)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                if _tracer() is None:
                    return await function(*args, **kwargs)
                with span(name) as notes:
                    result = await function(*args, **kwargs)
                    _describe(notes, describe, args, kwargs, result)
                    return result

            return cast("F", run_async)

        @functools.wraps(function)
        def run(*args: Any, **kwargs: Any) -> Any:
            if _tracer() is None:
                return function(*args, **kwargs)
            with span(name) as notes:
                result = function(*args, **kwargs)
                _describe(notes, describe, args, kwargs, result)
                return result

        return cast("F", run)

    return decorate


def _describe(
    notes: SpanNotes,
    describe: Describe | None,
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
    result: Any,
) -> None:
    if describe is None or notes._span is None:
        return
    for key, value in describe(args, kwargs, result).items():
        notes.set(key, value)


def annotate_decision(report: DecisionReport) -> None:
    """Put a judged answer's ids, digest, outcome and channel on the current span."""
    api = _trace_api()
    if api is None:
        return
    current = api.get_current_span()
    if not current.is_recording():
        return
    notes = SpanNotes(current)
    notes.set("aais.request_id", report.request_id)
    notes.set("aais.action_digest", report.action_digest)
    notes.set("aais.outcome", report.outcome)
    notes.set("aais.channel", report.channel)
    notes.set("aais.decision_kind", report.kind)
    notes.set("aais.risk", report.risk)


@contextmanager
def delivery_span(
    *,
    delivery_id: str,
    event_type: str,
    attempt: int,
    request_id: str | None = None,
) -> Iterator[SpanNotes]:
    """The ``aais.delivery`` span of one webhook delivery attempt; set
    ``aais.delivery.result`` (``delivered``, ``failed``, ...) and
    ``aais.delivery.status_code`` on the notes it yields. The result is also counted
    (``aais_webhook_delivery_attempts_total``; ``error`` when the block raised before
    setting one). Never put the receiver's URL or the payload on it.

    Args:
        delivery_id: the delivery's id (its ``webhook-id``).
        event_type: the AAIS event it announces.
        attempt: which attempt this is (from 1).
        request_id: the request it is about, if any.
    """
    attributes: dict[str, AttributeValue] = {
        "aais.delivery.id": delivery_id,
        "aais.delivery.event_type": event_type,
        "aais.delivery.attempt": attempt,
    }
    if request_id is not None:
        attributes["aais.request_id"] = request_id
    with span(DELIVERY_SPAN, attributes) as notes:
        delivery = _DeliveryNotes(notes)
        try:
            yield delivery
        except BaseException:
            delivery.set("aais.delivery.result", delivery.result or "error")
            raise
        finally:
            from .signals import report_delivery

            report_delivery(delivery.result or "error")


class _DeliveryNotes(SpanNotes):
    """The notes of a delivery span, remembering the result (for the attempt counter)."""

    def __init__(self, notes: SpanNotes) -> None:
        super().__init__(notes._span)
        self.result: str | None = None

    def set(self, key: str, value: AttributeValue | None) -> None:
        if key == "aais.delivery.result" and isinstance(value, str):
            self.result = value
        super().set(key, value)


# -- what the authority's and the driver's spans say ------------------------------------


def requested_attributes(
    args: tuple[Any, ...], kwargs: Mapping[str, Any], result: Any
) -> dict[str, AttributeValue | None]:
    """``aais.request``: the stored ``approval.requested``'s id, digest, name and risk."""
    request = result.request
    return {
        "aais.request_id": request.id,
        "aais.action_digest": request.action_digest,
        "aais.action_name": request.action.name,
        "aais.risk": request.risk.level,
        "aais.thread_id": kwargs.get("thread_id"),
    }


def resumed_attributes(
    args: tuple[Any, ...], kwargs: Mapping[str, Any], result: Any
) -> dict[str, AttributeValue | None]:
    """``aais.resume``: the thread, and the resolutions it was resumed with (when the plan
    returned them)."""
    from .signals import current_channel

    attributes: dict[str, AttributeValue | None] = {"aais.channel": current_channel()}
    config = args[1] if len(args) > 1 else kwargs.get("config")
    configurable = (config or {}).get("configurable") or {}
    thread_id = configurable.get("thread_id")
    if isinstance(thread_id, str):
        attributes["aais.thread_id"] = thread_id
    if isinstance(result, list):
        resolutions = [getattr(item, "resolution", None) for item in result]
        found = sorted(
            (r.request_id, r.action_digest, r.outcome) for r in resolutions if r is not None
        )
        attributes["aais.request_ids"] = [request_id for request_id, _, _ in found]
        attributes["aais.action_digests"] = [digest for _, digest, _ in found]
        attributes["aais.outcomes"] = [outcome for _, _, outcome in found]
    return attributes

"""Prometheus metrics of one approval authority: ledger state read at scrape time, and this
process's decision counters.

:class:`ApprovalMetrics` needs the ``metrics`` extra (``prometheus-client``). Two kinds
of value, and they aggregate differently:

- **Read from the ledger at each scrape** (gauges): pending approvals by risk, open
  resume work by state and the age of the oldest, executions of unknown outcome,
  notification deliveries by result. Every process serving the ledger reports the same
  values, so across replicas or uvicorn workers take ``max`` (never ``sum``).
- **Counted by this process** (counters, histogram): decisions by outcome and channel,
  the time from request to resolution, integrity refusals. Across replicas take
  ``sum``. Several uvicorn workers behind one port need Prometheus' multiprocess mode:
  with ``PROMETHEUS_MULTIPROC_DIR`` set (before the workers start) the exposition
  reads every worker's values from that directory.

No label holds an argument value: labels are risk levels, outcomes, channels, resume
work states, table names and delivery results.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ..protocol.errors import AAISValidationError
from ..protocol.timestamps import parse_timestamp
from .signals import DecisionReport, DeliveryReport, IntegrityReport, Report, subscribe

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric
    from prometheus_client.registry import CollectorRegistry

__all__ = [
    "DELIVERY_STATES",
    "RESOLUTION_BUCKETS",
    "RESUME_WORK_STATES",
    "RISK_LEVELS",
    "ApprovalMetrics",
    "DeliveryCounts",
    "ledger_delivery_counts",
]

logger = logging.getLogger(__name__)

RISK_LEVELS = ("low", "medium", "high", "critical")
RESUME_WORK_STATES = ("queued", "in_progress", "failing", "unknown")
"""Open resume work: ``queued`` (due, not tried yet), ``in_progress`` (its thread's run lease
is held), ``failing`` (due again after failed attempts), ``unknown`` (a human reconciles the
execution first)."""

RESOLUTION_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 14400.0, 86400.0)
"""Seconds from request to resolution: a second (policy, tests) to a day."""

DeliveryCounts = Callable[[Any, float], "Mapping[str, int] | None"]
"""``deliveries(ledger, now)``: open notification deliveries by state, read at scrape time;
None when the ledger records none (default: :func:`ledger_delivery_counts`)."""

MULTIPROC_DIR_VAR = "PROMETHEUS_MULTIPROC_DIR"


DELIVERY_STATES = ("pending", "sending", "retrying", "dead")
"""Open webhook deliveries: ``pending`` (not tried yet), ``sending`` (a sender's claim is
live), ``retrying`` (due again after failed attempts), ``dead`` (given up; ``retry`` hands
it back)."""


def ledger_delivery_counts(ledger: Any, now: float) -> Mapping[str, int] | None:
    """The ledger's open webhook deliveries by :data:`DELIVERY_STATES` (its
    outbox: O(open deliveries)), or None when it stores none."""
    from ..ledger.outbox import DELIVERY

    listing = getattr(ledger, "list_work", None)
    if listing is None:
        return None
    try:
        rows = listing(DELIVERY, states=("due", "claimed", "dead"))
    except NotImplementedError:  # a ledger that does not store webhook deliveries
        return None
    counts = dict.fromkeys(DELIVERY_STATES, 0)
    for row in rows:
        if row.state == "dead":
            counts["dead"] += 1
        elif row.claim_until > now:
            counts["sending"] += 1
        elif row.attempts > 0:
            counts["retrying"] += 1
        else:
            counts["pending"] += 1
    return counts


def _prometheus() -> Any:
    try:
        import prometheus_client
    except ImportError:
        raise ImportError(
            "ApprovalMetrics needs prometheus-client: pip install 'aais-langgraph[metrics]'"
        ) from None
    return prometheus_client


class ApprovalMetrics:
    """The Prometheus metrics of ``authority`` (see the module docstring).

    Args:
        authority: The :class:`~aais_langgraph.authority.ApprovalAuthority` whose
            ledger is read and whose decisions are counted.
        deliveries: Reads open webhook deliveries by state from the ledger at scrape
            time (default: :func:`ledger_delivery_counts`; no ``aais_webhook_deliveries``
            metric for a ledger that stores none).
        clock: The current time in epoch seconds (for the ages).
    """

    def __init__(
        self,
        authority: Any,
        *,
        deliveries: DeliveryCounts | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        client = _prometheus()
        self.authority = authority
        self.deliveries: DeliveryCounts = (
            deliveries if deliveries is not None else ledger_delivery_counts
        )
        self.clock = clock
        self.process_registry: CollectorRegistry = client.CollectorRegistry()
        """This process's counters and histogram (what multiprocess mode reads from disk)."""
        self.decisions = client.Counter(
            "aais_decisions",
            "Answers judged by this process, by outcome and the channel they arrived on "
            "(identical replays are not counted again).",
            ["outcome", "channel"],
            registry=self.process_registry,
        )
        self.resolution_seconds = client.Histogram(
            "aais_resolution_seconds",
            "Seconds from a request's created_at to its recorded resolution, recorded by "
            "this process.",
            ["risk", "outcome"],
            buckets=RESOLUTION_BUCKETS,
            registry=self.process_registry,
        )
        self.integrity_errors = client.Counter(
            "aais_integrity_errors",
            "Stored rows this process refused because the audit chain (or the seal) does "
            "not vouch for them, by table.",
            ["table"],
            registry=self.process_registry,
        )
        self.delivery_attempts = client.Counter(
            "aais_webhook_delivery_attempts",
            "Webhook delivery attempts made by this process, by result.",
            ["result"],
            registry=self.process_registry,
        )
        self._unsubscribe = subscribe(self._observe)

    # -- this process's counters --------------------------------------------------------

    def _observe(self, report: Report) -> None:
        if isinstance(report, IntegrityReport):
            self.integrity_errors.labels(table=report.table).inc()
            return
        if isinstance(report, DeliveryReport):
            self.delivery_attempts.labels(result=report.result).inc()
            return
        if not isinstance(report, DecisionReport) or report.authority is not self.authority:
            return
        if report.kind == "replayed":
            return
        self.decisions.labels(outcome=report.outcome, channel=report.channel).inc()
        if report.waited is not None:
            self.resolution_seconds.labels(
                risk=report.risk or "unknown", outcome=report.outcome
            ).observe(report.waited)

    def close(self) -> None:
        """Stop counting (the metrics also stop once this object is gone)."""
        self._unsubscribe()

    # -- read from the ledger at scrape time --------------------------------------------

    def collect(self) -> Iterator[Metric]:
        """The ledger-derived gauges, as a Prometheus collector yields them."""
        core = _prometheus().metrics_core
        readable = core.GaugeMetricFamily(
            "aais_ledger_readable",
            "1 when this scrape read the ledger, 0 when reading it failed.",
        )
        try:
            families = list(self._ledger_families(core))
        except Exception as error:  # a scrape reports the failure instead of failing
            logger.warning("metrics: reading the ledger failed: %s", type(error).__name__)
            readable.add_metric([], 0)
            yield readable
            return
        readable.add_metric([], 1)
        yield readable
        yield from families

    def _ledger_families(self, core: Any) -> Iterator[Metric]:
        from ..ledger.executions import unknown_outcomes

        ledger = self.authority.ledger
        now = self.clock()
        pending = core.GaugeMetricFamily(
            "aais_pending_approvals",
            "Requests waiting for a resolution, by risk level (read from the ledger).",
            labels=["risk"],
        )
        by_risk = dict.fromkeys(RISK_LEVELS, 0)
        oldest_request: float | None = None
        for stored in ledger.list_pending():
            level = _risk_of(stored.envelope)
            by_risk[level] = by_risk.get(level, 0) + 1
            oldest_request = _older(oldest_request, _created_at(stored.envelope))
        for level, count in by_risk.items():
            pending.add_metric([level], count)
        yield pending
        yield _age(
            core,
            "aais_pending_approval_oldest_age_seconds",
            "Seconds the oldest pending request has waited (0 when none; from the ledger).",
            oldest_request,
            now,
        )

        work = core.GaugeMetricFamily(
            "aais_resume_work",
            "Answers recorded whose thread must still be resumed, by state: queued, "
            "in_progress (its run lease is held), failing (retried after failed "
            "attempts), unknown (an execution to reconcile first). From the ledger.",
            labels=["state"],
        )
        by_state = dict.fromkeys(RESUME_WORK_STATES, 0)
        oldest_work: float | None = None
        leases: dict[str, bool] = {}
        for item in ledger.list_work("resume", states=("due", "unknown")):
            if item.state == "unknown":
                by_state["unknown"] += 1
                continue
            oldest_work = _older(oldest_work, item.created_at)
            if item.thread_id not in leases:
                lease = ledger.get_lease(item.thread_id)
                leases[item.thread_id] = lease is not None and lease.expires_at > now
            if leases[item.thread_id]:
                by_state["in_progress"] += 1
            elif item.attempts > 0:
                by_state["failing"] += 1
            else:
                by_state["queued"] += 1
        for state, count in by_state.items():
            work.add_metric([state], count)
        yield work
        yield _age(
            core,
            "aais_resume_work_oldest_age_seconds",
            "Seconds since the oldest resume work still to do was recorded (0 when none).",
            oldest_work,
            now,
        )

        unknown = core.GaugeMetricFamily(
            "aais_outcome_unknown_executions",
            "Approved actions whose execution outcome is unknown, for a human to "
            "reconcile (from the ledger).",
        )
        unknown.add_metric([], len(unknown_outcomes(ledger, now=now)))
        yield unknown

        counts = self.deliveries(ledger, now)
        if counts is not None:
            deliveries = core.GaugeMetricFamily(
                "aais_webhook_deliveries",
                "Webhook deliveries still open, by state: pending, sending, retrying, "
                "dead (from the ledger).",
                labels=["state"],
            )
            for result, count in sorted(counts.items()):
                deliveries.add_metric([str(result)], int(count))
            yield deliveries

    # -- exposition ---------------------------------------------------------------------

    def registry(self) -> CollectorRegistry:
        """A registry with everything a scrape shows: the ledger gauges, then this process's
        counters (every worker's, from ``PROMETHEUS_MULTIPROC_DIR``, when it is set)."""
        client = _prometheus()
        registry: CollectorRegistry = client.CollectorRegistry(auto_describe=False)
        registry.register(_LedgerCollector(self))
        if os.environ.get(MULTIPROC_DIR_VAR):
            from prometheus_client import multiprocess

            multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        else:
            registry.register(_ProcessCollector(self.process_registry))
        return registry

    def exposition(self, accept: str | None = None) -> tuple[bytes, str]:
        """The scrape's body and content type (OpenMetrics when ``accept`` asks for it).
        Blocking: it reads the ledger (an async server calls it in a worker thread)."""
        from prometheus_client.exposition import choose_encoder

        encoder, content_type = choose_encoder(accept or "")
        return encoder(self.registry()), content_type


class _LedgerCollector:
    """The ledger gauges of :meth:`ApprovalMetrics.collect`, as a registry collector."""

    def __init__(self, metrics: ApprovalMetrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        return self.metrics.collect()


class _ProcessCollector:
    """This process's counters, from the registry they were made in."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.source = registry

    def collect(self) -> Iterator[Metric]:
        return iter(self.source.collect())


def _risk_of(envelope: Mapping[str, Any]) -> str:
    request = envelope.get("request")
    risk = request.get("risk") if isinstance(request, Mapping) else None
    level = risk.get("level") if isinstance(risk, Mapping) else None
    return level if level in RISK_LEVELS else "unknown"


def _created_at(envelope: Mapping[str, Any]) -> float | None:
    request = envelope.get("request")
    created = request.get("created_at") if isinstance(request, Mapping) else None
    try:
        return parse_timestamp(created).timestamp() if isinstance(created, str) else None
    except AAISValidationError:
        return None


def _older(current: float | None, candidate: float | None) -> float | None:
    if candidate is None:
        return current
    return candidate if current is None or candidate < current else current


def _age(core: Any, name: str, documentation: str, since: float | None, now: float) -> Metric:
    family = core.GaugeMetricFamily(name, documentation)
    family.add_metric([], 0.0 if since is None else max(0.0, now - since))
    return family  # type: ignore[no-any-return]

"""Observability of the approval path: Prometheus metrics and OpenTelemetry spans.

Both are optional: :class:`~.metrics.ApprovalMetrics` needs the ``metrics`` extra
(``prometheus-client``); spans need the ``traces`` extra (``opentelemetry-api``) and
are no-ops until the application configures an OpenTelemetry SDK. Without either, the
library works the same and reports nothing.
"""

from typing import TYPE_CHECKING, Any

from .signals import (
    DEFAULT_CHANNEL,
    DecisionReport,
    IntegrityReport,
    current_channel,
    decision_channel,
    subscribe,
)
from .traces import ATTRIBUTES, TRACER_NAME, delivery_span

if TYPE_CHECKING:
    from .metrics import ApprovalMetrics


def __getattr__(name: str) -> Any:
    """``ApprovalMetrics`` on first use (it needs the ``metrics`` extra's prometheus-client)."""
    if name == "ApprovalMetrics":
        from .metrics import ApprovalMetrics

        return ApprovalMetrics
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ATTRIBUTES",
    "DEFAULT_CHANNEL",
    "TRACER_NAME",
    "ApprovalMetrics",
    "DecisionReport",
    "IntegrityReport",
    "current_channel",
    "decision_channel",
    "delivery_span",
    "subscribe",
]

"""The five AAIS 1.0 envelopes: a common header plus one typed payload each."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import model_validator

from .base import AAISModel, Extensions, Id, Sequence, Timestamp, absent
from .parts import Activity, Decision, Request, Resolution, Snapshot

EnvelopeType = Literal[
    "approval.requested",
    "approval.decided",
    "approval.resolved",
    "approval.snapshot",
    "approval.activity",
]


class Envelope(AAISModel):
    """Fields every envelope carries: version, type, event id, time and sequence.

    Fields are declared in the schema's order, so a dump reads like the spec's examples.
    """

    aais: Literal["1.0"]
    type: EnvelopeType
    id: Id
    occurred_at: Timestamp
    sequence: Sequence
    stream: Id | None = absent()
    extensions: Extensions | None = absent()


INTERRUPT_VIEW_KEYS = (
    "action_requests",
    "review_configs",
    "action_request",
    "config",
    "description",
    "tool_call_id",
    "name",
    "args",
)
"""Keys a gate may add beside an ``approval.requested`` envelope in its LangGraph interrupt
value, for LangChain's approval UIs (``aais_langgraph.gate.langchain_ui``): a view of the
same request, never part of the envelope. Reading such a value as an envelope drops them."""


class ApprovalRequested(Envelope):
    """``approval.requested``: a new pending request.

    Read from a gate's interrupt value, the keys of :data:`INTERRUPT_VIEW_KEYS` (a view
    of the same request for LangChain's UIs) are dropped; any other unknown key is refused.
    """

    type: Literal["approval.requested"]
    request: Request

    @model_validator(mode="before")
    @classmethod
    def _without_interrupt_view(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and any(key in data for key in INTERRUPT_VIEW_KEYS):
            return {key: value for key, value in data.items() if key not in INTERRUPT_VIEW_KEYS}
        return data


class ApprovalDecided(Envelope):
    """``approval.decided``: a presenter's decision on a request."""

    type: Literal["approval.decided"]
    decision: Decision


class ApprovalResolved(Envelope):
    """``approval.resolved``: the authority's terminal resolution."""

    type: Literal["approval.resolved"]
    resolution: Resolution

    @property
    def approved(self) -> bool:
        """True only for an ``approved`` outcome."""
        return self.resolution.outcome == "approved"


class ApprovalSnapshot(Envelope):
    """``approval.snapshot``: every pending request at a sequence number."""

    type: Literal["approval.snapshot"]
    snapshot: Snapshot


class ApprovalActivity(Envelope):
    """``approval.activity``: progress on an approved action."""

    type: Literal["approval.activity"]
    activity: Activity


AnyEnvelope = (
    ApprovalRequested | ApprovalDecided | ApprovalResolved | ApprovalSnapshot | ApprovalActivity
)

ENVELOPE_TYPES: dict[str, type[Envelope]] = {
    "approval.requested": ApprovalRequested,
    "approval.decided": ApprovalDecided,
    "approval.resolved": ApprovalResolved,
    "approval.snapshot": ApprovalSnapshot,
    "approval.activity": ApprovalActivity,
}

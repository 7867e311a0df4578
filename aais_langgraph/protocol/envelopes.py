"""The five AAIS 1.0 envelopes: a common header plus one typed payload each."""

from __future__ import annotations

from typing import Literal

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


class ApprovalRequested(Envelope):
    """``approval.requested``: a new pending request."""

    type: Literal["approval.requested"]
    request: Request


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

"""The envelopes a resolution makes (resolved, conflict, snapshot) and their audit payloads.

Pure functions, no I/O, so every backend shares them; the judgement that decides
the outcome is :mod:`.judgement`.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from ..protocol import (
    DEFAULT_MAX_BYTES,
    AAISValidationError,
    ApprovalDecided,
    ApprovalResolved,
    ApprovalSnapshot,
    Decision,
    Envelope,
    Outcome,
    Request,
    canonical_json,
    envelope_document,
    format_timestamp,
    new_id,
)
from ..protocol.extensions import EXTENSION_NAMESPACE
from .judgement import MESSAGES


class RequestRef(Protocol):
    """What a resolution needs of its request: the id and the action digest."""

    @property
    def id(self) -> str: ...

    @property
    def action_digest(self) -> str: ...


def resolution_envelope(
    request: RequestRef,
    *,
    outcome: Outcome,
    message: str,
    now: datetime,
    sequence: int,
    decision: Decision | None = None,
    stream: str | None = None,
    extensions: dict[str, Any] | None = None,
) -> ApprovalResolved:
    """Build the ``approval.resolved`` envelope for an outcome.

    Args:
        request: the request resolved.
        outcome: the resolution's outcome.
        message: why, in words that echo no value.
        now: when it was resolved.
        sequence: the envelope's sequence (0 until the ledger assigns one).
        decision: the decision resolved, if any (its id and scope are named).
        stream: the envelope's stream id.
        extensions: envelope extensions.
    """
    moment = format_timestamp(now)
    resolution: dict[str, Any] = {
        "id": new_id("res"),
        "request_id": request.id,
        "action_digest": request.action_digest,
        "resolved_at": moment,
        "outcome": outcome,
        "message": message,
    }
    if decision is not None:
        resolution["decision_id"] = decision.id
        if outcome in ("approved", "denied"):
            resolution["effective_scope"] = decision.scope
    if extensions:
        resolution["extensions"] = extensions
    envelope = envelope_document(
        "approval.resolved",
        "resolution",
        resolution,
        occurred_at=moment,
        sequence=sequence,
        stream=stream,
    )
    return ApprovalResolved.from_data(envelope)


@dataclass(frozen=True)
class _RecordedRef:
    id: str
    action_digest: str


def conflict_envelope(
    recorded: ApprovalResolved, *, now: datetime, sequence: int, stream: str | None = None
) -> ApprovalResolved:
    """The ``conflict`` answer to a decision that differs from the recorded one.

    Args:
        recorded: the resolution already recorded.
        now: when the conflicting decision arrived.
        sequence: the envelope's sequence.
        stream: the envelope's stream id.
    """
    original = recorded.resolution
    return resolution_envelope(
        _RecordedRef(original.request_id, original.action_digest),
        outcome="conflict",
        message=f"{MESSAGES['conflict']} Recorded outcome: {original.outcome}.",
        now=now,
        sequence=sequence,
        stream=stream or recorded.stream,
        extensions={EXTENSION_NAMESPACE + "recorded_resolution_id": original.id},
    )


DEFAULT_STREAM = "aais-langgraph.authority"
"""The authority's AAIS ``stream`` (SPEC §3: durable bindings MUST provide it) unless
``ApprovalAuthority(stream=...)`` names another. Every envelope the authority emits into
its ledger's event stream (requested, resolved, snapshot) carries it."""

UNKNOWN_EXECUTIONS_EXTENSION = EXTENSION_NAMESPACE + "unknown_executions"
"""Snapshot extension: approved requests whose execution outcome is unknown (a run
executing them died), for a human to reconcile. They are resolved, so they are
not in ``pending`` (SPEC §4.4); execution state is the runtime's (§4.3)."""


def snapshot_envelope(
    pending: list[dict[str, Any]],
    *,
    as_of: int,
    now: datetime,
    stream: str | None,
    unknown_executions: list[dict[str, Any]] | None = None,
) -> ApprovalSnapshot:
    """``approval.snapshot`` of the given pending requests as of a sequence.

    Args:
        pending: the pending requests, as JSON.
        as_of: the sequence the snapshot holds the state of.
        now: when it was taken.
        stream: the envelope's stream id.
        unknown_executions: approved actions of unknown outcome, for the snapshot's extension.
    """
    envelope = envelope_document(
        "approval.snapshot",
        "snapshot",
        {"as_of_sequence": as_of, "pending": pending},
        occurred_at=format_timestamp(now),
        sequence=as_of,
        stream=stream,
        extensions={UNKNOWN_EXECUTIONS_EXTENSION: unknown_executions}
        if unknown_executions
        else None,
    )
    return ApprovalSnapshot.from_data(envelope)


def snapshot_of(
    pending: Sequence[Request],
    *,
    as_of: int,
    now: datetime,
    stream: str | None,
    unknown_executions: list[dict[str, Any]] | None = None,
) -> ApprovalSnapshot:
    """:func:`snapshot_envelope` around requests that are validated models already (read
    back once from rows the ledger vouches for, or built here): the envelope is
    validated, the requests are not again (re-validating recomputed every action digest).

    Args:
        pending: the pending requests, validated models.
        as_of: the sequence the snapshot holds the state of.
        now: when it was taken.
        stream: the envelope's stream id.
        unknown_executions: approved actions of unknown outcome, for the snapshot's extension.
    """
    for index, request in enumerate(pending):
        if type(request) is not Request:
            raise TypeError(f"pending[{index}]: a validated Request model is required")
    empty = snapshot_envelope(
        [], as_of=as_of, now=now, stream=stream, unknown_executions=unknown_executions
    )
    body = empty.snapshot.model_copy(update={"pending": list(pending)})
    return empty.model_copy(update={"snapshot": body})


def check_size(envelope: Envelope | dict[str, Any], max_bytes: int = DEFAULT_MAX_BYTES) -> None:
    """Refuse an envelope (or its JSON document) whose compact JSON form exceeds ``max_bytes``.

    JSON text is bounded when parsed; a mapping or model is bounded here, before
    anything is stored. The compact form is within a few bytes per number of the
    canonical one, and much cheaper to produce.
    """
    document = envelope if isinstance(envelope, dict) else envelope.to_json()
    text = json.dumps(document, ensure_ascii=False, separators=(",", ":"))
    if len(text) > max_bytes or len(text.encode("utf-8")) > max_bytes:
        raise AAISValidationError("", f"document larger than {max_bytes} bytes")


def _canonical(document: dict[str, Any]) -> bytes:
    # Depth was bounded when the envelope was parsed.
    return canonical_json(document, max_depth=sys.maxsize)


def _digest(document: dict[str, Any]) -> str:
    return "sha256:" + hashlib.sha256(_canonical(document)).hexdigest()


def rejection_audit(decided: ApprovalDecided, rejected: ApprovalResolved) -> dict[str, Any]:
    """The audit payload of a decision answered ``stale`` or ``invalid`` without recording it.

    Ids, digests and the outcome only, like the ledger's own payloads: never values.
    """
    decision = decided.decision
    return {
        "request_id": decision.request_id,
        "decision_id": decision.id,
        "event_id": decided.id,
        "decision": decision.decision,
        "scope": decision.scope,
        "actor_id": decision.actor.id,
        "action_digest": decision.action_digest,
        "outcome": rejected.resolution.outcome,
        "envelope_digest": _digest(decided.to_json()),
    }


def resolution_audit(
    resolved: ApprovalResolved,
    *,
    decision_id: str | None = None,
    action_name: str | None = None,
) -> dict[str, Any]:
    """The audit payload of a resolution the ledger does not record itself.

    Used for ``conflict`` answers (``decision_id`` names the refused decision) and
    for standing resolutions by policy or grant (``action_name`` names the action).
    """
    resolution = resolved.resolution
    payload: dict[str, Any] = {
        "request_id": resolution.request_id,
        "resolution_id": resolution.id,
        "decision_id": decision_id,
        "event_id": resolved.id,
        "outcome": resolution.outcome,
        "action_digest": resolution.action_digest,
        "extensions": resolution.extensions or {},
        "envelope_digest": _digest(resolved.to_json()),
    }
    if action_name is not None:
        payload["action_name"] = action_name
    return payload

"""Spec-shaped AAIS envelopes and grants for ledger tests, built with the protocol layer."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from aais_langgraph.ledger import Grant, ResolutionWrite
from aais_langgraph.protocol import (
    ApprovalResolved,
    build_decision,
    build_request,
    format_timestamp,
)

EPOCH = datetime(2026, 1, 1, tzinfo=timezone.utc)
"""Requests are created at this moment, so expiry is a known epoch value."""

SCOPED_CHOICES: list[dict[str, Any]] = [
    {"decision": "approve", "scope": "once", "label": "Approve once"},
    {
        "decision": "approve",
        "scope": "session",
        "label": "Approve for this session",
        "scope_constraints": {"path_prefix": "/tmp"},
    },
    {"decision": "deny", "scope": "once", "label": "Deny"},
]


def request_envelope(
    request_id: str,
    *,
    session_id: str = "sess_1",
    action_name: str = "shell",
    expires_in: float = 900.0,
    arguments: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """An ``approval.requested`` envelope created at :data:`EPOCH`."""
    envelope = build_request(
        {
            "kind": "tool_call",
            "name": action_name,
            "summary": f"Run {action_name}",
            "arguments": {"command": "ls -la"} if arguments is None else arguments,
        },
        origin={"harness": "tests", "session_id": session_id},
        choices=SCOPED_CHOICES,
        request_id=request_id,
        created_at=EPOCH,
        expires_in=timedelta(seconds=expires_in),
    )
    return envelope.model_dump(mode="json", exclude_none=True)


def expiry_of(expires_in: float) -> float:
    """The epoch-seconds expiry of a request made with ``expires_in``."""
    return (EPOCH + timedelta(seconds=expires_in)).timestamp()


def resolved_envelope(
    requested: dict[str, Any],
    *,
    resolution_id: str,
    outcome: str = "approved",
    decision_id: str | None = None,
    effective_scope: str | None = "once",
) -> dict[str, Any]:
    """An ``approval.resolved`` envelope for ``requested``, validated against the model."""
    request = requested["request"]
    resolution: dict[str, Any] = {
        "id": resolution_id,
        "request_id": request["id"],
        "action_digest": request["action_digest"],
        "resolved_at": format_timestamp(EPOCH + timedelta(seconds=60)),
        "outcome": outcome,
        "message": f"Resolved {outcome}",
    }
    if decision_id is not None:
        resolution["decision_id"] = decision_id
    if effective_scope is not None and outcome == "approved":
        resolution["effective_scope"] = effective_scope
    envelope = {
        "aais": "1.0",
        "type": "approval.resolved",
        "id": f"evt_{resolution_id}",
        "occurred_at": resolution["resolved_at"],
        "sequence": 0,
        "resolution": resolution,
    }
    return ApprovalResolved.from_data(envelope).model_dump(mode="json", exclude_none=True)


def decided_envelope(
    requested: dict[str, Any], *, decision_id: str, decision: str = "approve", scope: str = "once"
) -> dict[str, Any]:
    """An ``approval.decided`` envelope for ``requested`` by a human actor."""
    envelope = build_decision(
        requested,
        decision=decision,  # type: ignore[arg-type]
        scope=scope,  # type: ignore[arg-type]
        actor={"id": "user_alex", "type": "human"},
        decision_id=decision_id,
        decided_at=EPOCH + timedelta(seconds=30),
    )
    return envelope.model_dump(mode="json", exclude_none=True)


def grant_for(
    requested: dict[str, Any],
    *,
    grant_id: str,
    scope: str = "session",
    created_at: float = 100.0,
) -> Grant:
    """A grant recorded from an approved ``scope`` choice of ``requested``."""
    request = requested["request"]
    return Grant(
        grant_id=grant_id,
        request_id=request["id"],
        scope=scope,  # type: ignore[arg-type]
        session_id=request["origin"]["session_id"],
        action_name=request["action"]["name"],
        constraints={"path_prefix": "/tmp"},
        created_at=created_at,
    )


def approval(
    requested: dict[str, Any],
    *,
    resolution_id: str = "res_1",
    decision_id: str | None = "dec_1",
    grant: Grant | None = None,
    outcome: str = "approved",
) -> ResolutionWrite:
    """A complete resolution write: decision (if ``decision_id``), resolution and grant."""
    request_id = requested["request"]["id"]
    decided = None
    if decision_id is not None:
        decided = decided_envelope(
            requested,
            decision_id=decision_id,
            decision="approve" if outcome == "approved" else "deny",
            scope=grant.scope if grant is not None else "once",
        )
    return ResolutionWrite(
        request_id=request_id,
        resolved=resolved_envelope(
            requested,
            resolution_id=resolution_id,
            outcome=outcome,
            decision_id=decision_id,
            effective_scope=grant.scope if grant is not None else "once",
        ),
        decided=decided,
        decision_fingerprint=None if decision_id is None else f"fp_{decision_id}",
        grant=grant,
    )

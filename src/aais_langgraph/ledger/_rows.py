"""Row <-> record conversions shared by the SQL backends (same columns in each)."""

from __future__ import annotations

from typing import Any

from ._records import load_json
from .base import AuditEntry, Grant, JsonDict, StoredRequest

REQUEST_COLUMNS = "request_id, envelope, session_id, expires_at, status, thread_id, context"
GRANT_COLUMNS = (
    "grant_id, request_id, scope, session_id, action_name, constraints, created_at, "
    "expires_at, revoked_at"
)
AUDIT_COLUMNS = "idx, kind, occurred_at, payload, prev_hash, entry_hash"


def audit_from_row(row: tuple[Any, ...]) -> AuditEntry:
    """An audit entry from a row of :data:`AUDIT_COLUMNS`."""
    index, kind, occurred_at, payload, prev_hash, entry_hash = row
    return AuditEntry(int(index), kind, occurred_at, json_object(payload), prev_hash, entry_hash)


def request_from_row(row: tuple[Any, ...]) -> StoredRequest:
    """A stored request from a row of :data:`REQUEST_COLUMNS`."""
    request_id, envelope, session_id, expires_at, status, thread_id, context = row
    return StoredRequest(
        request_id=request_id,
        envelope=json_object(envelope),
        session_id=session_id,
        expires_at=expires_at,
        status=status,
        thread_id=thread_id,
        context=json_object(context),
    )


def grant_from_row(row: tuple[Any, ...]) -> Grant:
    """A grant from a row of :data:`GRANT_COLUMNS`."""
    grant_id, request_id, scope, session_id, action_name, constraints, *times = row
    created_at, expires_at, revoked_at = times
    return Grant(
        grant_id=grant_id,
        request_id=request_id,
        scope=scope,
        session_id=session_id,
        action_name=action_name,
        constraints=json_object(constraints),
        created_at=created_at,
        expires_at=expires_at,
        revoked_at=revoked_at,
    )


def json_object(text: str) -> JsonDict:
    """A JSON object read back from a text column."""
    value = load_json(text)
    if not isinstance(value, dict):
        raise ValueError("ledger row holds JSON that is not an object")
    return value

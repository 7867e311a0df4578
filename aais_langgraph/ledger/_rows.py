"""Row <-> record conversions and queries shared by the SQL backends (same columns in each)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any, TypeVar, cast

from .executions import Execution
from .integrity import LedgerIntegrityError
from .outbox import Work, WorkState
from .records import (
    AuditEntry,
    Grant,
    JsonDict,
    PendingRow,
    StoredRequest,
    StoredResolution,
    dump_json,
    load_json,
)

R = TypeVar("R")

REQUEST_COLUMNS = (
    "request_id, envelope, session_id, expires_at, status, thread_id, context, audit_index, mac"
)
RESOLUTION_COLUMNS = "request_id, envelope, decision_fingerprint, audit_index, mac"
GRANT_COLUMNS = (
    "grant_id, request_id, scope, session_id, action_name, constraints, created_at, "
    "expires_at, revoked_at, audit_index, mac"
)
AUDIT_COLUMNS = "idx, kind, occurred_at, payload, prev_hash, entry_hash"
EXECUTION_COLUMNS = (
    "request_id, thread_id, state, holder, attempt, started_at, live_until, updated_at, "
    "reconciled_by, mac"
)

#: One consistent read of everything ``audit verify`` cross-checks (see ``Ledger.contents``).
CONTENTS_QUERIES = {
    "requests": f"SELECT {REQUEST_COLUMNS} FROM aais_requests ORDER BY sequence",
    "resolutions": f"SELECT {RESOLUTION_COLUMNS} FROM aais_resolutions ORDER BY request_id",
    "grants": f"SELECT {GRANT_COLUMNS} FROM aais_grants ORDER BY ordinal",
    "events": "SELECT sequence, envelope FROM aais_events ORDER BY sequence",
    "audit": f"SELECT {AUDIT_COLUMNS} FROM aais_audit ORDER BY idx",
    "executions": f"SELECT {EXECUTION_COLUMNS} FROM aais_executions ORDER BY request_id",
    "tombstones": "SELECT request_id FROM aais_compacted_requests",
    "threads": "SELECT thread_id, owner FROM aais_threads",
    "thread_posts": "SELECT thread_id, poster FROM aais_thread_posts",
}


def _readable(
    table: str,
) -> Callable[[Callable[[tuple[Any, ...]], R]], Callable[[tuple[Any, ...]], R]]:
    """A row that cannot be converted (malformed JSON, a number column holding text) is an
    integrity error naming the table and the row's key, not a crash."""

    def decorate(convert: Callable[[tuple[Any, ...]], R]) -> Callable[[tuple[Any, ...]], R]:
        @functools.wraps(convert)
        def checked(row: tuple[Any, ...]) -> R:
            try:
                return convert(row)
            except (ValueError, TypeError):
                raise LedgerIntegrityError(
                    table, str(row[0]), "it cannot be read (a malformed column)"
                ) from None

        return checked

    return decorate


@_readable("aais_events")
def event_from_row(row: tuple[Any, ...]) -> tuple[int, JsonDict]:
    """``(sequence, envelope)`` from a ``sequence, envelope`` row."""
    sequence, envelope = row
    return int(sequence), json_object(envelope)


@_readable("aais_audit")
def audit_from_row(row: tuple[Any, ...]) -> AuditEntry:
    """An audit entry from a row of :data:`AUDIT_COLUMNS`."""
    index, kind, occurred_at, payload, prev_hash, entry_hash = row
    return AuditEntry(int(index), kind, occurred_at, json_object(payload), prev_hash, entry_hash)


@_readable("aais_requests")
def request_from_row(row: tuple[Any, ...]) -> StoredRequest:
    """A stored request from a row of :data:`REQUEST_COLUMNS`."""
    request_id, envelope, session_id, expires_at, status, thread_id, context, *vouch = row
    audit_index, mac = vouch
    return StoredRequest(
        request_id=request_id,
        envelope=json_object(envelope),
        session_id=session_id,
        expires_at=expires_at,
        status=status,
        thread_id=thread_id,
        context=json_object(context),
        audit_index=None if audit_index is None else int(audit_index),
        mac=mac,
    )


PENDING_COLUMNS = (
    "request_id, envelope, session_id, expires_at, thread_id, context, audit_index, mac"
)
"""The columns of a :class:`~.base.PendingRow`, in its order (read from the covering index)."""


class PendingRows:
    """The pending rows a ledger handed out last, so a row read again with the same
    content (every column equal) is handed out as the same object: a listing then
    compares rows by identity, and keeps nothing new alive for an unchanged row.
    Values are as stored (the listing checks the types of a row it has not seen)."""

    _LIMIT = 50_000
    """Rows remembered from partial listings before what no whole listing has pruned is
    forgotten: a bound, not a size to reach."""

    def __init__(self) -> None:
        self._last: dict[Any, PendingRow] = {}

    def of(self, fetched: Iterable[tuple[Any, ...]], *, whole: bool) -> list[PendingRow]:
        """``fetched`` rows of :data:`PENDING_COLUMNS`; ``whole``: every pending row (what
        is remembered is then exactly these)."""
        last = self._last
        now: dict[Any, PendingRow] = {}
        rows: list[PendingRow] = []
        for raw in fetched:
            row = last.get(raw[0])
            if row is None or row != raw:
                row = now[raw[0]] = PendingRow._make(raw)
            elif whole:
                now[raw[0]] = row
            rows.append(row)
        if whole:
            self._last = now
        elif now:
            merged = {**last, **now}
            self._last = merged if len(merged) <= self._LIMIT else now
        return rows


@_readable("aais_resolutions")
def resolution_from_row(row: tuple[Any, ...]) -> StoredResolution:
    """A stored resolution from a row of :data:`RESOLUTION_COLUMNS`."""
    request_id, envelope, decision_fingerprint, audit_index, mac = row
    return StoredResolution(
        request_id,
        json_object(envelope),
        decision_fingerprint,
        audit_index=None if audit_index is None else int(audit_index),
        mac=mac,
    )


@_readable("aais_grants")
def grant_from_row(row: tuple[Any, ...]) -> Grant:
    """A grant from a row of :data:`GRANT_COLUMNS`."""
    grant_id, request_id, scope, session_id, action_name, constraints, *times = row
    created_at, expires_at, revoked_at, audit_index, mac = times
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
        audit_index=None if audit_index is None else int(audit_index),
        mac=mac,
    )


def json_object(text: str) -> JsonDict:
    """A JSON object read back from a text column."""
    value = load_json(text)
    if not isinstance(value, dict):
        raise ValueError("ledger row holds JSON that is not an object")
    return value


# -- statements (``?`` marks; see ``SqlBackend.mark``) and the rows they write -------

INSERT_REQUEST = (
    "INSERT INTO aais_requests (request_id, sequence, session_id, thread_id, expires_at, "
    "status, envelope, context, audit_index, mac) VALUES (?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?)"
)
INSERT_RESOLUTION = f"INSERT INTO aais_resolutions ({RESOLUTION_COLUMNS}) VALUES (?, ?, ?, ?, ?)"
INSERT_GRANT = f"INSERT INTO aais_grants ({GRANT_COLUMNS}) VALUES ({', '.join('?' * 11)})"
INSERT_AUDIT = f"INSERT INTO aais_audit ({AUDIT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)"
INSERT_EVENT = "INSERT INTO aais_events (sequence, envelope) VALUES (?, ?)"
#: One statement: the upsert locks the thread's row, and its WHERE admits only the
#: current holder or an expired lease; no row written means someone else holds it.
ACQUIRE_LEASE = (
    "INSERT INTO aais_leases (thread_id, holder, expires_at) VALUES (?, ?, ?) "
    "ON CONFLICT (thread_id) DO UPDATE "
    "SET holder = excluded.holder, expires_at = excluded.expires_at "
    "WHERE aais_leases.holder = excluded.holder OR aais_leases.expires_at <= ?"
)
RENEW_LEASE = (
    "UPDATE aais_leases SET expires_at = ? WHERE thread_id = ? AND holder = ? AND expires_at > ?"
)
RELEASE_LEASE = "DELETE FROM aais_leases WHERE thread_id = ? AND holder = ?"


def request_row(
    stored: StoredRequest, envelope_text: str | None = None, context_text: str | None = None
) -> tuple[Any, ...]:
    """The values of :data:`INSERT_REQUEST` for a new pending request (``envelope_text``
    and ``context_text``: the JSON text to store, when the caller has it already; else
    their :func:`dump_json` text)."""
    return (
        stored.request_id,
        stored.envelope["sequence"],
        stored.session_id,
        stored.thread_id,
        stored.expires_at,
        dump_json(stored.envelope) if envelope_text is None else envelope_text,
        dump_json(stored.context) if context_text is None else context_text,
        stored.audit_index,
        stored.mac,
    )


def resolution_row(stored: StoredResolution, envelope_text: str | None = None) -> tuple[Any, ...]:
    """The values of :data:`INSERT_RESOLUTION` (``envelope_text`` as for :func:`request_row`)."""
    envelope = dump_json(stored.envelope) if envelope_text is None else envelope_text
    return stored.request_id, envelope, stored.decision_fingerprint, stored.audit_index, stored.mac


def grant_row(grant: Grant) -> tuple[Any, ...]:
    """The values of :data:`INSERT_GRANT` (:data:`GRANT_COLUMNS` order)."""
    row = {**grant.to_json(), "audit_index": grant.audit_index, "mac": grant.mac}
    return tuple({**row, "constraints": dump_json(grant.constraints)}.values())


def audit_row(entry: AuditEntry) -> tuple[Any, ...]:
    """The values of :data:`INSERT_AUDIT`."""
    payload = dump_json(entry.payload)
    return entry.index, entry.kind, entry.occurred_at, payload, entry.prev_hash, entry.entry_hash


def grants_query(
    session_id: str | None, action_name: str | None, include_revoked: bool
) -> tuple[str, list[Any]]:
    """SQL and parameters of ``list_grants``: usable in a session, for one action name."""
    sql = f"SELECT {GRANT_COLUMNS} FROM aais_grants WHERE 1 = 1"
    params: list[Any] = []
    if session_id is not None:
        sql += " AND (scope = 'persistent' OR session_id = ?)"
        params.append(session_id)
    if action_name is not None:
        sql += " AND action_name = ?"
        params.append(action_name)
    if not include_revoked:
        sql += " AND revoked_at IS NULL"
    return sql + " ORDER BY ordinal", params


def work_from_row(row: tuple[Any, ...]) -> Work:
    """A row of the outbox's columns (:data:`WORK_COLUMNS` order) as a record."""
    kind, work_id, request_id, thread_id, state, attempts, next_at, last_error, *rest = row
    created_at, updated_at, target, topic, coalesce_key, claimed_by, claim_until, result = rest
    return Work(
        kind,
        work_id,
        request_id,
        thread_id,
        cast("WorkState", state),
        int(attempts),
        float(next_at),
        last_error,
        float(created_at),
        float(updated_at),
        target,
        topic,
        coalesce_key,
        claimed_by,
        float(claim_until),
        result,
    )


def work_row(work: Work) -> tuple[Any, ...]:
    """The values of the outbox's columns (:data:`WORK_COLUMNS` order) for ``work``."""
    return (
        work.kind,
        work.work_id,
        work.request_id,
        work.thread_id,
        work.state,
        work.attempts,
        work.next_at,
        work.last_error,
        work.created_at,
        work.updated_at,
        work.target,
        work.topic,
        work.coalesce_key,
        work.claimed_by,
        work.claim_until,
        work.result,
    )


WORK_COLUMNS = (
    "kind, work_id, request_id, thread_id, state, attempts, next_at, last_error, "
    "created_at, updated_at, target, topic, coalesce_key, claimed_by, claim_until, result"
)
"""The outbox's columns, in :class:`Work`'s field order."""


def execution_from_row(row: tuple[Any, ...]) -> Execution:
    """An execution record from a row of :data:`EXECUTION_COLUMNS`."""
    request_id, thread_id, state, holder, attempt, started, live_until, updated, by, mac = row
    return Execution(
        request_id, thread_id, state, holder, int(attempt), started, live_until, updated, by, mac
    )


def execution_row(record: Execution) -> tuple[Any, ...]:
    """The values of :data:`EXECUTION_COLUMNS` for ``record``."""
    return (
        record.request_id,
        record.thread_id,
        record.state,
        record.holder,
        record.attempt,
        record.started_at,
        record.live_until,
        record.updated_at,
        record.reconciled_by,
        record.mac,
    )

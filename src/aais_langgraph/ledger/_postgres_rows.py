"""The Postgres ledger's schema and row helpers: DDL, the locked meta row, row mapping.

Every helper runs inside the caller's transaction on the caller's cursor.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import psycopg

from ._records import RequestFields, dump_json, next_audit_entry
from ._rows import AUDIT_COLUMNS as AUDIT_COLUMNS
from ._rows import CONTENTS_QUERIES, VOUCH_COLUMNS, backfill_audit_indexes, event_from_row
from ._rows import GRANT_COLUMNS as GRANT_COLUMNS
from ._rows import REQUEST_COLUMNS as REQUEST_COLUMNS
from ._rows import RESOLUTION_COLUMNS as RESOLUTION_COLUMNS
from ._rows import audit_from_row as audit_from_row
from ._rows import grant_from_row as grant_from_row
from ._rows import json_object as json_object
from ._rows import request_from_row as request_from_row
from ._rows import resolution_from_row as resolution_from_row
from .base import AuditEntry, Grant, JsonDict, LedgerContents, StoredRequest, StoredResolution

SCHEMA_VERSION = 2
"""Version 2 added ``audit_index`` and ``mac`` to requests, resolutions and grants."""

# pg_advisory_xact_lock key that serializes concurrent setup() calls on one database
# (CREATE TABLE IF NOT EXISTS alone is not safe against a concurrent creator).
SETUP_LOCK = 0x4141_4953_4C45_4447  # "AAISLEDG"

SCHEMA = (
    # One row: the sequence counter and the recorded audit tip, the ledger's write lock.
    """CREATE TABLE IF NOT EXISTS aais_meta (
        singleton BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (singleton),
        schema_version INTEGER NOT NULL,
        last_sequence BIGINT NOT NULL,
        audit_tip_index BIGINT,
        audit_tip_hash TEXT,
        CHECK ((audit_tip_index IS NULL) = (audit_tip_hash IS NULL))
    )""",
    """CREATE TABLE IF NOT EXISTS aais_requests (
        request_id TEXT PRIMARY KEY,
        sequence BIGINT NOT NULL,
        session_id TEXT NOT NULL,
        thread_id TEXT,
        expires_at DOUBLE PRECISION,
        status TEXT NOT NULL CHECK (status IN ('pending', 'resolved')),
        envelope TEXT NOT NULL,
        context TEXT NOT NULL
    )""",
    # Only pending rows are indexed, so list_pending costs O(pending), not O(history).
    """CREATE INDEX IF NOT EXISTS aais_requests_pending
        ON aais_requests (sequence) WHERE status = 'pending'""",
    """CREATE TABLE IF NOT EXISTS aais_resolutions (
        request_id TEXT PRIMARY KEY,
        envelope TEXT NOT NULL,
        decision_fingerprint TEXT
    )""",
    """CREATE TABLE IF NOT EXISTS aais_grants (
        ordinal BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        grant_id TEXT NOT NULL UNIQUE,
        request_id TEXT NOT NULL,
        scope TEXT NOT NULL CHECK (scope IN ('session', 'persistent')),
        session_id TEXT NOT NULL,
        action_name TEXT NOT NULL,
        constraints TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        expires_at DOUBLE PRECISION,
        revoked_at DOUBLE PRECISION
    )""",
    "CREATE INDEX IF NOT EXISTS aais_grants_action ON aais_grants (action_name)",
    """CREATE TABLE IF NOT EXISTS aais_events (
        sequence BIGINT PRIMARY KEY,
        envelope TEXT NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS aais_audit (
        idx BIGINT PRIMARY KEY,
        kind TEXT NOT NULL,
        occurred_at TEXT NOT NULL,
        payload TEXT NOT NULL,
        prev_hash TEXT NOT NULL,
        entry_hash TEXT NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS aais_leases (
        thread_id TEXT PRIMARY KEY,
        holder TEXT NOT NULL,
        expires_at DOUBLE PRECISION NOT NULL
    )""",
)


Cursor = psycopg.Cursor[tuple[Any, ...]]


def migrate(cur: Cursor, version: int) -> None:
    """Bring a version-1 schema to version 2 (columns, then audit indexes); idempotent."""
    for table in VOUCH_COLUMNS:
        cur.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS audit_index BIGINT")
        cur.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS mac TEXT")
    if version == 1:
        cur.execute(CONTENTS_QUERIES["audit"])
        entries = [audit_from_row(row) for row in cur.fetchall()]
        backfill_audit_indexes(entries, cur.execute, "%s")
        cur.execute("UPDATE aais_meta SET schema_version = %s", (SCHEMA_VERSION,))


def contents(cur: Cursor) -> LedgerContents:
    """Everything ``audit verify`` reads, inside the caller's repeatable-read transaction."""
    rows: dict[str, list[tuple[Any, ...]]] = {}
    for name, sql in CONTENTS_QUERIES.items():
        cur.execute(sql)
        rows[name] = cur.fetchall()
    cur.execute("SELECT last_sequence, audit_tip_index, audit_tip_hash FROM aais_meta")
    meta = cur.fetchone()
    last_sequence, tip_index, tip_hash = meta if meta is not None else (0, None, None)
    return LedgerContents(
        requests=[request_from_row(row) for row in rows["requests"]],
        resolutions=[resolution_from_row(row) for row in rows["resolutions"]],
        grants=[grant_from_row(row) for row in rows["grants"]],
        events=[event_from_row(row) for row in rows["events"]],
        audit=[audit_from_row(row) for row in rows["audit"]],
        audit_tip=None if tip_index is None else (int(tip_index), str(tip_hash)),
        last_sequence=int(last_sequence),
    )


class LockedMeta:
    """The meta row locked for one transaction: allocates sequences and chains audit entries.

    The row is locked on entry and written back on a clean exit if it changed; it is always the
    last lock a transaction takes, which keeps the lock order free of cycles.
    """

    def __init__(self, cur: Cursor) -> None:
        self._cur = cur
        self.last_sequence = 0
        self.tip: tuple[int, str] | None = None
        self._changed = False

    def __enter__(self) -> LockedMeta:
        self._cur.execute(
            "SELECT last_sequence, audit_tip_index, audit_tip_hash FROM aais_meta FOR UPDATE"
        )
        row = self._cur.fetchone()
        if row is None:
            raise RuntimeError("the ledger schema is missing its meta row; call setup() first")
        self.last_sequence = int(row[0])
        self.tip = None if row[1] is None else (int(row[1]), str(row[2]))
        return self

    def __exit__(self, exc_type: object, exc: object, traceback: object) -> None:
        if exc_type is None and self._changed:
            tip_index, tip_hash = self.tip if self.tip is not None else (None, None)
            self._cur.execute(
                "UPDATE aais_meta SET last_sequence = %s, audit_tip_index = %s, "
                "audit_tip_hash = %s",
                (self.last_sequence, tip_index, tip_hash),
            )

    def allocate(self, count: int) -> int:
        """Reserve ``count`` consecutive sequences and return the first."""
        first = self.last_sequence + 1
        self.last_sequence += count
        self._changed = True
        return first

    def append_audit(self, kind: str, payload: Mapping[str, Any]) -> AuditEntry:
        """Append one chained entry after the tip; the new tip is saved on exit."""
        entry = next_audit_entry(self.tip, kind, payload)
        self._cur.execute(
            f"INSERT INTO aais_audit ({AUDIT_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s)",
            (
                entry.index,
                entry.kind,
                entry.occurred_at,
                dump_json(entry.payload),
                entry.prev_hash,
                entry.entry_hash,
            ),
        )
        self.tip = (entry.index, entry.entry_hash)
        self._changed = True
        return entry


def insert_event(cur: Cursor, envelope: JsonDict) -> None:
    cur.execute(
        "INSERT INTO aais_events (sequence, envelope) VALUES (%s, %s)",
        (envelope["sequence"], dump_json(envelope)),
    )


def insert_request(
    cur: Cursor,
    fields: RequestFields,
    thread_id: str | None,
    envelope: JsonDict,
    context: JsonDict,
    audit_index: int,
    mac: str | None,
) -> None:
    """Insert a pending request whose envelope already carries its sequence."""
    cur.execute(
        "INSERT INTO aais_requests (request_id, sequence, session_id, thread_id, "
        "expires_at, status, envelope, context, audit_index, mac) "
        "VALUES (%s, %s, %s, %s, %s, 'pending', %s, %s, %s, %s)",
        (
            fields.request_id,
            envelope["sequence"],
            fields.session_id,
            thread_id,
            fields.expires_at,
            dump_json(envelope),
            dump_json(context),
            audit_index,
            mac,
        ),
    )


def insert_resolution(cur: Cursor, recorded: StoredResolution) -> None:
    """Mark the request resolved and store its one resolution."""
    cur.execute(
        "UPDATE aais_requests SET status = 'resolved' WHERE request_id = %s",
        (recorded.request_id,),
    )
    cur.execute(
        f"INSERT INTO aais_resolutions ({RESOLUTION_COLUMNS}) VALUES (%s, %s, %s, %s, %s)",
        (
            recorded.request_id,
            dump_json(recorded.envelope),
            recorded.decision_fingerprint,
            recorded.audit_index,
            recorded.mac,
        ),
    )


def insert_grant(cur: Cursor, grant: Grant) -> None:
    cur.execute(
        f"INSERT INTO aais_grants ({GRANT_COLUMNS}) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
        (
            grant.grant_id,
            grant.request_id,
            grant.scope,
            grant.session_id,
            grant.action_name,
            dump_json(grant.constraints),
            grant.created_at,
            grant.expires_at,
            grant.revoked_at,
            grant.audit_index,
            grant.mac,
        ),
    )


def request(cur: Cursor, request_id: str) -> StoredRequest | None:
    cur.execute(f"SELECT {REQUEST_COLUMNS} FROM aais_requests WHERE request_id = %s", (request_id,))
    row = cur.fetchone()
    return None if row is None else request_from_row(row)


def resolution(cur: Cursor, request_id: str) -> StoredResolution | None:
    cur.execute(
        f"SELECT {RESOLUTION_COLUMNS} FROM aais_resolutions WHERE request_id = %s", (request_id,)
    )
    row = cur.fetchone()
    return None if row is None else resolution_from_row(row)

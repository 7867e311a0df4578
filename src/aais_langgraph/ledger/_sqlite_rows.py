"""The SQLite ledger's schema and row helpers: DDL, meta rows, chained audit appends, row mapping.

Every helper runs inside the caller's transaction on the caller's connection.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from typing import Any

from ._records import dump_json, load_json, next_audit_entry
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
from .base import AuditEntry, Grant, JsonDict, LedgerContents, StoredResolution

SCHEMA_VERSION = 2
"""Version 2 added ``audit_index`` and ``mac`` to requests, resolutions and grants."""

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS aais_meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS aais_requests (
        request_id TEXT PRIMARY KEY,
        sequence INTEGER NOT NULL,
        session_id TEXT NOT NULL,
        thread_id TEXT,
        expires_at REAL,
        status TEXT NOT NULL CHECK (status IN ('pending', 'resolved')),
        envelope TEXT NOT NULL,
        context TEXT NOT NULL
    ) WITHOUT ROWID""",
    # Only pending rows are indexed, so list_pending costs O(pending), not O(history).
    """CREATE INDEX IF NOT EXISTS aais_requests_pending
        ON aais_requests (sequence) WHERE status = 'pending'""",
    """CREATE TABLE IF NOT EXISTS aais_resolutions (
        request_id TEXT PRIMARY KEY,
        envelope TEXT NOT NULL,
        decision_fingerprint TEXT
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS aais_grants (
        ordinal INTEGER PRIMARY KEY,
        grant_id TEXT NOT NULL UNIQUE,
        request_id TEXT NOT NULL,
        scope TEXT NOT NULL CHECK (scope IN ('session', 'persistent')),
        session_id TEXT NOT NULL,
        action_name TEXT NOT NULL,
        constraints TEXT NOT NULL,
        created_at REAL NOT NULL,
        expires_at REAL,
        revoked_at REAL
    )""",
    "CREATE INDEX IF NOT EXISTS aais_grants_action ON aais_grants (action_name)",
    """CREATE TABLE IF NOT EXISTS aais_events (
        sequence INTEGER PRIMARY KEY,
        envelope TEXT NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS aais_audit (
        idx INTEGER PRIMARY KEY,
        kind TEXT NOT NULL,
        occurred_at TEXT NOT NULL,
        payload TEXT NOT NULL,
        prev_hash TEXT NOT NULL,
        entry_hash TEXT NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS aais_leases (
        thread_id TEXT PRIMARY KEY,
        holder TEXT NOT NULL,
        expires_at REAL NOT NULL
    ) WITHOUT ROWID""",
)


def migrate(conn: sqlite3.Connection, version: str | None) -> None:
    """Bring a version-1 schema to version 2 (columns, then audit indexes); idempotent."""
    for table in VOUCH_COLUMNS:
        columns = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        if "audit_index" not in columns:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN audit_index INTEGER")
        if "mac" not in columns:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN mac TEXT")
    if version == "1":
        entries = [audit_from_row(row) for row in conn.execute(CONTENTS_QUERIES["audit"])]
        backfill_audit_indexes(entries, conn.execute, "?")
        set_meta(conn, "schema_version", str(SCHEMA_VERSION))


def has_schema(conn: sqlite3.Connection) -> bool:
    """Whether the ledger's meta table exists (raises ``sqlite3.DatabaseError`` on a file
    that is not a SQLite database)."""
    row = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'aais_meta'"
    ).fetchone()
    return row is not None


def contents(conn: sqlite3.Connection) -> LedgerContents:
    """Everything ``audit verify`` reads, inside the caller's read transaction."""
    rows = {name: conn.execute(sql).fetchall() for name, sql in CONTENTS_QUERIES.items()}
    return LedgerContents(
        requests=[request_from_row(row) for row in rows["requests"]],
        resolutions=[resolution_from_row(row) for row in rows["resolutions"]],
        grants=[grant_from_row(row) for row in rows["grants"]],
        events=[event_from_row(row) for row in rows["events"]],
        audit=[audit_from_row(row) for row in rows["audit"]],
        audit_tip=audit_tip(conn),
        last_sequence=int(meta(conn, "last_sequence") or 0),
    )


def meta(conn: sqlite3.Connection, key: str) -> str | None:
    """The value of a meta row (sequence counter, audit tip, schema version), if set."""
    row = conn.execute("SELECT value FROM aais_meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


def set_meta(conn: sqlite3.Connection, key: str, value: str) -> None:
    """Insert or overwrite a meta row."""
    conn.execute(
        "INSERT INTO aais_meta (key, value) VALUES (?, ?) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (key, value),
    )


def allocate_sequences(conn: sqlite3.Connection, count: int) -> int:
    """Reserve ``count`` consecutive sequences and return the first."""
    last = int(meta(conn, "last_sequence") or 0)
    set_meta(conn, "last_sequence", str(last + count))
    return last + 1


def insert_event(conn: sqlite3.Connection, envelope: JsonDict) -> None:
    """Store an envelope in the event stream under its sequence."""
    conn.execute(
        "INSERT INTO aais_events (sequence, envelope) VALUES (?, ?)",
        (envelope["sequence"], dump_json(envelope)),
    )


def audit_tip(conn: sqlite3.Connection) -> tuple[int, str] | None:
    """The recorded ``(index, hash)`` of the last audit entry, kept apart from the entries."""
    text = meta(conn, "audit_tip")
    if text is None:
        return None
    index, entry_hash = load_json(text)
    return int(index), str(entry_hash)


def append_audit(conn: sqlite3.Connection, kind: str, payload: Mapping[str, Any]) -> AuditEntry:
    """Append one chained entry and move the recorded tip, inside the caller's transaction."""
    entry = next_audit_entry(audit_tip(conn), kind, payload)
    conn.execute(
        f"INSERT INTO aais_audit ({AUDIT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
        (
            entry.index,
            entry.kind,
            entry.occurred_at,
            dump_json(entry.payload),
            entry.prev_hash,
            entry.entry_hash,
        ),
    )
    set_meta(conn, "audit_tip", dump_json([entry.index, entry.entry_hash]))
    return entry


def insert_grant(conn: sqlite3.Connection, grant: Grant) -> None:
    """Store a grant; its ``grant_id`` must be new."""
    conn.execute(
        f"INSERT INTO aais_grants ({GRANT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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


def resolution(conn: sqlite3.Connection, request_id: str) -> StoredResolution | None:
    """The recorded resolution of a request, if any."""
    row = conn.execute(
        f"SELECT {RESOLUTION_COLUMNS} FROM aais_resolutions WHERE request_id = ?", (request_id,)
    ).fetchone()
    return None if row is None else resolution_from_row(row)

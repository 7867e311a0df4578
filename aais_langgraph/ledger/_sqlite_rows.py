"""The SQLite ledger's schema: DDL, migration, and the meta rows that hold its counters.

Every helper runs inside the caller's transaction on the caller's connection.
"""

from __future__ import annotations

import sqlite3

from ..protocol.extensions import REQUESTER_EXTENSION
from ._rows import (
    CONTENTS_QUERIES,
    REQUEST_COLUMNS,
    VOUCH_COLUMNS,
    audit_from_row,
    backfill_audit_indexes,
)
from .outbox import WORK_STATES
from .records import dump_json, load_json
from .selection import SelectionSubjects

Conn = sqlite3.Connection | sqlite3.Cursor

SCHEMA_VERSION = 3
"""Version 2 added ``audit_index`` and ``mac`` to requests, resolutions and grants;
version 3 audits execution records (``mac`` on them, :data:`EXECUTION_AUDIT_INDEX`) and
indexes pending requests by session and requester (:data:`PENDING_BOUND_DDL`)."""

EXECUTION_SUBJECT = "json_extract(payload, '$.request_id')"
"""The expression :data:`EXECUTION_AUDIT_INDEX` indexes (queries must spell it the same)."""

EXECUTION_AUDIT_INDEX = "aais_audit_executions"
EXECUTION_AUDIT_DDL = (
    f"CREATE INDEX IF NOT EXISTS {EXECUTION_AUDIT_INDEX} ON aais_audit "
    f"({EXECUTION_SUBJECT}, idx) WHERE kind = 'execution'"
)
"""A request's execution entries, newest found at once (only ``execution`` entries)."""

THREADS_DDL = (
    """CREATE TABLE IF NOT EXISTS aais_threads (
        thread_id TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        since REAL NOT NULL
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS aais_thread_posts (
        thread_id TEXT NOT NULL,
        poster TEXT NOT NULL,
        posted_at REAL NOT NULL,
        PRIMARY KEY (thread_id, poster)
    ) WITHOUT ROWID""",
    "CREATE INDEX IF NOT EXISTS aais_requests_thread ON aais_requests (thread_id, sequence)",
)
"""Who started each thread and who posted to it, and every request by thread (what thread
access reads)."""

REQUESTER_SUBJECT = "json_extract(context, '$.requester')"
"""The expression :data:`PENDING_BOUND_DDL` indexes (queries must spell it the same)."""

PENDING_BOUND_DDL = (
    "CREATE INDEX IF NOT EXISTS aais_requests_pending_sessions ON aais_requests "
    "(session_id, sequence) WHERE status = 'pending'",
    "CREATE INDEX IF NOT EXISTS aais_requests_pending_requesters ON aais_requests "
    f"({REQUESTER_SUBJECT}) WHERE status = 'pending'",
)
"""Pending requests by session and by requester: the bounds count them on each request."""


def _envelope_member(path: str) -> str:
    # A malformed envelope (a damaged file) reads as NULL instead of failing the listing.
    return f"CASE WHEN json_valid(envelope) THEN json_extract(envelope, '{path}') END"


VIEW_SUBJECTS = SelectionSubjects(
    kind=_envelope_member("$.request.action.kind"),
    name=_envelope_member("$.request.action.name"),
    risk=_envelope_member("$.request.risk.level"),
    requester=(
        "coalesce("
        + _envelope_member(f'$.request.extensions."{REQUESTER_EXTENSION}".id')
        + ", CASE WHEN json_valid(context) THEN json_extract(context, '$.requester') END)"
    ),
)
"""The expressions a viewer's listing selects pending rows by (:data:`PENDING_VIEW_DDL`)."""

PENDING_VIEW_INDEXES = (
    "aais_requests_pending_kinds",
    "aais_requests_pending_names",
    "aais_requests_pending_owners",
)
_LISTED = REQUEST_COLUMNS
PENDING_VIEW_DDL = (
    # By kind and by requester the index covers what a listing reads, as the pending index
    # does: a viewer's rows are read from it alone, not looked up one by one in the table.
    f"CREATE INDEX IF NOT EXISTS {PENDING_VIEW_INDEXES[0]} ON aais_requests "
    f"({VIEW_SUBJECTS.kind}, sequence, {_LISTED}) WHERE status = 'pending'",
    f"CREATE INDEX IF NOT EXISTS {PENDING_VIEW_INDEXES[1]} ON aais_requests "
    f"({VIEW_SUBJECTS.name}, sequence) WHERE status = 'pending'",
    f"CREATE INDEX IF NOT EXISTS {PENDING_VIEW_INDEXES[2]} ON aais_requests "
    f"({VIEW_SUBJECTS.requester}, sequence, {_LISTED}) WHERE status = 'pending'",
)
"""Pending requests by action kind, by action name and by requester: a listing for one
viewer reads the rows their rules select, not every pending row."""


_WORK_STATES = str(WORK_STATES).replace(",)", ")")

OUTBOX_DDL = (
    f"""CREATE TABLE IF NOT EXISTS aais_outbox (
        kind TEXT NOT NULL,
        work_id TEXT NOT NULL,
        request_id TEXT NOT NULL,
        thread_id TEXT,
        state TEXT NOT NULL CHECK (state IN {_WORK_STATES}),
        attempts INTEGER NOT NULL,
        next_at REAL NOT NULL,
        last_error TEXT,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        target TEXT,
        topic TEXT,
        coalesce_key TEXT,
        claimed_by TEXT,
        claim_until REAL NOT NULL,
        PRIMARY KEY (kind, work_id)
    ) WITHOUT ROWID""",
    # Only open work is indexed: picking up due work costs what waits, not the history.
    "CREATE INDEX IF NOT EXISTS aais_outbox_open ON aais_outbox (kind, next_at, work_id) "
    "WHERE state IN ('due', 'claimed', 'dead', 'unknown')",
    "CREATE INDEX IF NOT EXISTS aais_outbox_requests ON aais_outbox (request_id)",
    "CREATE INDEX IF NOT EXISTS aais_outbox_coalesce ON aais_outbox "
    "(kind, target, coalesce_key) WHERE state IN ('due', 'claimed') AND coalesce_key IS NOT NULL",
    """CREATE TABLE IF NOT EXISTS aais_delivery_cursors (
        subscription TEXT PRIMARY KEY,
        sequence INTEGER NOT NULL,
        updated_at REAL NOT NULL
    ) WITHOUT ROWID""",
)
"""The outbox (:mod:`.outbox`: every kind of durable work) and the webhook cursors."""


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


PENDING_INDEX = "aais_requests_pending_rows"
"""The partial index of pending requests, covering every column a listing reads."""

PENDING_INDEX_DDL = (
    # Only pending rows are indexed, so listing them costs O(pending), not O(history);
    # they are read from the index alone (in sequence order, side by side in its pages)
    # instead of one primary-key search per row among the whole history.
    f"""CREATE INDEX IF NOT EXISTS {PENDING_INDEX} ON aais_requests
        (sequence, request_id, envelope, session_id, expires_at, status, thread_id, context,
         audit_index, mac) WHERE status = 'pending'""",
    # Its narrower predecessor (sequence only), which the covering index replaces.
    "DROP INDEX IF EXISTS aais_requests_pending",
)


def migrate(conn: Conn, version: str | None) -> None:
    """Bring a version-1 or -2 schema to version 3 (columns, then audit indexes) and the
    indexes up to date; idempotent. The caller then audits execution records written
    before version 3 (:meth:`~._sql.SqlLedger._audit_unrecorded_executions`)."""
    for table in VOUCH_COLUMNS:
        columns = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        if "audit_index" not in columns:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN audit_index INTEGER")
        if "mac" not in columns:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN mac TEXT")
    if version == "1":
        entries = [audit_from_row(row) for row in conn.execute(CONTENTS_QUERIES["audit"])]
        backfill_audit_indexes(entries, conn.execute, "?")
    columns = {row[1] for row in conn.execute("PRAGMA table_info(aais_executions)")}
    if "mac" not in columns:
        conn.execute("ALTER TABLE aais_executions ADD COLUMN mac TEXT")
    if version != str(SCHEMA_VERSION):
        set_meta(conn, "schema_version", str(SCHEMA_VERSION))
    for statement in (
        *PENDING_INDEX_DDL,
        EXECUTION_AUDIT_DDL,
        *PENDING_BOUND_DDL,
        *THREADS_DDL,
        *PENDING_VIEW_DDL,
    ):
        conn.execute(statement)


def has_schema(conn: Conn) -> bool:
    """Whether the ledger's meta table exists (raises ``sqlite3.DatabaseError`` on a file
    that is not a SQLite database)."""
    row = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'aais_meta'"
    ).fetchone()
    return row is not None


def is_current(conn: Conn) -> bool:
    """Whether the file holds this version's whole schema, so setup has nothing to do."""
    found = conn.execute(
        "SELECT COUNT(*) FROM sqlite_master WHERE (type = 'table' AND name IN "
        "('aais_meta', 'aais_executions', 'aais_outbox', 'aais_threads', 'aais_thread_posts', "
        "'aais_delivery_cursors', 'aais_compacted_requests')) "
        f"OR (type = 'index' AND name IN ('{PENDING_INDEX}', '{EXECUTION_AUDIT_INDEX}', "
        "'aais_requests_pending_sessions', 'aais_requests_pending_requesters', "
        f"'aais_requests_thread', {', '.join(repr(i) for i in PENDING_VIEW_INDEXES)}))"
    ).fetchone()[0]
    expected = 12 + len(PENDING_VIEW_INDEXES)
    return bool(found == expected and meta(conn, "schema_version") == str(SCHEMA_VERSION))


def meta(conn: Conn, key: str) -> str | None:
    """The value of a meta row (sequence counter, audit tip, schema version), if set."""
    row = conn.execute("SELECT value FROM aais_meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


def set_meta(conn: Conn, key: str, value: str) -> None:
    """Insert or overwrite a meta row."""
    conn.execute(
        "INSERT INTO aais_meta (key, value) VALUES (?, ?) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (key, value),
    )


def read_counters(conn: Conn) -> tuple[int, tuple[int, str] | None]:
    """``(last_sequence, audit_tip)`` from their meta rows."""
    rows = dict(
        conn.execute(
            "SELECT key, value FROM aais_meta WHERE key IN ('last_sequence', 'audit_tip')"
        ).fetchall()
    )
    tip = None
    if rows.get("audit_tip") is not None:
        index, entry_hash = load_json(rows["audit_tip"])
        tip = int(index), str(entry_hash)
    return int(rows.get("last_sequence") or 0), tip


def write_counters(conn: Conn, last_sequence: int, tip: tuple[int, str] | None) -> None:
    """Store the last sequence and the audit tip in their meta rows."""
    set_meta(conn, "last_sequence", str(last_sequence))
    if tip is not None:
        set_meta(conn, "audit_tip", dump_json(list(tip)))

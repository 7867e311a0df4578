"""The Postgres ledger's schema: DDL and migration (run inside ``setup()``'s transaction)."""

from __future__ import annotations

from typing import Any

import psycopg

from ._rows import CONTENTS_QUERIES, VOUCH_COLUMNS, audit_from_row, backfill_audit_indexes
from .outbox import WORK_STATES

SCHEMA_VERSION = 3
"""Version 2 added ``audit_index`` and ``mac`` to requests, resolutions and grants;
version 3 audits execution records (``mac`` on them, :data:`EXECUTION_AUDIT_DDL`) and
indexes pending requests by session and requester (:data:`PENDING_BOUND_DDL`)."""

EXECUTION_SUBJECT = """(substring(payload from '^\\{"request_id":"([^"\\\\]+)"'))"""
"""The expression :data:`EXECUTION_AUDIT_DDL` indexes (queries must spell it the same): the
``request_id`` an execution payload starts with, read as text (a JSON cast would fail on
a payload holding ``\\u0000``, which Postgres text cannot)."""

EXECUTION_AUDIT_DDL = (
    "CREATE INDEX IF NOT EXISTS aais_audit_executions ON aais_audit "
    f"({EXECUTION_SUBJECT}, idx) WHERE kind = 'execution'"
)
"""A request's execution entries, newest found at once (only ``execution`` entries)."""

THREADS_DDL = (
    """CREATE TABLE IF NOT EXISTS aais_threads (
        thread_id TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        since DOUBLE PRECISION NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS aais_thread_posts (
        thread_id TEXT NOT NULL,
        poster TEXT NOT NULL,
        posted_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (thread_id, poster)
    )""",
    "CREATE INDEX IF NOT EXISTS aais_requests_thread ON aais_requests (thread_id, sequence)",
)
"""Who started each thread and who posted to it, and every request by thread (what thread
access reads)."""

REQUESTER_SUBJECT = (
    "(CASE WHEN strpos(context, '\\u0000') = 0 THEN (context::json ->> 'requester') END)"
)
"""The expression :data:`PENDING_BOUND_DDL` indexes (queries must spell it the same)."""

PENDING_BOUND_DDL = (
    "CREATE INDEX IF NOT EXISTS aais_requests_pending_sessions ON aais_requests "
    "(session_id, sequence) WHERE status = 'pending'",
    "CREATE INDEX IF NOT EXISTS aais_requests_pending_requesters ON aais_requests "
    f"({REQUESTER_SUBJECT}) WHERE status = 'pending'",
)
"""Pending requests by session and by requester: the bounds count them on each request."""

# pg_advisory_xact_lock key that serializes concurrent setup() calls on one database
# (CREATE TABLE IF NOT EXISTS alone is not safe against a concurrent creator).
SETUP_LOCK = 0x4141_4953_4C45_4447  # "AAISLEDG"

_WORK_STATES = str(WORK_STATES).replace(",)", ")")

OUTBOX_DDL = (
    f"""CREATE TABLE IF NOT EXISTS aais_outbox (
        kind TEXT NOT NULL,
        work_id TEXT NOT NULL,
        request_id TEXT NOT NULL,
        thread_id TEXT,
        state TEXT NOT NULL CHECK (state IN {_WORK_STATES}),
        attempts INTEGER NOT NULL,
        next_at DOUBLE PRECISION NOT NULL,
        last_error TEXT,
        created_at DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL,
        target TEXT,
        topic TEXT,
        coalesce_key TEXT,
        claimed_by TEXT,
        claim_until DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (kind, work_id)
    )""",
    # Only open work is indexed: picking up due work costs what waits, not the history.
    "CREATE INDEX IF NOT EXISTS aais_outbox_open ON aais_outbox (kind, next_at, work_id) "
    "WHERE state IN ('due', 'claimed', 'dead', 'unknown')",
    "CREATE INDEX IF NOT EXISTS aais_outbox_requests ON aais_outbox (request_id)",
    "CREATE INDEX IF NOT EXISTS aais_outbox_coalesce ON aais_outbox "
    "(kind, target, coalesce_key) WHERE state IN ('due', 'claimed') AND coalesce_key IS NOT NULL",
    """CREATE TABLE IF NOT EXISTS aais_delivery_cursors (
        subscription TEXT PRIMARY KEY,
        sequence BIGINT NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL
    )""",
)
"""The outbox (:mod:`.outbox`: every kind of durable work) and the webhook cursors."""


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
    """Bring a version-1 or -2 schema to version 3 (columns, then audit indexes);
    idempotent. The caller then audits execution records written before version 3
    (:meth:`~._sql.SqlLedger._audit_unrecorded_executions`)."""
    for table in VOUCH_COLUMNS:
        cur.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS audit_index BIGINT")
        cur.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS mac TEXT")
    if version == 1:
        cur.execute(CONTENTS_QUERIES["audit"])
        entries = [audit_from_row(row) for row in cur.fetchall()]
        backfill_audit_indexes(entries, cur.execute, "%s")
    cur.execute("ALTER TABLE aais_executions ADD COLUMN IF NOT EXISTS mac TEXT")
    for statement in (EXECUTION_AUDIT_DDL, *PENDING_BOUND_DDL, *THREADS_DDL):
        cur.execute(statement)
    if version != SCHEMA_VERSION:
        cur.execute("UPDATE aais_meta SET schema_version = %s", (SCHEMA_VERSION,))

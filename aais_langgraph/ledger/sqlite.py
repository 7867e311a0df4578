"""A durable ledger in one SQLite file (stdlib ``sqlite3``), shared safely by threads and processes.

Every state change runs in a ``BEGIN IMMEDIATE`` transaction, which takes the
file's write lock before reading, so resolve-once, sequence allocation, audit
chaining and leases stay atomic across OS processes opening the same file. The
file uses WAL so readers never block the writer. Within a process, one
connection is shared behind a lock, which also serves ``asyncio.to_thread``.
Tables are prefixed ``aais_`` so the ledger can share a file with the LangGraph
checkpointer. The statements are shared with Postgres (:mod:`._sql`).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import closing, contextmanager
from typing import Literal

from ..protocol.extensions import REQUESTER_EXTENSION
from ._counters import Cursor, Tip
from ._rows import REQUEST_COLUMNS
from ._sql import SqlLedger
from .base import LedgerVersionError
from .deliveries import DeliveryPlan
from .outbox import WORK_STATES_SQL
from .records import PendingRow, dump_json, load_json
from .selection import PendingSelection, SelectionSubjects

Synchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]
Conn = sqlite3.Connection | sqlite3.Cursor

# -- the schema -------------------------------------------------------------------

SCHEMA_VERSION = 5
"""The one schema's version. Nothing earlier was released: a file another version
wrote (an earlier or a later one) is refused, never upgraded."""

EXECUTION_SUBJECT = "json_extract(payload, '$.request_id')"
"""The expression :data:`EXECUTION_AUDIT_INDEX` indexes (queries must spell it the same)."""

EXECUTION_AUDIT_INDEX = "aais_audit_executions"
EXECUTION_AUDIT_DDL = (
    f"CREATE INDEX IF NOT EXISTS {EXECUTION_AUDIT_INDEX} ON aais_audit "
    f"({EXECUTION_SUBJECT}, idx) WHERE kind = 'execution'"
)
"""A request's execution entries, newest found at once (only ``execution`` entries)."""

FOLLOW_UP_AUDIT_DDL = (
    "CREATE INDEX IF NOT EXISTS aais_audit_follow_ups ON aais_audit "
    f"({EXECUTION_SUBJECT}, idx) WHERE kind = 'follow_up'"
)
"""A request's ``follow_up`` entries (its reminders, escalation, requester notice)."""

THREAD_SUBJECT = "json_extract(payload, '$.thread_id')"
"""The expression :data:`THREAD_AUDIT_DDL` indexes (queries must spell it the same)."""

THREAD_AUDIT_DDL = (
    f"CREATE INDEX IF NOT EXISTS aais_audit_threads ON aais_audit ({THREAD_SUBJECT}, idx) "
    "WHERE kind = 'thread'"
)
"""A thread's ``thread`` entries (who started it, who first posted to it)."""

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


OUTBOX_DDL = (
    f"""CREATE TABLE IF NOT EXISTS aais_outbox (
        kind TEXT NOT NULL,
        work_id TEXT NOT NULL,
        request_id TEXT NOT NULL,
        thread_id TEXT,
        state TEXT NOT NULL CHECK (state IN {WORK_STATES_SQL}),
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
        result TEXT,
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
        context TEXT NOT NULL,
        audit_index INTEGER,
        mac TEXT
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS aais_resolutions (
        request_id TEXT PRIMARY KEY,
        envelope TEXT NOT NULL,
        decision_fingerprint TEXT,
        audit_index INTEGER,
        mac TEXT
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
        revoked_at REAL,
        audit_index INTEGER,
        mac TEXT
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
)

_EXECUTION_STATES = "('executing', 'executed', 'unknown', 'done', 'retry')"

RUNTIME_DDL = (
    f"""CREATE TABLE IF NOT EXISTS aais_executions (
        request_id TEXT PRIMARY KEY,
        thread_id TEXT,
        state TEXT NOT NULL CHECK (state IN {_EXECUTION_STATES}),
        holder TEXT NOT NULL,
        attempt INTEGER NOT NULL,
        started_at REAL NOT NULL,
        live_until REAL NOT NULL,
        updated_at REAL NOT NULL,
        reconciled_by TEXT,
        mac TEXT
    ) WITHOUT ROWID""",
    "CREATE INDEX IF NOT EXISTS aais_executions_state ON aais_executions (state)",
    *OUTBOX_DDL,
    """CREATE TABLE IF NOT EXISTS aais_compacted_requests (
        request_id TEXT PRIMARY KEY
    ) WITHOUT ROWID""",
)
"""The runtime's own tables: execution records (:mod:`.executions`), the outbox
(:mod:`.outbox`) and the tombstones of requests retention removed (:mod:`.retention`)."""

ALL_DDL = (
    *SCHEMA,
    *RUNTIME_DDL,
    *PENDING_INDEX_DDL,
    EXECUTION_AUDIT_DDL,
    FOLLOW_UP_AUDIT_DDL,
    THREAD_AUDIT_DDL,
    *PENDING_BOUND_DDL,
    *THREADS_DDL,
    *PENDING_VIEW_DDL,
)
"""Every statement of the one schema, in order (each idempotent)."""


def _has_schema(conn: Conn) -> bool:
    """Whether the ledger's meta table exists (raises ``sqlite3.DatabaseError`` on a file
    that is not a SQLite database)."""
    row = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'aais_meta'"
    ).fetchone()
    return row is not None


def _is_current(conn: Conn) -> bool:
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
    return bool(found == expected and _meta(conn, "schema_version") == str(SCHEMA_VERSION))


def _meta(conn: Conn, key: str) -> str | None:
    """The value of a meta row (sequence counter, audit tip, schema version), if set."""
    row = conn.execute("SELECT value FROM aais_meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


def _set_meta(conn: Conn, key: str, value: str) -> None:
    """Insert or overwrite a meta row."""
    conn.execute(
        "INSERT INTO aais_meta (key, value) VALUES (?, ?) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (key, value),
    )


def _read_counters(conn: Conn) -> tuple[int, tuple[int, str] | None]:
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


def _write_counters(conn: Conn, last_sequence: int, tip: tuple[int, str] | None) -> None:
    """Store the last sequence and the audit tip in their meta rows, in one statement."""
    if tip is None:
        _set_meta(conn, "last_sequence", str(last_sequence))
        return
    conn.execute(
        "INSERT INTO aais_meta (key, value) VALUES ('last_sequence', ?), ('audit_tip', ?) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (str(last_sequence), dump_json(list(tip))),
    )


class SqliteLedger(SqlLedger):
    """The ledger in a SQLite file; the schema is created on first use, as ``SqliteSaver`` does.

    ``SqliteLedger(path)`` opens and owns a connection (close it with :meth:`close`,
    or use :meth:`from_conn_string`); ``SqliteLedger(conn)`` uses a connection you
    own, which must not be in ``autocommit=False`` mode and must allow use from
    other threads (``check_same_thread=False``) if you call the ledger from several
    threads or from asyncio. ``synchronous`` defaults to FULL so a recorded
    resolution survives power loss; pass None to leave the connection's setting alone.

    Setup: the first call that reads or writes runs :meth:`setup` unless the file
    already holds the current schema (once per ledger, under its lock; idempotent
    across processes; a current file is only read): a new or empty file becomes a
    ledger, a ledger another version wrote is refused, and any other SQLite database gains the
    ``aais_`` tables beside its own (that is how the ledger shares the checkpointer's
    file). Calling :meth:`setup` yourself is allowed and changes nothing after the
    first time. ``auto_setup=False`` turns this off (the tables must exist; a call
    on a file without them fails). :func:`~.opening.open_ledger` with
    ``create=False``, which the CLI uses for everything but ``init``, checks the
    file *before* anything writes to it and refuses a missing, empty, foreign or
    unreadable one (:class:`~.opening.NotALedgerError`).

    ``delivery_plan`` names the webhook deliveries its writes record in their own
    transactions (:mod:`.deliveries`; None: none).

    Args:
        path_or_conn: a file path (or ``:memory:``), or a connection you own.
        busy_timeout: seconds a write waits for another connection's lock.
        synchronous: SQLite's ``synchronous`` setting (None: leave the connection's).
        auto_setup: run :meth:`setup` on first use (False: the tables must exist).
        delivery_plan: the webhook deliveries its writes record (None: none).
    """

    execution_subject = EXECUTION_SUBJECT
    thread_subject = THREAD_SUBJECT
    requester_subject = REQUESTER_SUBJECT
    selection_subjects = VIEW_SUBJECTS

    def __init__(
        self,
        path_or_conn: str | os.PathLike[str] | sqlite3.Connection,
        *,
        busy_timeout: float = 30.0,
        synchronous: Synchronous | None = "FULL",
        auto_setup: bool = True,
        delivery_plan: DeliveryPlan | None = None,
    ) -> None:
        self._delivery_plan = delivery_plan
        if synchronous is not None and synchronous not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise ValueError("synchronous: expected OFF, NORMAL, FULL or EXTRA")
        if isinstance(path_or_conn, sqlite3.Connection):
            if getattr(path_or_conn, "autocommit", None) is False:
                raise ValueError("conn: a connection with autocommit=False cannot BEGIN IMMEDIATE")
            self._conn = path_or_conn
            self._owns_conn = False
        else:
            self._conn = sqlite3.connect(
                path_or_conn, timeout=busy_timeout, isolation_level=None, check_same_thread=False
            )
            self._owns_conn = True
        self._lock = threading.RLock()
        self._needs_setup = auto_setup
        self._last_pending: tuple[tuple[int, int], list[PendingRow]] | None = None
        with self._lock:
            self._conn.execute(f"PRAGMA busy_timeout = {max(int(busy_timeout * 1000), 0)}")
            if synchronous is not None:
                self._conn.execute(f"PRAGMA synchronous = {synchronous}")
            self._synchronous = int(self._conn.execute("PRAGMA synchronous").fetchone()[0])

    @classmethod
    @contextmanager
    def from_conn_string(
        cls,
        conn_string: str | os.PathLike[str],
        *,
        busy_timeout: float = 30.0,
        synchronous: Synchronous | None = "FULL",
        auto_setup: bool = True,
        delivery_plan: DeliveryPlan | None = None,
    ) -> Iterator[SqliteLedger]:
        """A ledger on its own connection to a file path (or ``:memory:``), closed on exit.

        Args:
            conn_string: a file path or ``:memory:``.
            busy_timeout: seconds a write waits for another connection's lock.
            synchronous: SQLite's ``synchronous`` setting (None: leave the connection's).
            auto_setup: run :meth:`setup` on first use (False: the tables must exist).
            delivery_plan: the webhook deliveries its writes record (None: none).
        """
        ledger = cls(
            conn_string,
            busy_timeout=busy_timeout,
            synchronous=synchronous,
            auto_setup=auto_setup,
            delivery_plan=delivery_plan,
        )
        try:
            yield ledger
        finally:
            ledger.close()

    from_path = from_conn_string
    """The same as :meth:`from_conn_string` (its earlier name)."""

    def close(self) -> None:
        """Close the connection if this ledger opened it."""
        if self._owns_conn:
            with self._lock:
                self._conn.close()

    def setup(self) -> None:
        """Switch the file to WAL and create the schema if missing; idempotent. A file
        another version of aais-langgraph wrote raises :class:`~.base.LedgerVersionError`
        before anything is written to it."""
        with self._lock:
            with closing(self._conn.cursor()) as cur:
                if _has_schema(cur):
                    _check_version(_meta(cur, "schema_version"))
            self._conn.execute("PRAGMA journal_mode = WAL")
            with self._immediate() as cur:
                for statement in ALL_DDL:
                    cur.execute(statement)
                cur.execute(
                    "INSERT OR IGNORE INTO aais_meta (key, value) "
                    "VALUES ('schema_version', ?), ('last_sequence', '0')",
                    (str(SCHEMA_VERSION),),
                )
                _check_version(_meta(cur, "schema_version"))
            self._needs_setup = False

    def check_storage(self) -> str | None:
        """``PRAGMA quick_check`` over the whole file (every page, not only those the audit
        reads): None when it says ok, else how many problems and the first one (SQLite
        names pages and cells, never stored values)."""
        with self._lock:
            try:
                found = [str(row[0]) for row in self._conn.execute("PRAGMA quick_check")]
            except sqlite3.DatabaseError as error:
                return f"SQLite cannot check the file: {type(error).__name__}"
        if found == ["ok"]:
            return None
        return f"SQLite quick_check found {len(found)} problem(s), first: {found[0][:200]}"

    def is_set_up(self) -> bool:
        """Whether the file holds the ledger's tables (never sets it up); raises
        ``sqlite3.DatabaseError`` for a file that is not a SQLite database."""
        with self._lock:
            return _has_schema(self._conn)

    # -- what the shared statements need -------------------------------------------

    def list_pending_rows(
        self, *, session_id: str | None = None, selection: PendingSelection | None = None
    ) -> list[PendingRow]:
        # Every pending row, again: the rows handed out last time when nothing was written
        # to the file since (no commit by another connection, no change by this one).
        if session_id is not None or selection is not None:
            return super().list_pending_rows(session_id=session_id, selection=selection)
        with self._lock:
            self._ready()
            version = self._conn.execute("PRAGMA data_version").fetchone()[0]
            marker = (int(version), self._conn.total_changes)
            last = self._last_pending
            if last is not None and last[0] == marker:
                return list(last[1])
            rows = super().list_pending_rows()
            self._last_pending = (marker, rows)  # read before the rows: a later change re-reads
            return list(rows)

    def _read_counters(self, cur: Cursor, *, lock: bool) -> tuple[int, Tip]:
        # BEGIN IMMEDIATE already holds the file's write lock.
        return _read_counters(self._sqlite(cur))

    def _write_counters(self, cur: Cursor, last_sequence: int, tip: Tip) -> None:
        _write_counters(self._sqlite(cur), last_sequence, tip)

    @contextmanager
    def _read(self) -> Iterator[Cursor]:
        with self._lock:
            self._ready()
            with closing(self._conn.cursor()) as cur:
                yield cur

    @contextmanager
    def _snapshot(self) -> Iterator[Cursor]:
        with self._lock:
            self._ready()
            self._conn.execute("BEGIN")  # one read snapshot of every table
            try:
                with closing(self._conn.cursor()) as cur:
                    yield cur
            finally:
                self._conn.rollback()

    @contextmanager
    def _write(self, *, durable: bool = True) -> Iterator[Cursor]:
        """A write transaction that holds the file's write lock from its first read.

        ``durable=False`` (leases, which expire anyway) commits without the disk
        sync: in WAL mode the write still survives a crashed process, only not a
        power loss, and it saves an fsync on every resume.
        """
        with self._lock:
            self._ready()
            relaxed = not durable and self._synchronous > 1
            if relaxed:
                self._conn.execute("PRAGMA synchronous = NORMAL")
            try:
                with self._immediate() as cur:
                    yield cur
            finally:
                if relaxed:
                    self._conn.execute(f"PRAGMA synchronous = {self._synchronous}")

    def _ready(self) -> None:
        """Set up on first use; a file that holds the current schema is only read."""
        if self._needs_setup:
            if _is_current(self._conn):
                self._needs_setup = False
            else:
                self.setup()

    @contextmanager
    def _immediate(self) -> Iterator[sqlite3.Cursor]:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            with closing(conn.cursor()) as cur:
                yield cur
            conn.commit()
        except BaseException:
            if conn.in_transaction:
                conn.rollback()
            raise

    @staticmethod
    def _sqlite(cur: Cursor) -> sqlite3.Cursor:
        assert isinstance(cur, sqlite3.Cursor)
        return cur


def _check_version(version: str | None) -> None:
    """Refuse a schema another version of aais-langgraph wrote."""
    if version != str(SCHEMA_VERSION):
        raise LedgerVersionError(version, SCHEMA_VERSION)

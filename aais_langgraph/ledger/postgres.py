"""A durable ledger in PostgreSQL (psycopg 3), shared safely by threads, processes and replicas.

Needs the ``postgres`` extra; import it from here (``aais_langgraph.ledger`` stays
standard-library only). Every state change is one READ COMMITTED transaction with
a fixed lock order, so nothing deadlocks and nothing needs a retry; the common ones
(a request, a resolution, an execution mark, a lease) are one statement each, a
server-side function that checks, stamps and writes (:mod:`._postgres_writes`):

- resolve-once: the request row is locked (``SELECT ... FOR UPDATE``) before the
  resolution is looked up, so racing resolvers queue and all but the first find it;
- sequences and the audit tip live in one meta row, locked ``FOR UPDATE`` by every
  write that allocates a sequence or appends to the audit chain, and always locked
  last. Sequences are therefore gap-free, and commit in sequence order: a reader
  tailing ``events_after`` never sees sequence n+1 before n. The lock is taken by
  ``aais_stamp`` (:mod:`._postgres_server_counters`), last in a write function or in
  the statement pipelined with a transaction's ``COMMIT``, which fills in the
  sequences and audit hashes server-side, so no replica waits on another's client;
  on a schema without the function (set up by an earlier version) the lock waits for
  one client turn (the locking read's reply), the writes and ``COMMIT`` following in
  one round trip;
- a duplicate request or grant id racing another writer is refused by the
  table's unique key and answered as the check before it would have answered;
- a run lease is one upsert whose ``WHERE`` admits only its holder or an expired
  lease, judged by the caller's ``now`` like every backend.

JSON is stored as ``text`` exactly as :func:`~._records.dump_json` writes it, never
``jsonb``, which reorders keys and turns ``1e20`` into an integer. Tables are
unqualified (they follow ``search_path``) and prefixed ``aais_`` so the ledger can
share a database with LangGraph's Postgres checkpointer. The statements are shared
with SQLite (:mod:`._sql`); this module supplies connections, row locks and the
counters (stamped by the server). The async twins are the base class's (the sync method in a worker
thread).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from typing import Any, cast

import psycopg
from psycopg.pq import TransactionStatus
from psycopg.rows import tuple_row
from psycopg_pool import ConnectionPool

from . import _rows as rows
from . import executions as ex
from . import resume_work as rw
from ._counters import Counters, Cursor, Probe, Tip, sql_for
from ._postgres_server_counters import STAMP_FUNCTIONS, StampedCounters
from ._postgres_writes import EXECUTION_SUBJECT, WRITE_FUNCTIONS
from ._records import check_ttl, draft_write, plain, request_fields, with_sequence
from ._sql import SqlLedger
from .base import LedgerVersionError
from .deliveries import DeliveryPlan
from .outbox import WORK_STATES_SQL
from .records import AuditEntry, Lease, ResolutionWrite, StoredRequest, StoredResolution, dump_json
from .retention import CompactedRequestError

PgCursor = psycopg.Cursor[tuple[Any, ...]]

# -- the schema -------------------------------------------------------------------

SCHEMA_VERSION = 6
"""The one schema's version. Nothing earlier was released: a database another
version wrote (an earlier or a later one) is refused, never upgraded."""

EXECUTION_AUDIT_DDL = (
    "CREATE INDEX IF NOT EXISTS aais_audit_executions ON aais_audit "
    f"({EXECUTION_SUBJECT}, idx) WHERE kind = 'execution'"
)
"""A request's execution entries, newest found at once (only ``execution`` entries)."""

FOLLOW_UP_AUDIT_DDL = (
    "CREATE INDEX IF NOT EXISTS aais_audit_follow_ups ON aais_audit "
    f"({EXECUTION_SUBJECT}, idx) WHERE kind = 'follow_up'"
)
"""A request's ``follow_up`` entries (its reminders, escalation, requester notice)."""

THREAD_SUBJECT = """(substring(payload from '^\\{"thread_id":"([^"\\\\]+)"'))"""
"""The thread id a ``thread`` audit payload starts with, as :data:`THREAD_AUDIT_DDL`
indexes it (queries must spell it the same; read as text, like the execution index)."""

THREAD_AUDIT_DDL = (
    "CREATE INDEX IF NOT EXISTS aais_audit_threads ON aais_audit "
    f"({THREAD_SUBJECT}, idx) WHERE kind = 'thread'"
)
"""A thread's ``thread`` entries (who started it, who first posted to it)."""

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

OUTBOX_DDL = (
    f"""CREATE TABLE IF NOT EXISTS aais_outbox (
        kind TEXT NOT NULL,
        work_id TEXT NOT NULL,
        request_id TEXT NOT NULL,
        thread_id TEXT,
        state TEXT NOT NULL CHECK (state IN {WORK_STATES_SQL}),
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
        result TEXT,
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
        context TEXT NOT NULL,
        audit_index BIGINT,
        mac TEXT
    )""",
    # Only pending rows are indexed, so list_pending costs O(pending), not O(history).
    """CREATE INDEX IF NOT EXISTS aais_requests_pending
        ON aais_requests (sequence) WHERE status = 'pending'""",
    """CREATE TABLE IF NOT EXISTS aais_resolutions (
        request_id TEXT PRIMARY KEY,
        envelope TEXT NOT NULL,
        decision_fingerprint TEXT,
        audit_index BIGINT,
        mac TEXT
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
        revoked_at DOUBLE PRECISION,
        audit_index BIGINT,
        mac TEXT
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

_EXECUTION_STATES = "('executing', 'executed', 'unknown', 'done', 'retry')"

RUNTIME_DDL = (
    f"""CREATE TABLE IF NOT EXISTS aais_executions (
        request_id TEXT PRIMARY KEY,
        thread_id TEXT,
        state TEXT NOT NULL CHECK (state IN {_EXECUTION_STATES}),
        holder TEXT NOT NULL,
        attempt INTEGER NOT NULL,
        started_at DOUBLE PRECISION NOT NULL,
        live_until DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL,
        reconciled_by TEXT,
        mac TEXT
    )""",
    "CREATE INDEX IF NOT EXISTS aais_executions_state ON aais_executions (state)",
    *OUTBOX_DDL,
    "CREATE TABLE IF NOT EXISTS aais_compacted_requests (request_id TEXT PRIMARY KEY)",
)
"""The runtime's own tables: execution records (:mod:`.executions`), the outbox
(:mod:`.outbox`) and the tombstones of requests retention removed (:mod:`.retention`)."""

ALL_DDL = (
    *SCHEMA,
    *RUNTIME_DDL,
    EXECUTION_AUDIT_DDL,
    FOLLOW_UP_AUDIT_DDL,
    THREAD_AUDIT_DDL,
    *PENDING_BOUND_DDL,
    *THREADS_DDL,
    *STAMP_FUNCTIONS,
    *WRITE_FUNCTIONS,
)
"""Every statement of the one schema, in order (each idempotent)."""


class PostgresLedger(SqlLedger):
    """The ledger in a PostgreSQL database; call :meth:`setup` once to create the schema.

    As with ``PostgresSaver``, setup is explicit: the tables are created by whoever
    deploys (``setup()`` here, or ``aais-langgraph --db URL init``), never as a side
    effect of a call on a production database.

    ``PostgresLedger(pool)`` takes a connection per call from a
    ``psycopg_pool.ConnectionPool`` (the choice for servers: a pool replaces
    connections lost to a database restart when given ``check=``).
    ``PostgresLedger(conn)`` shares one connection you own between threads, one call
    at a time; it must not be inside a transaction when the ledger is called, because
    the ledger commits its own. Either may be in autocommit mode or not, and may use
    any row factory (LangGraph's ``PostgresSaver`` wants ``dict_row``).
    ``delivery_plan`` names the webhook deliveries its writes record in their own
    transactions (:mod:`.deliveries`; None: none).
    """

    mark = "%s"
    for_update = " FOR UPDATE"
    execution_subject = EXECUTION_SUBJECT
    thread_subject = THREAD_SUBJECT
    requester_subject = REQUESTER_SUBJECT

    def __init__(
        self,
        conn: psycopg.Connection[Any] | ConnectionPool[psycopg.Connection[Any]],
        *,
        delivery_plan: DeliveryPlan | None = None,
    ) -> None:
        self._delivery_plan = delivery_plan
        self._pool: ConnectionPool[psycopg.Connection[Any]] | None = None
        self._conn: psycopg.Connection[Any] | None = None
        if isinstance(conn, ConnectionPool):
            self._pool = conn
        elif isinstance(conn, psycopg.Connection):
            self._conn = conn
        else:
            raise TypeError("conn: expected a psycopg Connection or a psycopg_pool ConnectionPool")
        self._lock = threading.Lock()
        self._stamps: bool | None = None
        self._executions: dict[str, tuple[ex.Execution, str]] = {}
        """Per request, the execution record this ledger wrote last and (as JSON) the audit
        row that vouches for it: what its next change is made on, if still stored."""
        self._executions_lock = threading.Lock()

    @classmethod
    @contextmanager
    def from_conn_string(
        cls,
        conn_string: str,
        *,
        pool_size: int | None = None,
        delivery_plan: DeliveryPlan | None = None,
    ) -> Iterator[PostgresLedger]:
        """A ledger on its own connection (or a pool of up to ``pool_size``), closed on exit."""
        if pool_size is None:
            with psycopg.Connection.connect(conn_string, autocommit=True) as conn:
                yield cls(conn, delivery_plan=delivery_plan)
            return
        if pool_size < 1:
            raise ValueError("pool_size: a pool needs at least one connection")
        pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            conn_string,
            min_size=1,
            max_size=pool_size,
            kwargs={"autocommit": True},
            check=ConnectionPool.check_connection,
            open=False,
        )
        with pool:
            yield cls(pool, delivery_plan=delivery_plan)

    def setup(self) -> None:
        """Create the schema if missing; idempotent and safe to run from several processes.
        A schema another version of aais-langgraph wrote raises
        :class:`~.base.LedgerVersionError`, and the transaction leaves it untouched."""
        with self._write() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (SETUP_LOCK,))
            for statement in ALL_DDL:
                cur.execute(statement)
            cur.execute(
                "INSERT INTO aais_meta (singleton, schema_version, last_sequence) "
                "VALUES (TRUE, %s, 0) ON CONFLICT (singleton) DO NOTHING",
                (SCHEMA_VERSION,),
            )
            cur.execute("SELECT schema_version FROM aais_meta")
            row = cur.fetchone()
            version = None if row is None else row[0]
            if version != SCHEMA_VERSION:
                raise LedgerVersionError(version, SCHEMA_VERSION)
        self._stamps = None  # whether aais_stamp exists is asked again

    def is_set_up(self) -> bool:
        """Whether the database (its ``search_path``) holds the ledger's tables."""
        with self._read() as cur:
            cur.execute("SELECT to_regclass('aais_meta') IS NOT NULL")
            row = cur.fetchone()
        return bool(row and row[0])

    # -- what the shared statements need -------------------------------------------

    def _read_counters(self, cur: Cursor, *, lock: bool) -> tuple[int, Tip]:
        # The one meta row is the ledger's write lock, always taken last.
        cur.execute(_LOCK_COUNTERS if lock else _READ_COUNTERS)
        return _counters_of(cur.fetchone(), lock=lock)

    def _write_counters(self, cur: Cursor, last_sequence: int, tip: Tip) -> None:
        tip_index, tip_hash = tip if tip is not None else (None, None)
        cur.execute(
            "UPDATE aais_meta SET last_sequence = %s, audit_tip_index = %s, audit_tip_hash = %s",
            (last_sequence, tip_index, tip_hash),
        )

    def _counters(self, cur: Cursor, probe: Probe | None = None) -> Counters:
        # Pipelined and set up by this version: the server stamps the counters in the
        # statement sent with COMMIT (see ._postgres_server_counters); otherwise lock, then write.
        if _pipelined(cur) and self._can_stamp(cur):
            return StampedCounters(self, cur, probe)
        return Counters(self, cur, probe)

    def _can_stamp(self, cur: Cursor) -> bool:
        if self._stamps is None:
            connection = cast(Any, cur).connection
            with connection.cursor(row_factory=tuple_row) as probing:
                probing.execute("SELECT to_regprocedure('aais_stamp(jsonb)') IS NOT NULL")
                row = probing.fetchone()
            self._stamps = bool(row and row[0])
        return self._stamps

    def _writes_at_once(self, *, records_deliveries: bool = False) -> bool:
        """Whether a write goes as one statement (:mod:`._postgres_writes`): the schema
        has the server side, and no delivery plan adds outbox rows to it (a write that
        records deliveries, ``records_deliveries``, takes the shared transaction)."""
        if records_deliveries and self._delivery_plan is not None:
            return False
        if self._stamps is None:
            with self._read() as cur:
                self._can_stamp(cur)
        return bool(self._stamps)

    def add_request(
        self,
        envelope: Mapping[str, Any],
        *,
        thread_id: str | None = None,
        context: Mapping[str, Any] | None = None,
        mac: str | None = None,
    ) -> tuple[StoredRequest, bool]:
        try:
            if self._writes_at_once(records_deliveries=True):
                return self._add_request_at_once(envelope, thread_id, context, mac)
            return super().add_request(envelope, thread_id=thread_id, context=context, mac=mac)
        except psycopg.errors.UniqueViolation as error:
            # Stamped writes meet a concurrent writer of the same request here, not
            # under the counters' lock: the answer is the same, the request it wrote.
            existing = self.get_request(request_fields(envelope).request_id)
            if error.diag.table_name != "aais_requests" or existing is None:
                raise
            return existing, False

    def _add_request_at_once(
        self,
        envelope: Mapping[str, Any],
        thread_id: str | None,
        context: Mapping[str, Any] | None,
        mac: str | None,
    ) -> tuple[StoredRequest, bool]:
        """``add_request`` in one statement, ``aais_add_request``."""
        fields = request_fields(envelope)
        draft = with_sequence(envelope, 0)
        stored_context = plain(context or {}, "/context")
        tombstones = self._vouched_tombstones
        if tombstones is None:
            with self._read() as cur:
                tombstones = self._tombstones(cur)
        if fields.request_id in tombstones:  # rare: the shared write checks in its order
            return super().add_request(envelope, thread_id=thread_id, context=context, mac=mac)
        call = (_ADD_REQUEST, (fields.request_id,))
        with self._read() as cur, StampedCounters(self, cur, call=call) as counters:
            stored = self._stage_request(counters, fields, draft, thread_id, stored_context, mac)
        refused = counters.refused()
        if refused == "recorded":
            existing = self.get_request(fields.request_id)
            if existing is not None:
                return existing, False
        if refused is not None:  # its tombstone, or its row removed since
            raise CompactedRequestError()
        return counters.settled(stored), True

    def _record_resolution(
        self, write: ResolutionWrite, claim: ex.ExecutionChange | None
    ) -> tuple[StoredResolution, bool, ex.Execution | None]:
        try:
            if self._writes_at_once(records_deliveries=True):
                if claim is None:
                    return self._resolve_at_once(write)
                return self._resolve_claiming_at_once(write, claim)
            return super()._record_resolution(write, claim)
        except psycopg.errors.UniqueViolation as error:
            if error.diag.table_name != "aais_grants":
                raise
            raise ValueError("grant: a grant with this id is already recorded") from None

    def _resolve_at_once(
        self, write: ResolutionWrite
    ) -> tuple[StoredResolution, bool, ex.Execution | None]:
        """``record_resolution`` in one statement, ``aais_resolve``."""
        draft = draft_write(write)
        resume = None
        if not write.in_run:  # its thread is filled in by the server, from the request's row
            work = rw.new_resume_work(write.request_id, "", time.time())
            resume = dump_json(dict(zip(_WORK_FIELDS, rows.work_row(work), strict=True)))
        call = (_RESOLVE, (write.request_id, resume))
        with self._read() as cur, StampedCounters(self, cur, call=call) as counters:
            recorded = self._stage_resolution(counters, write, draft, None)
        refused = counters.refused()
        if refused == "recorded":
            existing = self.get_resolution(write.request_id)
            if existing is not None:
                return existing, False, None
        if refused is not None:
            raise KeyError(write.request_id)
        return counters.settled(recorded), True, None

    def _resolve_claiming_at_once(
        self, write: ResolutionWrite, claim: ex.ExecutionChange
    ) -> tuple[StoredResolution, bool, ex.Execution | None]:
        """``record_resolution_claiming`` in one statement, ``aais_resolve_claiming``: the
        claim made on what this ledger wrote last for the request (none, for a first
        claim), as ``update_execution`` makes it. A resolution that is not ``approved``
        claims nothing (``aais_resolve``); a claim that changes nothing, or one the server
        finds made on anything but the stored record, takes the shared transaction."""
        draft = draft_write(write)
        if draft.resolved["resolution"]["outcome"] != "approved":
            return self._resolve_at_once(write)
        known = self._executions.get(write.request_id)
        record, vouching = known if known is not None else (None, None)
        updated = claim(record)
        if updated is None or updated == record or updated.request_id != write.request_id:
            return super()._record_resolution(write, claim)
        try:
            rows_sent = (_execution_json(record), vouching, _execution_json(updated))
        except ValueError:  # not I-JSON (a time that is not finite): the shared write says so
            return super()._record_resolution(write, claim)
        resume = None
        if not write.in_run:  # its thread is filled in by the server, from the request's row
            work = rw.new_resume_work(write.request_id, "", time.time())
            resume = dump_json(dict(zip(_WORK_FIELDS, rows.work_row(work), strict=True)))
        payload = ex.execution_audit(updated)
        fields = (write.request_id, resume, _lock_key(write.request_id))
        call = (_RESOLVE_CLAIMING, (*fields, *rows_sent))
        with self._read() as cur, StampedCounters(self, cur, call=call) as counters:
            recorded = self._stage_resolution(counters, write, draft, None)
            # The claim's entry follows the resolution's, as in the shared transaction.
            appended = counters.append_audit("execution", payload)
        refused = counters.refused()
        if refused == "recorded":
            existing = self.get_resolution(write.request_id)
            if existing is not None:
                return existing, False, None
        if refused == "changed":
            with self._executions_lock:
                self._executions.pop(write.request_id, None)
            return super()._record_resolution(write, claim)
        if refused is not None:
            raise KeyError(write.request_id)
        self._remember(updated, _entry_json(counters.settled(appended), payload))
        return counters.settled(recorded), True, updated

    # -- execution records: a change of the record this ledger wrote last ------------

    def update_execution(
        self, request_id: str, change: ex.ExecutionChange, *, durable: bool = True
    ) -> ex.Execution | None:
        # One statement, ``aais_execute``, when the change is made on what this ledger
        # wrote last for the request (none, for a first claim) and the server finds just
        # that stored, vouched for by the same entry; otherwise the shared write reads,
        # checks and changes the stored record.
        if not self._writes_at_once():
            return super().update_execution(request_id, change, durable=durable)
        known = self._executions.get(request_id)
        record, vouching = known if known is not None else (None, None)
        updated = change(record)
        if updated is None or updated == record or updated.request_id != request_id:
            return super().update_execution(request_id, change, durable=durable)
        try:
            rows_sent = (_execution_json(record), vouching, _execution_json(updated))
        except ValueError:  # not I-JSON (a time that is not finite): the shared write says so
            return super().update_execution(request_id, change, durable=durable)
        fields = (request_id, _lock_key(request_id), durable)
        payload = ex.execution_audit(updated)
        with self._read() as cur:
            call = (_EXECUTE, (*fields, *rows_sent))
            with StampedCounters(self, cur, call=call) as counters:
                appended = counters.append_audit("execution", payload)
        if counters.refused() is not None:
            with self._executions_lock:
                self._executions.pop(request_id, None)
            return super().update_execution(request_id, change, durable=durable)
        entry = counters.settled(appended)
        self._remember(updated, _entry_json(entry, payload))
        return updated

    def _remember(self, record: ex.Execution, vouching: str) -> None:
        with self._executions_lock:
            self._executions.pop(record.request_id, None)
            self._executions[record.request_id] = (record, vouching)
            while len(self._executions) > _EXECUTIONS_REMEMBERED:
                self._executions.pop(next(iter(self._executions)))

    def audit_link(self, index: int) -> tuple[list[AuditEntry], tuple[int, str] | None]:
        # One statement: the tip and the entries from one snapshot.
        with self._read() as cur:
            found = cur.execute(_AUDIT_LINK, (index - 1,)).fetchall()
        tip = None if not found or found[0][0] is None else (int(found[0][0]), str(found[0][1]))
        entries = [rows.audit_from_row(row[2:]) for row in found if row[2] is not None]
        return entries, tip

    # -- run leases: one statement each, not waiting for the WAL flush -------------

    def acquire_lease(self, thread_id: str, holder: str, *, ttl: float, now: float) -> Lease | None:
        check_ttl(ttl)
        lease = Lease(thread_id, holder, now + ttl)
        taken = self._call(_ACQUIRE_LEASE, (thread_id, holder, lease.expires_at, now))
        return lease if taken else None

    def renew_lease(self, thread_id: str, holder: str, *, ttl: float, now: float) -> Lease | None:
        check_ttl(ttl)
        lease = Lease(thread_id, holder, now + ttl)
        renewed = self._call(_RENEW_LEASE, (thread_id, holder, lease.expires_at, now))
        return lease if renewed else None

    def release_lease(
        self,
        thread_id: str,
        holder: str,
        *,
        done: Sequence[str] = (),
        executions: Mapping[str, ex.ExecutionChange] | None = None,
    ) -> bool:
        if not executions:
            return bool(self._call(_RELEASE_LEASE, (thread_id, holder, list(done), time.time())))
        if len(executions) == 1 and self._writes_at_once():
            [(request_id, change)] = executions.items()
            released = self._release_executed_at_once(thread_id, holder, done, request_id, change)
            if released is not None:
                return released
        return super().release_lease(thread_id, holder, done=done, executions=executions)

    def _release_executed_at_once(
        self,
        thread_id: str,
        holder: str,
        done: Sequence[str],
        request_id: str,
        change: ex.ExecutionChange,
    ) -> bool | None:
        """``release_lease`` with one execution change in one statement,
        ``aais_release_executed``, made as ``update_execution`` makes it on what this
        ledger wrote last; None (nothing written) when it cannot be made so."""
        known = self._executions.get(request_id)
        record, vouching = known if known is not None else (None, None)
        updated = change(record)
        if updated is None or updated == record or updated.request_id != request_id:
            return None
        try:
            rows_sent = (_execution_json(record), vouching, _execution_json(updated))
        except ValueError:  # not I-JSON (a time that is not finite): the shared write says so
            return None
        lease = (thread_id, holder, list(done), time.time())
        payload = ex.execution_audit(updated)
        with self._read() as cur:
            call = (_RELEASE_EXECUTED, (*lease, request_id, _lock_key(request_id), *rows_sent))
            with StampedCounters(self, cur, call=call) as counters:
                appended = counters.append_audit("execution", payload)
        if counters.refused() is not None:
            with self._executions_lock:
                self._executions.pop(request_id, None)
            return None
        self._remember(updated, _entry_json(counters.settled(appended), payload))
        return bool(counters.result("released"))

    def _call(self, sql: str, params: Sequence[Any]) -> Any:
        """The one value of one statement that is its own transaction."""
        with self._read() as cur:
            row = cur.execute(sql, params).fetchone()
        return None if row is None else row[0]

    def _lock_counters(self, cur: Cursor, probe: Probe | None) -> tuple[int, Tip, Any]:
        # Both statements go out before either result is awaited: the probe runs
        # after the lock is granted, with a snapshot that sees what its holder wrote.
        if probe is None or not _pipelined(cur):
            return super()._lock_counters(cur, probe)
        connection = cast(Any, cur).connection
        with connection.cursor(row_factory=tuple_row) as probing:
            cur.execute(_LOCK_COUNTERS)
            probing.execute(sql_for(probe[0], self.mark), probe[1])
            last_sequence, tip = _counters_of(cur.fetchone(), lock=True)
            return last_sequence, tip, probing.fetchone()

    def _lock_execution(self, cur: Cursor, request_id: str) -> None:
        # A missing row cannot be locked FOR UPDATE: lock the request id instead.
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key(request_id),))

    # -- internals -----------------------------------------------------------------

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A connection of the pool, or the shared one held under the ledger's lock."""
        if self._pool is not None:
            with self._pool.connection() as conn:
                yield conn
            return
        assert self._conn is not None
        with self._lock:
            status = self._conn.info.transaction_status
            if status != TransactionStatus.IDLE and not self._conn.closed:
                raise RuntimeError(
                    f"conn: the connection is {status.name}, not idle; the ledger commits "
                    "its own transactions, so it needs a connection outside any transaction"
                )
            yield self._conn

    @contextmanager
    def _write(self, *, durable: bool = True) -> Iterator[PgCursor]:
        """One transaction, committed when the block exits and rolled back on error;
        ``durable=False`` (leases, execution marks) commits without waiting for the WAL
        flush (``synchronous_commit`` off for this transaction only): a crashed client
        loses nothing, a crashed server the last moments of such writes."""
        with self._connection() as conn, _transaction(conn) as cur:
            if not durable:
                cur.execute("SET LOCAL synchronous_commit TO OFF")
            yield cur

    @contextmanager
    def _write_batched(self, *, durable: bool = True) -> Iterator[PgCursor]:
        """:meth:`_write` in pipeline mode: statements queue until a fetch or the end,
        and the ``COMMIT`` goes out in the same round trip as the last writes, so the
        counters' lock is released without waiting on this client (see
        :mod:`._counters`). ``BEGIN``/``COMMIT`` are sent by hand: psycopg's
        ``transaction()`` syncs the pipeline before its ``COMMIT``, one more round
        trip under the lock. A connection outside autocommit takes :meth:`_write`.
        ``durable=False`` as for :meth:`_write` (execution marks come this way: they are
        audited, so they take the counters)."""
        with self._connection() as conn:
            if not conn.autocommit or not psycopg.Pipeline.is_supported():
                with _transaction(conn) as cur:
                    if not durable:
                        cur.execute("SET LOCAL synchronous_commit TO OFF")
                    yield cur
                return
            with conn.pipeline() as pipeline, conn.cursor(row_factory=tuple_row) as cur:
                cur.execute("BEGIN")
                try:
                    if not durable:
                        cur.execute("SET LOCAL synchronous_commit TO OFF")
                    yield cur
                    cur.execute("COMMIT")
                    pipeline.sync()
                except BaseException:
                    _roll_back(conn, pipeline)
                    raise

    @contextmanager
    def _snapshot(self) -> Iterator[PgCursor]:
        with self._write() as cur:
            cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            yield cur

    @contextmanager
    def _read(self) -> Iterator[PgCursor]:
        """A cursor for a single statement (a read, or a write function): a transaction
        of its own in either commit mode."""
        with self._connection() as conn:
            if conn.autocommit:
                with conn.cursor(row_factory=tuple_row) as cur:
                    yield cur
                return
            with conn.transaction(), conn.cursor(row_factory=tuple_row) as cur:
                yield cur


@contextmanager
def _transaction(conn: psycopg.Connection[Any]) -> Iterator[PgCursor]:
    with conn.transaction(), conn.cursor(row_factory=tuple_row) as cur:
        yield cur


def _roll_back(conn: psycopg.Connection[Any], pipeline: psycopg.Pipeline) -> None:
    """End a failed pipelined transaction: the statement that failed has raised (or
    the block did); sync past the skipped rest, then roll back (nothing to do if a
    failed ``COMMIT`` already ended it). The block's own error is the one raised.

    ``Connection.rollback`` also forgets the connection's prepared statements: the
    server skipped every message after the failure, a statement psycopg meant to
    prepare there included, so a plain ``ROLLBACK`` would leave the next use of that
    statement naming one the server never made."""
    with suppress(psycopg.Error):
        pipeline.sync()
    with suppress(psycopg.Error):  # a lost connection: the pool replaces it
        conn.rollback()


_ADD_REQUEST = "SELECT aais_add_request(%s, %s::jsonb)"
_RESOLVE = "SELECT aais_resolve(%s, %s::jsonb, %s::jsonb)"
_RESOLVE_CLAIMING = (
    "SELECT aais_resolve_claiming(%s, %s::jsonb, %s, %s::jsonb, %s::jsonb, %s::jsonb, %s::jsonb)"
)
_ACQUIRE_LEASE = "SELECT aais_acquire_lease(%s, %s, %s, %s)"
_RENEW_LEASE = "SELECT aais_renew_lease(%s, %s, %s, %s)"
_RELEASE_LEASE = "SELECT aais_release_lease(%s, %s, %s::text[], %s)"
_RELEASE_EXECUTED = (
    "SELECT aais_release_executed("
    "%s, %s, %s::text[], %s, %s, %s, %s::jsonb, %s::jsonb, %s::jsonb, %s::jsonb)"
)
_EXECUTE = "SELECT aais_execute(%s, %s, %s, %s::jsonb, %s::jsonb, %s::jsonb, %s::jsonb)"
_EXECUTION_FIELDS = tuple(column.strip() for column in rows.EXECUTION_COLUMNS.split(","))
_EXECUTIONS_REMEMBERED = 4096
_WORK_FIELDS = tuple(column.strip() for column in rows.WORK_COLUMNS.split(","))
_READ_COUNTERS = "SELECT last_sequence, audit_tip_index, audit_tip_hash FROM aais_meta"
_AUDIT_LINK = (
    "SELECT m.audit_tip_index, m.audit_tip_hash, a.idx, a.kind, a.occurred_at, a.payload, "
    "a.prev_hash, a.entry_hash FROM aais_meta AS m LEFT JOIN LATERAL ("
    f"SELECT {rows.AUDIT_COLUMNS} FROM aais_audit WHERE idx > %s ORDER BY idx LIMIT 2"
    ") AS a ON true ORDER BY a.idx"
)
_LOCK_COUNTERS = _READ_COUNTERS + " FOR UPDATE"


def _counters_of(row: Any, *, lock: bool) -> tuple[int, Tip]:
    if row is None:
        if lock:
            raise RuntimeError("the ledger schema is missing its meta row; call setup() first")
        return 0, None
    return int(row[0]), None if row[1] is None else (int(row[1]), str(row[2]))


def _pipelined(cur: Cursor) -> bool:
    return bool(cast(Any, cur).connection.pgconn.pipeline_status != psycopg.pq.PipelineStatus.OFF)


def _lock_key(request_id: str) -> int:
    """A signed 64-bit advisory-lock key for one request's execution record."""
    digest = hashlib.sha256(("aais-execution\x00" + request_id).encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _execution_json(record: ex.Execution | None) -> str | None:
    """``record`` as a JSON object of its row's columns (None: no record)."""
    if record is None:
        return None
    return dump_json(dict(zip(_EXECUTION_FIELDS, rows.execution_row(record), strict=True)))


def _entry_json(entry: AuditEntry, payload: Mapping[str, Any]) -> str:
    """The stored audit row of ``entry`` (its payload as stored) as a JSON object."""
    return dump_json(
        {
            "idx": entry.index,
            "kind": entry.kind,
            "occurred_at": entry.occurred_at,
            "payload": dump_json(payload),
            "prev_hash": entry.prev_hash,
            "entry_hash": entry.entry_hash,
        }
    )

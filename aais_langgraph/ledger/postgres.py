"""A durable ledger in PostgreSQL (psycopg 3), shared safely by threads, processes and replicas.

Needs the ``postgres`` extra; import it from here (``aais_langgraph.ledger`` stays
standard-library only). Every state change is one READ COMMITTED transaction with
a fixed lock order, so nothing deadlocks and nothing needs a retry:

- resolve-once: the request row is locked (``SELECT ... FOR UPDATE``) before the
  resolution is looked up, so racing resolvers queue and all but the first find it;
- sequences and the audit tip live in one meta row, locked ``FOR UPDATE`` by every
  write that allocates a sequence or appends to the audit chain, and always locked
  last. Sequences are therefore gap-free, and commit in sequence order: a reader
  tailing ``events_after`` never sees sequence n+1 before n. The lock is taken by
  ``aais_stamp`` (:mod:`._postgres_server_counters`) in the statement pipelined with the
  ``COMMIT``, which fills in the sequences and audit hashes server-side, so no
  replica waits on another's client; on a schema without the function (set up
  by an earlier version) the lock waits for one client turn (the locking read's
  reply), the writes and ``COMMIT`` following in one round trip;
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
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import Any, cast

import psycopg
from psycopg.pq import TransactionStatus
from psycopg.rows import tuple_row
from psycopg_pool import ConnectionPool

from . import _postgres_rows as db
from . import executions as ex
from ._counters import Counters, Cursor, Probe, Tip, sql_for
from ._postgres_server_counters import STAMP_FUNCTIONS, StampedCounters
from ._records import request_fields
from ._sql import SqlLedger
from .deliveries import DeliveryPlan
from .records import ResolutionWrite, StoredRequest, StoredResolution
from .retention import POSTGRES_COMPACTED_SCHEMA


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
    execution_subject = db.EXECUTION_SUBJECT
    requester_subject = db.REQUESTER_SUBJECT

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
        """Create the schema if missing; idempotent and safe to run from several processes."""
        with self._write() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (db.SETUP_LOCK,))
            for statement in (
                *db.SCHEMA,
                *ex.POSTGRES_EXECUTIONS_SCHEMA,
                *db.OUTBOX_DDL,
                *POSTGRES_COMPACTED_SCHEMA,
                *STAMP_FUNCTIONS,
            ):
                cur.execute(statement)
            cur.execute(
                "INSERT INTO aais_meta (singleton, schema_version, last_sequence) "
                "VALUES (TRUE, %s, 0) ON CONFLICT (singleton) DO NOTHING",
                (db.SCHEMA_VERSION,),
            )
            cur.execute("SELECT schema_version FROM aais_meta")
            row = cur.fetchone()
            version = None if row is None else row[0]
            if version not in (1, 2, db.SCHEMA_VERSION):
                raise RuntimeError(
                    f"ledger schema version {version} is not {db.SCHEMA_VERSION}; "
                    "this database was written by another version of aais-langgraph"
                )
            db.migrate(cur, version)
            if version != db.SCHEMA_VERSION:
                self._audit_unrecorded_executions(cur)
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

    def add_request(
        self,
        envelope: Mapping[str, Any],
        *,
        thread_id: str | None = None,
        context: Mapping[str, Any] | None = None,
        mac: str | None = None,
    ) -> tuple[StoredRequest, bool]:
        try:
            return super().add_request(envelope, thread_id=thread_id, context=context, mac=mac)
        except psycopg.errors.UniqueViolation as error:
            # Stamped writes meet a concurrent writer of the same request here, not
            # under the counters' lock: the answer is the same, the request it wrote.
            existing = self.get_request(request_fields(envelope).request_id)
            if error.diag.table_name != "aais_requests" or existing is None:
                raise
            return existing, False

    def _record_resolution(
        self, write: ResolutionWrite, claim: ex.ExecutionChange | None
    ) -> tuple[StoredResolution, bool, ex.Execution | None]:
        try:
            return super()._record_resolution(write, claim)
        except psycopg.errors.UniqueViolation as error:
            if error.diag.table_name != "aais_grants":
                raise
            raise ValueError("grant: a grant with this id is already recorded") from None

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
    def _write(self, *, durable: bool = True) -> Iterator[db.Cursor]:
        """One transaction, committed when the block exits and rolled back on error;
        ``durable=False`` (leases, execution marks) commits without waiting for the WAL
        flush (``synchronous_commit`` off for this transaction only): a crashed client
        loses nothing, a crashed server the last moments of such writes."""
        with self._connection() as conn, _transaction(conn) as cur:
            if not durable:
                cur.execute("SET LOCAL synchronous_commit TO OFF")
            yield cur

    @contextmanager
    def _write_batched(self, *, durable: bool = True) -> Iterator[db.Cursor]:
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
    def _snapshot(self) -> Iterator[db.Cursor]:
        with self._write() as cur:
            cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            yield cur

    @contextmanager
    def _read(self) -> Iterator[db.Cursor]:
        """A cursor for a single statement: a transaction of its own in either commit mode."""
        with self._connection() as conn:
            if conn.autocommit:
                with conn.cursor(row_factory=tuple_row) as cur:
                    yield cur
                return
            with conn.transaction(), conn.cursor(row_factory=tuple_row) as cur:
                yield cur


@contextmanager
def _transaction(conn: psycopg.Connection[Any]) -> Iterator[db.Cursor]:
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


_READ_COUNTERS = "SELECT last_sequence, audit_tip_index, audit_tip_hash FROM aais_meta"
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

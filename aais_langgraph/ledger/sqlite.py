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

from . import _sqlite_rows as db
from . import executions as ex
from ._counters import Cursor, Tip
from ._sql import SqlLedger
from .deliveries import DeliveryPlan
from .retention import SQLITE_COMPACTED_SCHEMA

Synchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]


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
    ledger, a version-1 ledger is migrated, and any other SQLite database gains the
    ``aais_`` tables beside its own (that is how the ledger shares the checkpointer's
    file). Calling :meth:`setup` yourself is allowed and changes nothing after the
    first time. ``auto_setup=False`` turns this off (the tables must exist; a call
    on a file without them fails). :func:`~.opening.open_ledger` with
    ``create=False``, which the CLI uses for everything but ``init``, checks the
    file *before* anything writes to it and refuses a missing, empty, foreign or
    unreadable one (:class:`~.opening.NotALedgerError`).

    ``delivery_plan`` names the webhook deliveries its writes record in their own
    transactions (:mod:`.deliveries`; None: none).
    """

    execution_subject = db.EXECUTION_SUBJECT
    requester_subject = db.REQUESTER_SUBJECT
    selection_subjects = db.VIEW_SUBJECTS

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
        """A ledger on its own connection to a file path (or ``:memory:``), closed on exit."""
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
        """Switch the file to WAL and create the schema if missing, or migrate it; idempotent."""
        with self._lock:
            self._conn.execute("PRAGMA journal_mode = WAL")
            with self._immediate() as cur:
                for statement in (
                    *db.SCHEMA,
                    *ex.SQLITE_EXECUTIONS_SCHEMA,
                    *db.OUTBOX_DDL,
                    *SQLITE_COMPACTED_SCHEMA,
                ):
                    cur.execute(statement)
                cur.execute(
                    "INSERT OR IGNORE INTO aais_meta (key, value) "
                    "VALUES ('schema_version', ?), ('last_sequence', '0')",
                    (str(db.SCHEMA_VERSION),),
                )
                version = db.meta(cur, "schema_version")
                if version not in ("1", "2", str(db.SCHEMA_VERSION)):
                    raise RuntimeError(
                        f"ledger schema version {version} is not {db.SCHEMA_VERSION}; "
                        "this file was written by another version of aais-langgraph"
                    )
                db.migrate(cur, version)
                if version != str(db.SCHEMA_VERSION):
                    self._audit_unrecorded_executions(cur)
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
            return db.has_schema(self._conn)

    # -- what the shared statements need -------------------------------------------

    def _read_counters(self, cur: Cursor, *, lock: bool) -> tuple[int, Tip]:
        # BEGIN IMMEDIATE already holds the file's write lock.
        return db.read_counters(self._sqlite(cur))

    def _write_counters(self, cur: Cursor, last_sequence: int, tip: Tip) -> None:
        db.write_counters(self._sqlite(cur), last_sequence, tip)

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
            if db.is_current(self._conn):
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

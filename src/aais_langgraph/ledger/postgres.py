"""A durable ledger in PostgreSQL (psycopg 3), shared safely by threads, processes and replicas.

Needs the ``postgres`` extra; import it from here (``aais_langgraph.ledger`` stays
standard-library only). Every state change is one READ COMMITTED transaction with
a fixed lock order, so nothing deadlocks and nothing needs a retry:

- resolve-once: the request row is locked (``SELECT ... FOR UPDATE``) before the
  resolution is looked up, so racing resolvers queue and all but the first find it;
- sequences and the audit tip live in one meta row, locked ``FOR UPDATE`` by every
  write that allocates a sequence or appends to the audit chain, and always locked
  last. Sequences are therefore gap-free, and commit in sequence order: a reader
  tailing ``events_after`` never sees sequence n+1 before n;
- a run lease is one upsert whose ``WHERE`` admits only its holder or an expired
  lease, judged by the caller's ``now`` like every backend.

JSON is stored as ``text`` exactly as :func:`~._records.dump_json` writes it, never
``jsonb``, which reorders keys and turns ``1e20`` into an integer. Tables are
unqualified (they follow ``search_path``) and prefixed ``aais_`` so the ledger can
share a database with LangGraph's Postgres checkpointer. The async twins are the
base class's (the sync method in a worker thread).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus
from psycopg.rows import tuple_row
from psycopg_pool import ConnectionPool

from . import _postgres_rows as db
from . import executions as ex
from ._records import (
    check_ttl,
    draft_write,
    pending_query,
    plain,
    request_fields,
    requested_audit,
    resolution_audits,
    revoked_audit,
    with_sequence,
)
from .base import (
    AuditEntry,
    AuditKind,
    Grant,
    JsonDict,
    Lease,
    Ledger,
    LedgerContents,
    ResolutionWrite,
    StoredRequest,
    StoredResolution,
)


class PostgresLedger(Ledger):
    """The ledger in a PostgreSQL database; call :meth:`setup` once to create the schema.

    ``PostgresLedger(pool)`` takes a connection per call from a
    ``psycopg_pool.ConnectionPool`` (the choice for servers: a pool replaces
    connections lost to a database restart when given ``check=``).
    ``PostgresLedger(conn)`` shares one connection you own between threads, one call
    at a time; it must not be inside a transaction when the ledger is called, because
    the ledger commits its own. Either may be in autocommit mode or not, and may use
    any row factory (LangGraph's ``PostgresSaver`` wants ``dict_row``).
    """

    def __init__(
        self, conn: psycopg.Connection[Any] | ConnectionPool[psycopg.Connection[Any]]
    ) -> None:
        self._pool: ConnectionPool[psycopg.Connection[Any]] | None = None
        self._conn: psycopg.Connection[Any] | None = None
        if isinstance(conn, ConnectionPool):
            self._pool = conn
        elif isinstance(conn, psycopg.Connection):
            self._conn = conn
        else:
            raise TypeError("conn: expected a psycopg Connection or a psycopg_pool ConnectionPool")
        self._lock = threading.Lock()

    @classmethod
    @contextmanager
    def from_conn_string(
        cls, conn_string: str, *, pool_size: int | None = None
    ) -> Iterator[PostgresLedger]:
        """A ledger on its own connection (or a pool of up to ``pool_size``), closed on exit."""
        if pool_size is None:
            with psycopg.Connection.connect(conn_string, autocommit=True) as conn:
                yield cls(conn)
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
            yield cls(pool)

    def setup(self) -> None:
        """Create the schema if missing; idempotent and safe to run from several processes."""
        with self._transaction() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (db.SETUP_LOCK,))
            for statement in (*db.SCHEMA, *ex.POSTGRES_EXECUTIONS_SCHEMA):
                cur.execute(statement)
            cur.execute(
                "INSERT INTO aais_meta (singleton, schema_version, last_sequence) "
                "VALUES (TRUE, %s, 0) ON CONFLICT (singleton) DO NOTHING",
                (db.SCHEMA_VERSION,),
            )
            cur.execute("SELECT schema_version FROM aais_meta")
            row = cur.fetchone()
            version = None if row is None else row[0]
            if version not in (1, db.SCHEMA_VERSION):
                raise RuntimeError(
                    f"ledger schema version {version} is not {db.SCHEMA_VERSION}; "
                    "this database was written by another version of aais-langgraph"
                )
            db.migrate(cur, version)

    def is_set_up(self) -> bool:
        """Whether the database (its ``search_path``) holds the ledger's tables."""
        with self._statement() as cur:
            cur.execute("SELECT to_regclass('aais_meta') IS NOT NULL")
            row = cur.fetchone()
        return bool(row and row[0])

    # -- requests ------------------------------------------------------------------

    def add_request(
        self,
        envelope: Mapping[str, Any],
        *,
        thread_id: str | None = None,
        context: Mapping[str, Any] | None = None,
        mac: str | None = None,
    ) -> tuple[StoredRequest, bool]:
        fields = request_fields(envelope)
        draft = with_sequence(envelope, 0)
        stored_context = plain(context or {}, "/context")
        with self._transaction() as cur:
            existing = db.request(cur, fields.request_id)
            if existing is not None:  # a replay: no lock taken
                return existing, False
            with db.LockedMeta(cur) as meta:
                # Another writer may have added it while we waited for the meta row.
                existing = db.request(cur, fields.request_id)
                if existing is not None:
                    return existing, False
                sequence = meta.allocate(1)
                stored_envelope = {**draft, "sequence": sequence}
                entry = meta.append_audit(
                    "requested", requested_audit(stored_envelope, thread_id, stored_context)
                )
                db.insert_request(
                    cur, fields, thread_id, stored_envelope, stored_context, entry.index, mac
                )
                db.insert_event(cur, stored_envelope)
        stored = StoredRequest(
            request_id=fields.request_id,
            envelope=stored_envelope,
            session_id=fields.session_id,
            expires_at=fields.expires_at,
            status="pending",
            thread_id=thread_id,
            context=stored_context,
            audit_index=entry.index,
            mac=mac,
        )
        return stored, True

    def get_request(self, request_id: str) -> StoredRequest | None:
        with self._statement() as cur:
            return db.request(cur, request_id)

    def list_pending(
        self,
        *,
        thread_id: str | None = None,
        session_id: str | None = None,
        expires_before: float | None = None,
        limit: int | None = None,
    ) -> list[StoredRequest]:
        """Pending requests in sequence order; ``expires_before`` keeps those with
        ``expires_at <= expires_before`` (expired at that moment)."""
        query, params = pending_query(
            db.REQUEST_COLUMNS,
            placeholder="%s",
            no_limit=None,
            thread_id=thread_id,
            session_id=session_id,
            expires_before=expires_before,
            limit=limit,
        )
        with self._statement() as cur:
            cur.execute(query, params)
            rows = cur.fetchall()
        return [db.request_from_row(row) for row in rows]

    # -- resolutions ---------------------------------------------------------------

    def record_resolution(self, write: ResolutionWrite) -> tuple[StoredResolution, bool]:
        draft = draft_write(write)
        grant = draft.grant
        with self._transaction() as cur:
            # Racing resolvers of one request queue on its row; later ones find the winner.
            cur.execute(
                "SELECT status FROM aais_requests WHERE request_id = %s FOR UPDATE",
                (write.request_id,),
            )
            if cur.fetchone() is None:
                raise KeyError(write.request_id)
            existing = db.resolution(cur, write.request_id)
            if existing is not None:
                return existing, False
            with db.LockedMeta(cur) as meta:
                if grant is not None:
                    # Grants are only inserted under the meta lock, so this check holds.
                    cur.execute("SELECT 1 FROM aais_grants WHERE grant_id = %s", (grant.grant_id,))
                    if cur.fetchone() is not None:
                        raise ValueError("grant: a grant with this id is already recorded")

                sequence = meta.allocate(1 if draft.decided is None else 2)
                decided = None
                if draft.decided is not None:
                    decided = {**draft.decided, "sequence": sequence}
                    db.insert_event(cur, decided)
                    sequence += 1
                resolved = {**draft.resolved, "sequence": sequence}
                db.insert_event(cur, resolved)
                indexes = {
                    kind: meta.append_audit(kind, payload).index
                    for kind, payload in resolution_audits(
                        decided, resolved, write.decision_fingerprint, grant
                    )
                }
                recorded = StoredResolution(
                    write.request_id,
                    resolved,
                    write.decision_fingerprint,
                    audit_index=indexes["resolved"],
                    mac=write.mac,
                )
                db.insert_resolution(cur, recorded)
                if grant is not None:
                    db.insert_grant(cur, replace(grant, audit_index=indexes["granted"]))
        return recorded, True

    def get_resolution(self, request_id: str) -> StoredResolution | None:
        with self._statement() as cur:
            return db.resolution(cur, request_id)

    # -- grants --------------------------------------------------------------------

    def list_grants(
        self,
        *,
        session_id: str | None = None,
        action_name: str | None = None,
        include_revoked: bool = False,
    ) -> list[Grant]:
        query = f"SELECT {db.GRANT_COLUMNS} FROM aais_grants WHERE TRUE"
        params: list[Any] = []
        if session_id is not None:
            query += " AND (scope = 'persistent' OR session_id = %s)"
            params.append(session_id)
        if action_name is not None:
            query += " AND action_name = %s"
            params.append(action_name)
        if not include_revoked:
            query += " AND revoked_at IS NULL"
        query += " ORDER BY ordinal"
        with self._statement() as cur:
            cur.execute(query, params)
            rows = cur.fetchall()
        return [db.grant_from_row(row) for row in rows]

    def revoke_grant(
        self, grant_id: str, *, now: float, actor: Mapping[str, Any] | None = None
    ) -> bool:
        with self._transaction() as cur:
            cur.execute(
                f"SELECT {db.GRANT_COLUMNS} FROM aais_grants WHERE grant_id = %s FOR UPDATE",
                (grant_id,),
            )
            row = cur.fetchone()
            if row is None:
                return False
            grant = db.grant_from_row(row)
            if grant.revoked_at is not None:
                return False
            with db.LockedMeta(cur) as meta:
                cur.execute(
                    "UPDATE aais_grants SET revoked_at = %s WHERE grant_id = %s", (now, grant_id)
                )
                meta.append_audit("revoked", revoked_audit(grant, now, actor))
            return True

    # -- events and audit ----------------------------------------------------------

    def events_after(self, sequence: int, *, limit: int = 1000) -> list[JsonDict]:
        with self._statement() as cur:
            cur.execute(
                "SELECT envelope FROM aais_events WHERE sequence > %s ORDER BY sequence LIMIT %s",
                (sequence, max(limit, 0)),
            )
            rows = cur.fetchall()
        return [db.json_object(row[0]) for row in rows]

    def first_event_sequence(self) -> int | None:
        with self._statement() as cur:
            cur.execute("SELECT MIN(sequence) FROM aais_events")
            row = cur.fetchone()
        return None if row is None or row[0] is None else int(row[0])

    def last_sequence(self) -> int:
        with self._statement() as cur:
            cur.execute("SELECT last_sequence FROM aais_meta")
            row = cur.fetchone()
        return 0 if row is None else int(row[0])

    def compact_events(self, before_sequence: int) -> int:
        with self._statement() as cur:
            cur.execute("DELETE FROM aais_events WHERE sequence < %s", (before_sequence,))
            return cur.rowcount

    def contents(self) -> LedgerContents:
        with self._transaction() as cur:
            cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            return db.contents(cur)

    def append_audit(self, kind: AuditKind, payload: Mapping[str, Any]) -> AuditEntry:
        with self._transaction() as cur, db.LockedMeta(cur) as meta:
            return meta.append_audit(kind, payload)

    def audit_entries(self, *, after_index: int = -1, limit: int | None = None) -> list[AuditEntry]:
        with self._statement() as cur:
            cur.execute(
                f"SELECT {db.AUDIT_COLUMNS} FROM aais_audit WHERE idx > %s ORDER BY idx LIMIT %s",
                (after_index, None if limit is None else max(limit, 0)),
            )
            rows = cur.fetchall()
        return [db.audit_from_row(row) for row in rows]

    def audit_tip(self) -> tuple[int, str] | None:
        with self._statement() as cur:
            cur.execute("SELECT audit_tip_index, audit_tip_hash FROM aais_meta")
            row = cur.fetchone()
        if row is None or row[0] is None:
            return None
        return int(row[0]), str(row[1])

    # -- run leases ----------------------------------------------------------------

    def acquire_lease(self, thread_id: str, holder: str, *, ttl: float, now: float) -> Lease | None:
        check_ttl(ttl)
        lease = Lease(thread_id, holder, now + ttl)
        # One statement: the upsert locks the thread's row, and its WHERE admits only
        # the current holder or an expired lease; no row back means someone holds it.
        with self._statement() as cur:
            cur.execute(
                "INSERT INTO aais_leases AS lease (thread_id, holder, expires_at) "
                "VALUES (%s, %s, %s) "
                "ON CONFLICT (thread_id) DO UPDATE "
                "SET holder = excluded.holder, expires_at = excluded.expires_at "
                "WHERE lease.holder = excluded.holder OR lease.expires_at <= %s "
                "RETURNING 1",
                (thread_id, holder, lease.expires_at, now),
            )
            taken = cur.fetchone() is not None
        return lease if taken else None

    def renew_lease(self, thread_id: str, holder: str, *, ttl: float, now: float) -> Lease | None:
        check_ttl(ttl)
        lease = Lease(thread_id, holder, now + ttl)
        with self._statement() as cur:
            cur.execute(
                "UPDATE aais_leases SET expires_at = %s "
                "WHERE thread_id = %s AND holder = %s AND expires_at > %s",
                (lease.expires_at, thread_id, holder, now),
            )
            updated = cur.rowcount
        return lease if updated == 1 else None

    def release_lease(self, thread_id: str, holder: str) -> bool:
        with self._statement() as cur:
            cur.execute(
                "DELETE FROM aais_leases WHERE thread_id = %s AND holder = %s", (thread_id, holder)
            )
            return cur.rowcount == 1

    # -- execution records ---------------------------------------------------------

    def update_execution(self, request_id: str, change: ex.ExecutionChange) -> ex.Execution | None:
        with self._transaction() as cur:
            # A missing row cannot be locked FOR UPDATE: lock the request id instead.
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key(request_id),))
            cur.execute(
                f"SELECT {ex.EXECUTION_COLUMNS} FROM aais_executions WHERE request_id = %s",
                (request_id,),
            )
            row = cur.fetchone()
            current = None if row is None else ex.execution_from_row(row)
            updated = change(current)
            if updated is not None and updated != current:
                cur.execute(
                    f"INSERT INTO aais_executions ({ex.EXECUTION_COLUMNS}) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) "
                    "ON CONFLICT (request_id) DO UPDATE SET thread_id = excluded.thread_id, "
                    "state = excluded.state, holder = excluded.holder, "
                    "attempt = excluded.attempt, started_at = excluded.started_at, "
                    "live_until = excluded.live_until, updated_at = excluded.updated_at, "
                    "reconciled_by = excluded.reconciled_by",
                    ex.execution_row(updated),
                )
            return updated

    def get_execution(self, request_id: str) -> ex.Execution | None:
        with self._statement() as cur:
            cur.execute(
                f"SELECT {ex.EXECUTION_COLUMNS} FROM aais_executions WHERE request_id = %s",
                (request_id,),
            )
            row = cur.fetchone()
        return None if row is None else ex.execution_from_row(row)

    def list_executions(
        self,
        *,
        states: tuple[ex.ExecutionState, ...] = ("unknown",),
        thread_id: str | None = None,
    ) -> list[ex.Execution]:
        sql = f"SELECT {ex.EXECUTION_COLUMNS} FROM aais_executions WHERE state = ANY(%s)"
        params: list[Any] = [list(states)]
        if thread_id is not None:
            sql += " AND thread_id = %s"
            params.append(thread_id)
        with self._statement() as cur:
            cur.execute(sql + " ORDER BY started_at, request_id", params)
            rows = cur.fetchall()
        return [ex.execution_from_row(row) for row in rows]

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
    def _transaction(self) -> Iterator[db.Cursor]:
        """One transaction, committed when the block exits and rolled back on error."""
        with (
            self._connection() as conn,
            conn.transaction(),
            conn.cursor(row_factory=tuple_row) as cur,
        ):
            yield cur

    @contextmanager
    def _statement(self) -> Iterator[db.Cursor]:
        """A cursor for a single statement: a transaction of its own in either commit mode."""
        with self._connection() as conn:
            if conn.autocommit:
                with conn.cursor(row_factory=tuple_row) as cur:
                    yield cur
                return
            with conn.transaction(), conn.cursor(row_factory=tuple_row) as cur:
                yield cur


def _lock_key(request_id: str) -> int:
    """A signed 64-bit advisory-lock key for one request's execution record."""
    digest = hashlib.sha256(("aais-execution\x00" + request_id).encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)

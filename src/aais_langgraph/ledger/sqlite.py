"""A durable ledger in one SQLite file (stdlib ``sqlite3``), shared safely by threads and processes.

Every state change runs in a ``BEGIN IMMEDIATE`` transaction, which takes the
file's write lock before reading, so resolve-once, sequence allocation, audit
chaining and leases stay atomic across OS processes opening the same file. The
file uses WAL so readers never block the writer. Within a process, one
connection is shared behind a lock, which also serves ``asyncio.to_thread``.
Tables are prefixed ``aais_`` so the ledger can share a file with the LangGraph
checkpointer.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, Literal

from . import _sqlite_rows as db
from . import executions as ex
from ._records import (
    check_ttl,
    draft_write,
    dump_json,
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

Synchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]


class SqliteLedger(Ledger):
    """The ledger in a SQLite file; call :meth:`setup` once to create the schema.

    ``SqliteLedger(path)`` opens and owns a connection (close it with :meth:`close`);
    ``SqliteLedger(conn)`` uses a connection you own, which must not be in
    ``autocommit=False`` mode and must allow use from other threads
    (``check_same_thread=False``) if you call the ledger from several threads or
    from asyncio. ``synchronous`` defaults to FULL so a recorded resolution
    survives power loss; pass None to leave the connection's setting alone.
    """

    def __init__(
        self,
        path_or_conn: str | os.PathLike[str] | sqlite3.Connection,
        *,
        busy_timeout: float = 30.0,
        synchronous: Synchronous | None = "FULL",
    ) -> None:
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
        with self._lock:
            self._conn.execute(f"PRAGMA busy_timeout = {max(int(busy_timeout * 1000), 0)}")
            if synchronous is not None:
                self._conn.execute(f"PRAGMA synchronous = {synchronous}")
            self._synchronous = int(self._conn.execute("PRAGMA synchronous").fetchone()[0])

    @classmethod
    @contextmanager
    def from_path(
        cls,
        path: str | os.PathLike[str],
        *,
        busy_timeout: float = 30.0,
        synchronous: Synchronous | None = "FULL",
    ) -> Iterator[SqliteLedger]:
        """A ledger on its own connection to ``path``, closed when the block exits."""
        ledger = cls(path, busy_timeout=busy_timeout, synchronous=synchronous)
        try:
            yield ledger
        finally:
            ledger.close()

    def close(self) -> None:
        """Close the connection if this ledger opened it."""
        if self._owns_conn:
            with self._lock:
                self._conn.close()

    def setup(self) -> None:
        """Switch the file to WAL and create the schema if missing; idempotent."""
        with self._lock:
            self._conn.execute("PRAGMA journal_mode = WAL")
            with self._transaction() as conn:
                for statement in (*db.SCHEMA, *ex.SQLITE_EXECUTIONS_SCHEMA):
                    conn.execute(statement)
                conn.execute(
                    "INSERT OR IGNORE INTO aais_meta (key, value) "
                    "VALUES ('schema_version', ?), ('last_sequence', '0')",
                    (str(db.SCHEMA_VERSION),),
                )
                version = db.meta(conn, "schema_version")
                if version not in ("1", str(db.SCHEMA_VERSION)):
                    raise RuntimeError(
                        f"ledger schema version {version} is not {db.SCHEMA_VERSION}; "
                        "this file was written by another version of aais-langgraph"
                    )
                db.migrate(conn, version)

    def is_set_up(self) -> bool:
        """Whether the file holds the ledger's tables; raises ``sqlite3.DatabaseError``
        for a file that is not a SQLite database."""
        with self._lock:
            return db.has_schema(self._conn)

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
        with self._transaction() as conn:
            row = conn.execute(
                f"SELECT {db.REQUEST_COLUMNS} FROM aais_requests WHERE request_id = ?",
                (fields.request_id,),
            ).fetchone()
            if row is not None:
                return db.request_from_row(row), False
            sequence = db.allocate_sequences(conn, 1)
            stored_envelope = {**draft, "sequence": sequence}
            entry = db.append_audit(
                conn, "requested", requested_audit(stored_envelope, thread_id, stored_context)
            )
            conn.execute(
                "INSERT INTO aais_requests (request_id, sequence, session_id, thread_id, "
                "expires_at, status, envelope, context, audit_index, mac) "
                "VALUES (?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?)",
                (
                    fields.request_id,
                    sequence,
                    fields.session_id,
                    thread_id,
                    fields.expires_at,
                    dump_json(stored_envelope),
                    dump_json(stored_context),
                    entry.index,
                    mac,
                ),
            )
            db.insert_event(conn, stored_envelope)
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
        with self._lock:
            row = self._conn.execute(
                f"SELECT {db.REQUEST_COLUMNS} FROM aais_requests WHERE request_id = ?",
                (request_id,),
            ).fetchone()
        return None if row is None else db.request_from_row(row)

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
        sql, params = pending_query(
            db.REQUEST_COLUMNS,
            placeholder="?",
            no_limit=-1,
            thread_id=thread_id,
            session_id=session_id,
            expires_before=expires_before,
            limit=limit,
        )
        with self._lock:
            rows = self._conn.execute(sql, params).fetchall()
        return [db.request_from_row(row) for row in rows]

    # -- resolutions ---------------------------------------------------------------

    def record_resolution(self, write: ResolutionWrite) -> tuple[StoredResolution, bool]:
        draft = draft_write(write)
        grant = draft.grant
        with self._transaction() as conn:
            status = conn.execute(
                "SELECT status FROM aais_requests WHERE request_id = ?", (write.request_id,)
            ).fetchone()
            if status is None:
                raise KeyError(write.request_id)
            existing = db.resolution(conn, write.request_id)
            if existing is not None:
                return existing, False
            if (
                grant is not None
                and conn.execute(
                    "SELECT 1 FROM aais_grants WHERE grant_id = ?", (grant.grant_id,)
                ).fetchone()
            ):
                raise ValueError("grant: a grant with this id is already recorded")

            sequence = db.allocate_sequences(conn, 1 if draft.decided is None else 2)
            decided = None
            if draft.decided is not None:
                decided = {**draft.decided, "sequence": sequence}
                db.insert_event(conn, decided)
                sequence += 1
            resolved = {**draft.resolved, "sequence": sequence}
            db.insert_event(conn, resolved)
            indexes = {
                kind: db.append_audit(conn, kind, payload).index
                for kind, payload in resolution_audits(
                    decided, resolved, write.decision_fingerprint, grant
                )
            }
            conn.execute(
                "UPDATE aais_requests SET status = 'resolved' WHERE request_id = ?",
                (write.request_id,),
            )
            recorded = StoredResolution(
                write.request_id,
                resolved,
                write.decision_fingerprint,
                audit_index=indexes["resolved"],
                mac=write.mac,
            )
            conn.execute(
                f"INSERT INTO aais_resolutions ({db.RESOLUTION_COLUMNS}) VALUES (?, ?, ?, ?, ?)",
                (
                    write.request_id,
                    dump_json(resolved),
                    write.decision_fingerprint,
                    recorded.audit_index,
                    write.mac,
                ),
            )
            if grant is not None:
                db.insert_grant(conn, replace(grant, audit_index=indexes["granted"]))
        return recorded, True

    def get_resolution(self, request_id: str) -> StoredResolution | None:
        with self._lock:
            return db.resolution(self._conn, request_id)

    # -- grants --------------------------------------------------------------------

    def list_grants(
        self,
        *,
        session_id: str | None = None,
        action_name: str | None = None,
        include_revoked: bool = False,
    ) -> list[Grant]:
        sql = f"SELECT {db.GRANT_COLUMNS} FROM aais_grants WHERE 1 = 1"
        params: list[Any] = []
        if session_id is not None:
            sql += " AND (scope = 'persistent' OR session_id = ?)"
            params.append(session_id)
        if action_name is not None:
            sql += " AND action_name = ?"
            params.append(action_name)
        if not include_revoked:
            sql += " AND revoked_at IS NULL"
        sql += " ORDER BY ordinal"
        with self._lock:
            rows = self._conn.execute(sql, params).fetchall()
        return [db.grant_from_row(row) for row in rows]

    def revoke_grant(
        self, grant_id: str, *, now: float, actor: Mapping[str, Any] | None = None
    ) -> bool:
        with self._transaction() as conn:
            row = conn.execute(
                f"SELECT {db.GRANT_COLUMNS} FROM aais_grants WHERE grant_id = ?", (grant_id,)
            ).fetchone()
            if row is None:
                return False
            grant = db.grant_from_row(row)
            if grant.revoked_at is not None:
                return False
            conn.execute(
                "UPDATE aais_grants SET revoked_at = ? WHERE grant_id = ?", (now, grant_id)
            )
            db.append_audit(conn, "revoked", revoked_audit(grant, now, actor))
            return True

    # -- events and audit ----------------------------------------------------------

    def events_after(self, sequence: int, *, limit: int = 1000) -> list[JsonDict]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT envelope FROM aais_events WHERE sequence > ? ORDER BY sequence LIMIT ?",
                (sequence, max(limit, 0)),
            ).fetchall()
        return [db.json_object(row[0]) for row in rows]

    def first_event_sequence(self) -> int | None:
        with self._lock:
            row = self._conn.execute("SELECT MIN(sequence) FROM aais_events").fetchone()
        return None if row[0] is None else int(row[0])

    def last_sequence(self) -> int:
        with self._lock:
            return int(db.meta(self._conn, "last_sequence") or 0)

    def compact_events(self, before_sequence: int) -> int:
        with self._transaction() as conn:
            return conn.execute(
                "DELETE FROM aais_events WHERE sequence < ?", (before_sequence,)
            ).rowcount

    def contents(self) -> LedgerContents:
        with self._lock:
            self._conn.execute("BEGIN")  # one read snapshot of every table
            try:
                return db.contents(self._conn)
            finally:
                self._conn.rollback()

    def append_audit(self, kind: AuditKind, payload: Mapping[str, Any]) -> AuditEntry:
        with self._transaction() as conn:
            return db.append_audit(conn, kind, payload)

    def audit_entries(self, *, after_index: int = -1, limit: int | None = None) -> list[AuditEntry]:
        with self._lock:
            rows = self._conn.execute(
                f"SELECT {db.AUDIT_COLUMNS} FROM aais_audit WHERE idx > ? ORDER BY idx LIMIT ?",
                (after_index, -1 if limit is None else max(limit, 0)),
            ).fetchall()
        return [db.audit_from_row(row) for row in rows]

    def audit_tip(self) -> tuple[int, str] | None:
        with self._lock:
            return db.audit_tip(self._conn)

    # -- run leases ----------------------------------------------------------------

    def acquire_lease(self, thread_id: str, holder: str, *, ttl: float, now: float) -> Lease | None:
        check_ttl(ttl)
        with self._transaction(durable=False) as conn:
            row = conn.execute(
                "SELECT holder, expires_at FROM aais_leases WHERE thread_id = ?", (thread_id,)
            ).fetchone()
            if row is not None and row[0] != holder and row[1] > now:
                return None
            lease = Lease(thread_id, holder, now + ttl)
            conn.execute(
                "INSERT INTO aais_leases (thread_id, holder, expires_at) VALUES (?, ?, ?) "
                "ON CONFLICT (thread_id) DO UPDATE "
                "SET holder = excluded.holder, expires_at = excluded.expires_at",
                (thread_id, holder, lease.expires_at),
            )
            return lease

    def renew_lease(self, thread_id: str, holder: str, *, ttl: float, now: float) -> Lease | None:
        check_ttl(ttl)
        lease = Lease(thread_id, holder, now + ttl)
        with self._transaction(durable=False) as conn:
            updated = conn.execute(
                "UPDATE aais_leases SET expires_at = ? "
                "WHERE thread_id = ? AND holder = ? AND expires_at > ?",
                (lease.expires_at, thread_id, holder, now),
            ).rowcount
        return lease if updated == 1 else None

    def release_lease(self, thread_id: str, holder: str) -> bool:
        with self._transaction(durable=False) as conn:
            deleted = conn.execute(
                "DELETE FROM aais_leases WHERE thread_id = ? AND holder = ?", (thread_id, holder)
            ).rowcount
        return deleted == 1

    # -- execution records ---------------------------------------------------------

    def update_execution(self, request_id: str, change: ex.ExecutionChange) -> ex.Execution | None:
        with self._transaction() as conn:
            row = conn.execute(
                f"SELECT {ex.EXECUTION_COLUMNS} FROM aais_executions WHERE request_id = ?",
                (request_id,),
            ).fetchone()
            current = None if row is None else ex.execution_from_row(row)
            updated = change(current)
            if updated is not None and updated != current:
                conn.execute(
                    f"INSERT OR REPLACE INTO aais_executions ({ex.EXECUTION_COLUMNS}) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    ex.execution_row(updated),
                )
            return updated

    def get_execution(self, request_id: str) -> ex.Execution | None:
        with self._lock:
            row = self._conn.execute(
                f"SELECT {ex.EXECUTION_COLUMNS} FROM aais_executions WHERE request_id = ?",
                (request_id,),
            ).fetchone()
        return None if row is None else ex.execution_from_row(row)

    def list_executions(
        self,
        *,
        states: tuple[ex.ExecutionState, ...] = ("unknown",),
        thread_id: str | None = None,
    ) -> list[ex.Execution]:
        marks = ", ".join("?" for _ in states) or "NULL"
        sql = f"SELECT {ex.EXECUTION_COLUMNS} FROM aais_executions WHERE state IN ({marks})"
        params: list[Any] = list(states)
        if thread_id is not None:
            sql += " AND thread_id = ?"
            params.append(thread_id)
        with self._lock:
            rows = self._conn.execute(sql + " ORDER BY started_at, request_id", params).fetchall()
        return [ex.execution_from_row(row) for row in rows]

    # -- internals -----------------------------------------------------------------

    @contextmanager
    def _transaction(self, *, durable: bool = True) -> Iterator[sqlite3.Connection]:
        """A write transaction that holds the file's write lock from its first read.

        ``durable=False`` (leases, which expire anyway) commits without the disk
        sync: in WAL mode the write still survives a crashed process, only not a
        power loss, and it saves an fsync on every resume.
        """
        with self._lock:
            conn = self._conn
            relaxed = not durable and self._synchronous > 1
            if relaxed:
                conn.execute("PRAGMA synchronous = NORMAL")
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield conn
                    conn.commit()
                except BaseException:
                    if conn.in_transaction:
                        conn.rollback()
                    raise
            finally:
                if relaxed:
                    conn.execute(f"PRAGMA synchronous = {self._synchronous}")

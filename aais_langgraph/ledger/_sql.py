"""The ledger contract over SQL, written once for the SQLite and Postgres backends.

Every statement, and the order in which a write takes its steps and locks, lives
here. A backend supplies only what differs (:class:`SqlBackend`): its
connection handling, its placeholder and row locks, and how it stores the two
counters (the last sequence and the audit tip). Statements are written with ``?``
marks; a backend with another paramstyle names its mark in :attr:`SqlBackend.mark`.
Lock order in every write: the row it changes (``FOR UPDATE`` where the backend
locks rows), then the counters, always last (:class:`~._counters.Counters`), held
from there to the ``COMMIT``.
"""

from __future__ import annotations

import functools
import hashlib
import time
from abc import abstractmethod
from collections.abc import Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Any, ClassVar

from aais_langgraph.protocol import canonical_json

from . import _rows as rows
from . import executions as ex
from . import outbox as ob
from . import resume_work as rw
from ._counters import Counters, Cursor, Probe, Tip, sql_for
from ._records import (
    RequestFields,
    WriteDraft,
    check_ttl,
    compacted_audit,
    draft_write,
    plain,
    request_fields,
    requested_audit,
    resolution_audits,
    revoked_audit,
    thread_audit,
    with_sequence,
)
from ._rows import (
    CONTENTS_QUERIES,
    EXECUTION_COLUMNS,
    GRANT_COLUMNS,
    PENDING_COLUMNS,
    REQUEST_COLUMNS,
    RESOLUTION_COLUMNS,
    PendingRows,
    audit_from_row,
    event_from_row,
    execution_from_row,
    execution_row,
    grant_from_row,
    json_object,
    request_from_row,
    resolution_from_row,
)
from .base import Ledger
from .integrity import LedgerIntegrityError, execution_vouched, grant_seal, sealed_checkpoint
from .records import (
    THREAD_POSTERS,
    AuditEntry,
    AuditKind,
    Grant,
    JsonDict,
    Lease,
    LedgerContents,
    PendingRow,
    ResolutionWrite,
    StoredRequest,
    StoredResolution,
    ThreadRecord,
)
from .retention import (
    CompactedRequestError,
    CompactionReport,
    RetentionPolicy,
    keeps_all,
    plan_compaction,
    vouched_tombstones,
)
from .selection import PendingSelection, SelectionSubjects


def _digest_of(canonical: bytes) -> str:
    return "sha256:" + hashlib.sha256(canonical).hexdigest()


_AUDIT_BATCH = 500
"""Audit entries read per statement by :meth:`SqlLedger.audit_entries_at` (well under
every backend's bound on parameters)."""

OPEN_WORK = "state IN ('due', 'claimed', 'dead', 'unknown')"
"""Work not finished (:data:`~.outbox.OPEN_STATES`), spelled as the open-work index is."""
CLAIMABLE = "state IN ('due', 'claimed')"
SELECT_WORK = f"SELECT {rows.WORK_COLUMNS} FROM aais_outbox WHERE kind = ? AND work_id = ?"
INSERT_WORK = (
    f"INSERT INTO aais_outbox ({rows.WORK_COLUMNS}) VALUES ({', '.join('?' * 16)}) "
    "ON CONFLICT (kind, work_id) DO NOTHING"
)
"""Record new work; a row already recorded (the same kind and id) stays as it is."""
UPSERT_WORK = (
    f"INSERT INTO aais_outbox ({rows.WORK_COLUMNS}) VALUES ({', '.join('?' * 16)}) "
    "ON CONFLICT (kind, work_id) DO UPDATE SET state = excluded.state, "
    "attempts = excluded.attempts, next_at = excluded.next_at, "
    "last_error = excluded.last_error, updated_at = excluded.updated_at, "
    "claimed_by = excluded.claimed_by, claim_until = excluded.claim_until, "
    "result = excluded.result"
)
"""Store a changed row."""
COALESCE_WORK = (
    "UPDATE aais_outbox SET state = 'coalesced', updated_at = ? WHERE kind = ? AND target = ? "
    f"AND coalesce_key = ? AND {CLAIMABLE} AND claim_until <= ? AND work_id <> ?"
)
"""Replace earlier unclaimed due rows with the same key (:func:`~.outbox.coalesces`)."""
CLAIM_WORK = (
    "UPDATE aais_outbox SET state = 'claimed', claimed_by = ?, claim_until = ? "
    f"WHERE kind = ? AND work_id = ? AND {CLAIMABLE} AND next_at <= ? AND claim_until <= ?"
)
"""Claim one due row; a row count of 0 means another worker has it."""
START_CURSOR = (
    "INSERT INTO aais_delivery_cursors (subscription, sequence, updated_at) "
    "VALUES (?, ?, ?) ON CONFLICT (subscription) DO NOTHING"
)
"""Start a subscription's cursor; a row count of 0 means another sender started it."""
MOVE_CURSOR = (
    "UPDATE aais_delivery_cursors SET sequence = ?, updated_at = ? "
    "WHERE subscription = ? AND sequence = ?"
)
"""Move a cursor from the sequence read before; a row count of 0 means another sender did."""
SELECT_CURSOR = "SELECT sequence FROM aais_delivery_cursors WHERE subscription = ?"

UPSERT_EXECUTION = (
    f"INSERT INTO aais_executions ({EXECUTION_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (request_id) DO UPDATE SET thread_id = excluded.thread_id, "
    "state = excluded.state, holder = excluded.holder, attempt = excluded.attempt, "
    "started_at = excluded.started_at, live_until = excluded.live_until, "
    "updated_at = excluded.updated_at, reconciled_by = excluded.reconciled_by, mac = excluded.mac"
)
"""Store a record, replacing the request's previous one (an execution record)."""

COMPACTED_QUERY = "SELECT 1 FROM aais_compacted_requests WHERE request_id = ?"
INSERT_COMPACTED = "INSERT INTO aais_compacted_requests (request_id) VALUES (?)"
OPEN_WORK_QUERY = f"SELECT DISTINCT request_id FROM aais_outbox WHERE {OPEN_WORK}"
DELETE_FINISHED_WORK = f"DELETE FROM aais_outbox WHERE request_id = ? AND NOT {OPEN_WORK}"
REVOUCH = {
    "requested": "UPDATE aais_requests SET audit_index = ? WHERE request_id = ?",
    "resolved": "UPDATE aais_resolutions SET audit_index = ? WHERE request_id = ?",
    "granted": "UPDATE aais_grants SET audit_index = ? WHERE grant_id = ?",
}
"""Retention: a removed id's tombstone, and the rows a carried entry vouches for again."""


def pending_query(
    columns: str,
    *,
    thread_id: str | None,
    session_id: str | None,
    expires_before: float | None,
    limit: int | None,
    condition: tuple[str, list[Any]] | None = None,
    ordered: bool = True,
) -> tuple[str, list[Any]]:
    """SQL (with ``?`` marks) and parameters listing pending requests in sequence order.

    The literal ``status = 'pending'`` matches the backends' partial index, which
    also yields sequence order; ``expires_before`` keeps requests with
    ``expires_at <= expires_before`` (expired at that moment).

    Args:
        columns: the SELECT list.
        thread_id: only this thread's requests, or None.
        session_id: only this session's requests, or None.
        expires_before: only requests expired at this moment (epoch seconds), or None.
        limit: at most this many rows, or None.
        condition: a further ``(sql, parameters)`` condition, or None.
        ordered: order by sequence.
    """
    sql = f"SELECT {columns} FROM aais_requests WHERE status = 'pending'"
    params: list[Any] = []
    for column, value, operator in (
        ("thread_id", thread_id, "="),
        ("session_id", session_id, "="),
        ("expires_at", expires_before, "<="),
    ):
        if value is not None:
            sql += f" AND {column} {operator} ?"
            params.append(value)
    if condition is not None:  # one more condition (``?`` marks) and its parameters
        sql += f" AND ({condition[0]})"
        params.extend(condition[1])
    if ordered:
        sql += " ORDER BY sequence"
    if limit is not None:
        sql += " LIMIT ?"
        params.append(max(limit, 0))
    return sql, params


def selected_pending_query(
    columns: str, *, session_id: str | None, terms: list[tuple[str, list[Any]]]
) -> tuple[str, list[Any]]:
    """:func:`pending_query` cut to the rows any of ``terms`` (conditions with their
    parameters) selects: one arm per term, so each reads the index it selects by, and
    their union in sequence order. No term selects nothing."""
    listing = functools.partial(
        pending_query, thread_id=None, session_id=session_id, expires_before=None, limit=None
    )
    if len(terms) <= 1:
        return listing(columns, condition=terms[0] if terms else ("1 = 0", []))
    arms: list[str] = []
    params: list[Any] = []
    for term in terms:
        arm, values = listing(f"sequence AS listed_at, {columns}", condition=term, ordered=False)
        arms.append(arm)
        params.extend(values)
    union = " UNION ".join(arms)
    return f"SELECT {columns} FROM ({union}) AS selected ORDER BY listed_at", params


class SqlBackend(Ledger):
    """Connections, marks and counters of one SQL backend; statements run through
    :meth:`_run` with ``?`` marks, written as the backend's :attr:`mark`."""

    mark: ClassVar[str] = "?"
    """The backend's parameter placeholder (``?`` or ``%s``)."""
    _vouched_tombstones: frozenset[str] | None = None
    for_update: ClassVar[str] = ""
    """Appended to a read that must lock the row it returns (`` FOR UPDATE`` or nothing)."""
    execution_subject: ClassVar[str]
    thread_subject: ClassVar[str]
    """The indexed expression that reads an audit payload's ``request_id``."""
    requester_subject: ClassVar[str]
    """The indexed expression that reads a request context's ``requester``."""
    selection_subjects: ClassVar[SelectionSubjects | None] = None
    """The indexed expressions a :class:`~.selection.PendingSelection` selects by (None:
    the backend returns every pending row and the listing's exact check selects)."""

    # -- what a backend supplies ---------------------------------------------------

    @abstractmethod
    def _write(self, *, durable: bool = True) -> AbstractContextManager[Cursor]:
        """One write transaction, committed on a clean exit and rolled back on error;
        ``durable=False`` (leases, which expire anyway, and execution marks) may skip
        the disk sync."""

    @abstractmethod
    def _read(self) -> AbstractContextManager[Cursor]:
        """A cursor for single statements, each consistent on its own."""

    @abstractmethod
    def _snapshot(self) -> AbstractContextManager[Cursor]:
        """A read-only transaction that sees one consistent state of every table."""

    @abstractmethod
    def _read_counters(self, cur: Cursor, *, lock: bool) -> tuple[int, Tip]:
        """``(last_sequence, audit_tip)``, locked until commit when ``lock``."""

    @abstractmethod
    def _write_counters(self, cur: Cursor, last_sequence: int, tip: Tip) -> None:
        """Store both counters (inside the transaction that read them locked)."""

    def _write_batched(self, *, durable: bool = True) -> AbstractContextManager[Cursor]:
        """A write transaction (as :meth:`_write`) whose statements the backend may send
        together (a fetch waits for what is queued before it) with the ``COMMIT`` after
        the last one; errors surface by its end. The writes that lock the counters use it."""
        return self._write(durable=durable)

    def _counters(self, cur: Cursor, probe: Probe | None = None) -> Counters:
        """The counters of one write transaction (a backend may stamp them at commit)."""
        return Counters(self, cur, probe)

    def _lock_counters(self, cur: Cursor, probe: Probe | None) -> tuple[int, Tip, Any]:
        """``(last_sequence, audit_tip, probe_row)``: the counters locked until commit,
        then ``probe`` run after the lock is granted (a backend may send both at once)."""
        last_sequence, tip = self._read_counters(cur, lock=True)
        return last_sequence, tip, None if probe is None else self._one(cur, *probe)

    def _lock_execution(self, cur: Cursor, request_id: str) -> None:
        """Serialize writers of one execution record that may not exist yet."""

    # -- statements ------------------------------------------------------------------

    def _run(self, cur: Cursor, sql: str, params: Sequence[Any] = ()) -> Cursor:
        cur.execute(sql_for(sql, self.mark), params)
        return cur

    def _one(self, cur: Cursor, sql: str, params: Sequence[Any] = ()) -> Any:
        return self._run(cur, sql, params).fetchone()

    def _all(self, cur: Cursor, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return self._run(cur, sql, params).fetchall()


class SqlLedger(SqlBackend):
    """The contract's methods over SQL; subclasses supply connections, marks and counters
    (:class:`SqlBackend`)."""

    def _request(self, cur: Cursor, request_id: str) -> StoredRequest | None:
        row = self._one(
            cur, f"SELECT {REQUEST_COLUMNS} FROM aais_requests WHERE request_id = ?", (request_id,)
        )
        return None if row is None else request_from_row(row)

    def _resolution(self, cur: Cursor, request_id: str) -> StoredResolution | None:
        row = self._one(
            cur,
            f"SELECT {RESOLUTION_COLUMNS} FROM aais_resolutions WHERE request_id = ?",
            (request_id,),
        )
        return None if row is None else resolution_from_row(row)

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
        with self._write_batched() as cur:
            existing = self._request(cur, fields.request_id)
            if existing is not None:  # a replay: no lock taken
                return existing, False
            if self._one(cur, COMPACTED_QUERY, (fields.request_id,)) is not None:
                raise CompactedRequestError()
            if fields.request_id in self._tombstones(cur):
                raise CompactedRequestError()  # its row went after this process vouched for it
            # Another writer may have added it while we waited for the counters.
            again = (f"SELECT {REQUEST_COLUMNS} FROM aais_requests WHERE request_id = ?",)
            with self._counters(cur, (*again, (fields.request_id,))) as counters:
                if counters.probed is not None:
                    return request_from_row(counters.probed), False
                stored = self._stage_request(
                    counters, fields, draft, thread_id, stored_context, mac
                )
                self._record_deliveries(cur, "approval.requested", stored)
        return counters.settled(stored), True

    def _stage_request(
        self,
        counters: Counters,
        fields: RequestFields,
        draft: JsonDict,
        thread_id: str | None,
        context: JsonDict,
        mac: str | None,
    ) -> StoredRequest:
        """A new request's rows (its event, its audit entry, the request) under ``counters``."""
        stored_envelope = {**draft, "sequence": counters.allocate(1)}
        # The row's JSON is stored in RFC 8785 form where the counters allow: the bytes
        # its audit entry's digests hash, so a listing vouches for it by hashing its text.
        texts: tuple[bytes, bytes] | None = None
        digests: tuple[str | None, str | None] = (None, None)
        if counters.canonical_rows:
            texts = (
                canonical_json(stored_envelope, checked=True),
                canonical_json(context, checked=True),
            )
            digests = _digest_of(texts[0]), _digest_of(texts[1])
        entry = counters.append_audit(
            "requested",
            requested_audit(stored_envelope, thread_id, context, checked=True, digests=digests),
        )
        stored = StoredRequest(
            fields.request_id,
            stored_envelope,
            fields.session_id,
            fields.expires_at,
            "pending",
            thread_id,
            context,
            audit_index=entry.index,
            mac=mac,
        )
        text = counters.insert_event(stored_envelope)
        if texts is None:
            row = rows.request_row(stored, text)
        else:
            row = rows.request_row(stored, texts[0].decode("utf-8"), texts[1].decode("utf-8"))
        counters.insert(rows.INSERT_REQUEST, row)
        return stored

    def get_request(self, request_id: str) -> StoredRequest | None:
        with self._read() as cur:
            return self._request(cur, request_id)

    def list_pending(
        self,
        *,
        thread_id: str | None = None,
        session_id: str | None = None,
        expires_before: float | None = None,
        limit: int | None = None,
    ) -> list[StoredRequest]:
        sql, params = pending_query(
            REQUEST_COLUMNS,
            thread_id=thread_id,
            session_id=session_id,
            expires_before=expires_before,
            limit=limit,
        )
        with self._read() as cur:
            return [request_from_row(row) for row in self._all(cur, sql, params)]

    def count_pending(
        self, *, session_id: str | None = None, requester: str | None = None, limit: int
    ) -> int:
        if (session_id is None) == (requester is None):
            raise ValueError("count_pending: give exactly one of session_id and requester")
        column = "session_id" if session_id is not None else self.requester_subject
        sql = (
            "SELECT COUNT(*) FROM (SELECT 1 FROM aais_requests WHERE status = 'pending' "
            f"AND {column} = ? LIMIT ?) AS bounded"
        )
        with self._read() as cur:
            return int(self._one(cur, sql, (session_id or requester, max(limit, 0)))[0])

    def list_pending_rows(
        self, *, session_id: str | None = None, selection: PendingSelection | None = None
    ) -> list[PendingRow]:
        subjects = self.selection_subjects
        if selection is not None and subjects is not None and not selection.unbounded:
            sql, params = selected_pending_query(
                PENDING_COLUMNS, session_id=session_id, terms=subjects.terms(selection)
            )
        else:
            sql, params = pending_query(
                PENDING_COLUMNS,
                thread_id=None,
                session_id=session_id,
                expires_before=None,
                limit=None,
            )
        with self._read() as cur:
            fetched = self._all(cur, sql, params)
        return self._pending_rows.of(fetched, whole=session_id is None and selection is None)

    @functools.cached_property
    def _pending_rows(self) -> PendingRows:
        return PendingRows()

    # -- resolutions ---------------------------------------------------------------

    def record_resolution(self, write: ResolutionWrite) -> tuple[StoredResolution, bool]:
        recorded, created, _ = self._record_resolution(write, None)
        return recorded, created

    def record_resolution_claiming(
        self, write: ResolutionWrite, claim: ex.ExecutionChange
    ) -> tuple[StoredResolution, bool, ex.Execution | None]:
        return self._record_resolution(write, claim)

    def _record_resolution(
        self, write: ResolutionWrite, claim: ex.ExecutionChange | None
    ) -> tuple[StoredResolution, bool, ex.Execution | None]:
        draft = draft_write(write)
        grant = draft.grant
        claimed: ex.Execution | None = None
        staged: ex.Execution | None = None
        with self._write_batched() as cur:
            # Racing resolvers of one request queue on its row; later ones find the winner.
            sql = "SELECT thread_id FROM aais_requests WHERE request_id = ?" + self.for_update
            found = self._one(cur, sql, (write.request_id,))
            if found is None:
                raise KeyError(write.request_id)
            existing = self._resolution(cur, write.request_id)
            if existing is not None:
                return existing, False, None
            if claim is not None and draft.resolved["resolution"]["outcome"] == "approved":
                # The execution claim rides in the resolution's transaction (before the
                # counters, so their lock is held no longer): one durable write, not two.
                claimed, staged = self._change_execution(cur, write.request_id, claim)
            if found[0] is not None and not write.in_run:
                # "This thread must be resumed" commits with the answer, or not at all.
                now = time.time()
                self._record_work(cur, rw.new_resume_work(write.request_id, found[0], now), now)
            if self.delivery_plan is not None:
                # "This notification must be delivered" commits with the answer, too.
                request = self._request(cur, write.request_id)
                if request is not None:
                    self._record_deliveries(cur, "approval.resolved", request)
            self._run(
                cur,
                "UPDATE aais_requests SET status = 'resolved' WHERE request_id = ?",
                (write.request_id,),
            )
            # Grants are only inserted under the counters' lock, so this check holds.
            probe = None
            if grant is not None:
                probe = ("SELECT 1 FROM aais_grants WHERE grant_id = ?", (grant.grant_id,))
            with self._counters(cur, probe) as counters:
                if counters.probed is not None:
                    raise ValueError("grant: a grant with this id is already recorded")
                recorded = self._stage_resolution(counters, write, draft, staged)
        return counters.settled(recorded), True, claimed

    def _stage_resolution(
        self,
        counters: Counters,
        write: ResolutionWrite,
        draft: WriteDraft,
        staged: ex.Execution | None,
    ) -> StoredResolution:
        """A resolution's rows under ``counters``: its events (the decision's, when it has
        one, then the resolution's), audit entries, the resolution and its grant; and the
        audit entry of ``staged``, the execution claim riding in it."""
        grant = draft.grant
        sequence = counters.allocate(1 if draft.decided is None else 2)
        decided = None
        if draft.decided is not None:
            decided = {**draft.decided, "sequence": sequence}
            counters.insert_event(decided)
            sequence += 1
        resolved = {**draft.resolved, "sequence": sequence}
        resolved_text = counters.insert_event(resolved)
        indexes = {
            kind: counters.append_audit(kind, payload).index
            for kind, payload in resolution_audits(
                decided, resolved, write.decision_fingerprint, grant
            )
        }
        if staged is not None:
            counters.append_audit("execution", ex.execution_audit(staged))
        recorded = StoredResolution(
            write.request_id,
            resolved,
            write.decision_fingerprint,
            audit_index=indexes["resolved"],
            mac=write.mac,
        )
        counters.insert(rows.INSERT_RESOLUTION, rows.resolution_row(recorded, resolved_text))
        if grant is not None:
            vouched = replace(grant, audit_index=indexes["granted"])
            counters.insert(rows.INSERT_GRANT, rows.grant_row(vouched))
        return recorded

    def get_resolution(self, request_id: str) -> StoredResolution | None:
        with self._read() as cur:
            return self._resolution(cur, request_id)

    # -- grants --------------------------------------------------------------------

    def list_grants(
        self,
        *,
        session_id: str | None = None,
        action_name: str | None = None,
        include_revoked: bool = False,
    ) -> list[Grant]:
        sql, params = rows.grants_query(session_id, action_name, include_revoked)
        with self._read() as cur:
            return [grant_from_row(row) for row in self._all(cur, sql, params)]

    def revoke_grant(
        self, grant_id: str, *, now: float, actor: Mapping[str, Any] | None = None
    ) -> bool:
        with self._write_batched() as cur:
            sql = f"SELECT {GRANT_COLUMNS} FROM aais_grants WHERE grant_id = ?" + self.for_update
            row = self._one(cur, sql, (grant_id,))
            if row is None or grant_from_row(row).revoked_at is not None:
                return False
            grant = grant_from_row(row)
            key = self.authority_key
            mac = grant.mac if key is None else grant_seal(key, replace(grant, revoked_at=now))
            with self._counters(cur) as counters:
                self._run(
                    cur,
                    "UPDATE aais_grants SET revoked_at = ?, mac = ? WHERE grant_id = ?",
                    (now, mac, grant_id),
                )
                counters.append_audit("revoked", revoked_audit(grant, now, actor))
            return True

    # -- events and audit ----------------------------------------------------------

    def events_after(self, sequence: int, *, limit: int = 1000) -> list[JsonDict]:
        sql = "SELECT envelope FROM aais_events WHERE sequence > ? ORDER BY sequence LIMIT ?"
        with self._read() as cur:
            return [json_object(row[0]) for row in self._all(cur, sql, (sequence, max(limit, 0)))]

    def first_event_sequence(self) -> int | None:
        with self._read() as cur:
            row = self._one(cur, "SELECT MIN(sequence) FROM aais_events")
        return None if row is None or row[0] is None else int(row[0])

    def last_sequence(self) -> int:
        with self._read() as cur:
            return self._read_counters(cur, lock=False)[0]

    def compact_events(self, before_sequence: int, *, key: bytes | None = None) -> int:
        key = self._sealing_key(key)
        with self._write() as cur:  # not batched: the audit entry needs the count first
            sql = "DELETE FROM aais_events WHERE sequence < ?"
            removed = int(self._run(cur, sql, (before_sequence,)).rowcount)
            if removed:
                with self._counters(cur) as counters:
                    # The floor the audit records is never past the sequences assigned: later
                    # events must stay vouched for.
                    floor = min(before_sequence, counters.last_sequence + 1)
                    payload = sealed_checkpoint(key, compacted_audit(floor, removed))
                    counters.append_audit("compacted", payload)
        return removed

    def compact_history(
        self, policy: RetentionPolicy, *, now: float, key: bytes | None = None
    ) -> CompactionReport:
        key = self._sealing_key(key)
        # Unlike other writes, the counters are locked first: the plan must be made from a
        # chain no one appends to. The rows it then deletes are resolved requests' rows,
        # which no writer waiting for the counters holds.
        with self._read() as cur:
            resolved = int(self._one(cur, "SELECT COUNT(*) FROM aais_resolutions")[0])
        if keeps_all(policy, resolved):
            return CompactionReport()
        with self._write() as cur, self._counters(cur) as counters:
            open_work = [str(row[0]) for row in self._all(cur, OPEN_WORK_QUERY)]
            plan = plan_compaction(self._contents(cur), open_work, policy, now=now)
            if plan is None:
                return CompactionReport()
            for request_id in sorted(plan.removed):
                for table in ("aais_requests", "aais_resolutions", "aais_grants"):
                    self._run(cur, f"DELETE FROM {table} WHERE request_id = ?", (request_id,))
                self._run(cur, "DELETE FROM aais_executions WHERE request_id = ?", (request_id,))
                self._run(cur, DELETE_FINISHED_WORK, (request_id,))
                self._run(cur, INSERT_COMPACTED, (request_id,))
            self._run(cur, "DELETE FROM aais_events WHERE sequence < ?", (plan.before_sequence,))
            for old in plan.carried:
                entry = counters.append_audit(old.kind, old.payload)
                revouch = REVOUCH.get(entry.kind)
                if revouch is not None:
                    row_key = "grant_id" if entry.kind == "granted" else "request_id"
                    self._run(cur, revouch, (entry.index, entry.payload.get(row_key)))
            checkpoint = counters.append_audit("compacted", plan.checkpoint(key))
            self._vouched_tombstones = plan.tombstones
            self._run(cur, "DELETE FROM aais_audit WHERE idx < ?", (plan.cut,))
        return plan.report(counters.settled(checkpoint))

    def _tombstones(self, cur: Cursor) -> frozenset[str]:
        """The tombstones as the newest checkpoint vouched for them when this process first
        stored a request (or compacted), so a tombstone deleted later is still refused."""
        if self._vouched_tombstones is None:
            sql = f"SELECT {rows.AUDIT_COLUMNS} FROM aais_audit WHERE kind = 'compacted'"
            checkpoints = [audit_from_row(row) for row in self._all(cur, sql)]
            stored = [str(row[0]) for row in self._all(cur, CONTENTS_QUERIES["tombstones"])]
            self._vouched_tombstones = vouched_tombstones(
                checkpoints, stored, key=self.authority_key
            )
        return self._vouched_tombstones

    def contents(self) -> LedgerContents:
        with self._snapshot() as cur:
            return self._contents(cur)

    def _contents(self, cur: Cursor) -> LedgerContents:
        rows = {name: self._all(cur, sql) for name, sql in CONTENTS_QUERIES.items()}
        sequences = self._all(cur, "SELECT request_id, sequence FROM aais_requests")
        last_sequence, tip = self._read_counters(cur, lock=False)
        return LedgerContents(
            requests=[request_from_row(row) for row in rows["requests"]],
            resolutions=[resolution_from_row(row) for row in rows["resolutions"]],
            grants=[grant_from_row(row) for row in rows["grants"]],
            events=[event_from_row(row) for row in rows["events"]],
            audit=[audit_from_row(row) for row in rows["audit"]],
            audit_tip=tip,
            last_sequence=last_sequence,
            request_sequences={str(row[0]): int(row[1]) for row in sequences},
            executions=[execution_from_row(row) for row in rows["executions"]],
            tombstones=frozenset(str(row[0]) for row in rows["tombstones"]),
            threads={str(row[0]): str(row[1]) for row in rows["threads"]},
            thread_posters=_posters(rows["thread_posts"]),
        )

    def append_audit(self, kind: AuditKind, payload: Mapping[str, Any]) -> AuditEntry:
        with self._write_batched() as cur, self._counters(cur) as counters:
            entry = counters.append_audit(kind, payload)
        return counters.settled(entry)

    def audit_entries(self, *, after_index: int = -1, limit: int | None = None) -> list[AuditEntry]:
        sql = f"SELECT {rows.AUDIT_COLUMNS} FROM aais_audit WHERE idx > ? ORDER BY idx"
        params: list[Any] = [after_index]
        if limit is not None:
            sql += " LIMIT ?"
            params.append(max(limit, 0))
        with self._read() as cur:
            return [audit_from_row(row) for row in self._all(cur, sql, params)]

    def audit_entries_at(self, indexes: Collection[int]) -> dict[int, AuditEntry]:
        wanted = sorted(set(indexes))
        found: dict[int, AuditEntry] = {}
        with self._read() as cur:
            for start in range(0, len(wanted), _AUDIT_BATCH):
                chunk = wanted[start : start + _AUDIT_BATCH]
                marks = ", ".join("?" for _ in chunk)
                sql = f"SELECT {rows.AUDIT_COLUMNS} FROM aais_audit WHERE idx IN ({marks})"
                for row in self._all(cur, sql, chunk):
                    entry = audit_from_row(row)
                    found[entry.index] = entry
        return found

    def audit_tip(self) -> tuple[int, str] | None:
        with self._read() as cur:
            return self._read_counters(cur, lock=False)[1]

    # -- thread owners -----------------------------------------------------------------

    def post_to_thread(
        self, thread_id: str, sender: str, *, now: float, start: bool = False
    ) -> ThreadRecord:
        # Not fsync'd: a post lost to a power loss is recorded again by the next run.
        # Who started a thread and who first posted to it are facts thread access reads:
        # each is chained (and sealed) as a ``thread`` audit entry in the same write. A
        # later post only moves ``posted_at``, which orders the posters.
        with self._write(durable=False) as cur:
            started = self._run(
                cur,
                "INSERT INTO aais_threads (thread_id, owner, since) VALUES (?, ?, ?) "
                "ON CONFLICT (thread_id) DO NOTHING",
                (thread_id, sender, now),
            ).rowcount
            row = self._one(cur, "SELECT owner FROM aais_threads WHERE thread_id = ?", (thread_id,))
            owner = str(row[0])
            audits = [thread_audit(thread_id, owner=owner)] if started else []
            if not start or owner == sender:
                known = self._one(
                    cur,
                    "SELECT 1 FROM aais_thread_posts WHERE thread_id = ? AND poster = ?",
                    (thread_id, sender),
                )
                self._run(
                    cur,
                    "INSERT INTO aais_thread_posts (thread_id, poster, posted_at) "
                    "VALUES (?, ?, ?) ON CONFLICT (thread_id, poster) "
                    "DO UPDATE SET posted_at = excluded.posted_at",
                    (thread_id, sender, now),
                )
                if known is None:
                    audits.append(thread_audit(thread_id, poster=sender))
            if audits:
                with self._counters(cur) as counters:
                    for payload in audits:
                        counters.append_audit("thread", payload)
            return self._thread_record(cur, thread_id, owner)

    def thread_entries(self, thread_id: str) -> list[AuditEntry]:
        sql = (
            f"SELECT {rows.AUDIT_COLUMNS} FROM aais_audit WHERE kind = 'thread' "
            f"AND {self.thread_subject} = ? ORDER BY idx"
        )
        with self._read() as cur:
            return [audit_from_row(row) for row in self._all(cur, sql, (thread_id,))]

    def thread_record(self, thread_id: str) -> ThreadRecord | None:
        with self._read() as cur:
            row = self._one(cur, "SELECT owner FROM aais_threads WHERE thread_id = ?", (thread_id,))
            return None if row is None else self._thread_record(cur, thread_id, str(row[0]))

    def _thread_record(self, cur: Cursor, thread_id: str, owner: str) -> ThreadRecord:
        rows = self._all(
            cur,
            "SELECT poster FROM aais_thread_posts WHERE thread_id = ? "
            "ORDER BY posted_at DESC, poster LIMIT ?",
            (thread_id, THREAD_POSTERS),
        )
        return ThreadRecord(thread_id, owner, tuple(str(row[0]) for row in rows))

    def requests_of_thread(self, thread_id: str, *, limit: int = 100) -> list[StoredRequest]:
        sql = (
            f"SELECT {REQUEST_COLUMNS} FROM aais_requests WHERE thread_id = ? "
            "ORDER BY sequence LIMIT ?"
        )
        with self._read() as cur:
            rows_found = self._all(cur, sql, (thread_id, max(limit, 0)))
        return [request_from_row(row) for row in rows_found]

    # -- run leases ----------------------------------------------------------------

    def acquire_lease(self, thread_id: str, holder: str, *, ttl: float, now: float) -> Lease | None:
        check_ttl(ttl)
        lease = Lease(thread_id, holder, now + ttl)
        with self._write(durable=False) as cur:
            params = (thread_id, holder, lease.expires_at, now)
            taken = self._run(cur, rows.ACQUIRE_LEASE, params).rowcount
        return lease if taken == 1 else None

    def renew_lease(self, thread_id: str, holder: str, *, ttl: float, now: float) -> Lease | None:
        check_ttl(ttl)
        lease = Lease(thread_id, holder, now + ttl)
        with self._write(durable=False) as cur:
            params = (lease.expires_at, thread_id, holder, now)
            updated = self._run(cur, rows.RENEW_LEASE, params).rowcount
        return lease if updated == 1 else None

    def release_lease(
        self,
        thread_id: str,
        holder: str,
        *,
        done: Sequence[str] = (),
        executions: Mapping[str, ex.ExecutionChange] | None = None,
    ) -> bool:
        if executions:
            return self._release_executed(thread_id, holder, done, executions)
        with self._write(durable=False) as cur:
            settle = ob.settled_change("done", time.time())
            for request_id in done:
                self._change_work(cur, ob.RESUME, request_id, settle)
            return bool(self._run(cur, rows.RELEASE_LEASE, (thread_id, holder)).rowcount == 1)

    def _release_executed(
        self,
        thread_id: str,
        holder: str,
        done: Sequence[str],
        executions: Mapping[str, ex.ExecutionChange],
    ) -> bool:
        """``release_lease`` with execution changes: the records first, then the work and
        the lease, the counters last (their audit entries)."""
        with self._write_batched(durable=False) as cur:
            stored = [
                changed
                for request_id, change in executions.items()
                for changed in (self._change_execution(cur, request_id, change)[1],)
                if changed is not None
            ]
            settle = ob.settled_change("done", time.time())
            for request_id in done:
                self._change_work(cur, ob.RESUME, request_id, settle)
            released = self._run(cur, rows.RELEASE_LEASE, (thread_id, holder)).rowcount == 1
            if stored:
                with self._counters(cur) as counters:
                    for record in stored:
                        counters.append_audit("execution", ex.execution_audit(record))
        return bool(released)

    def get_lease(self, thread_id: str) -> Lease | None:
        sql = "SELECT thread_id, holder, expires_at FROM aais_leases WHERE thread_id = ?"
        with self._read() as cur:
            row = self._one(cur, sql, (thread_id,))
        return None if row is None else Lease(row[0], row[1], float(row[2]))

    def list_leases(self) -> list[Lease]:
        sql = "SELECT thread_id, holder, expires_at FROM aais_leases ORDER BY thread_id"
        with self._read() as cur:
            return [Lease(row[0], row[1], float(row[2])) for row in self._all(cur, sql)]

    # -- the outbox ---------------------------------------------------------------

    def _work(self, cur: Cursor, kind: str, work_id: str, *, lock: bool = False) -> ob.Work | None:
        sql = SELECT_WORK + (self.for_update if lock else "")
        row = self._one(cur, sql, (kind, work_id))
        return None if row is None else rows.work_from_row(row)

    def _record_work(self, cur: Cursor, work: ob.Work, now: float) -> None:
        """Record new work inside a write transaction: a row already recorded (the same
        kind and id) stays as it is; one it coalesces is replaced."""
        if work.coalesce_key is not None:
            params = (now, work.kind, work.target, work.coalesce_key, now, work.work_id)
            self._run(cur, COALESCE_WORK, params)
        self._run(cur, INSERT_WORK, rows.work_row(work))

    def _record_deliveries(self, cur: Cursor, notice: Any, request: StoredRequest) -> None:
        """Record the deliveries the plan asks for inside the write transaction."""
        if self.delivery_plan is None:
            return
        now = time.time()
        for delivery in self.delivery_plan.deliveries(notice, request, now):
            self._record_work(cur, delivery, now)

    def get_work(self, kind: str, work_id: str) -> ob.Work | None:
        with self._read() as cur:
            return self._work(cur, kind, work_id)

    def list_work(
        self,
        kind: str,
        *,
        states: tuple[ob.WorkState, ...] = ob.OPEN_STATES,
        due_before: float | None = None,
        thread_id: str | None = None,
        request_id: str | None = None,
        limit: int | None = None,
    ) -> list[ob.Work]:
        marks = ", ".join("?" for _ in states) or "NULL"
        sql = f"SELECT {rows.WORK_COLUMNS} FROM aais_outbox WHERE kind = ? AND state IN ({marks})"
        if set(states) <= set(ob.OPEN_STATES):
            sql += f" AND {OPEN_WORK}"  # matches the partial index of open work
        params: list[Any] = [kind, *states]
        for column, value, operator in (
            ("next_at", due_before, "<="),
            ("thread_id", thread_id, "="),
            ("request_id", request_id, "="),
        ):
            if value is not None:
                sql += f" AND {column} {operator} ?"
                params.append(value)
        sql += " ORDER BY next_at, work_id"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(max(limit, 0))
        with self._read() as cur:
            return [rows.work_from_row(row) for row in self._all(cur, sql, params)]

    def claim_work(
        self,
        kind: str,
        holder: str,
        *,
        targets: tuple[str, ...],
        ttl: float,
        now: float,
        limit: int = 20,
    ) -> list[ob.Work]:
        check_ttl(ttl)
        if not targets:
            return []
        marks = ", ".join("?" for _ in targets)
        sql = (
            f"SELECT {rows.WORK_COLUMNS} FROM aais_outbox WHERE kind = ? AND {CLAIMABLE} "
            f"AND next_at <= ? AND claim_until <= ? AND target IN ({marks}) "
            "ORDER BY next_at, work_id LIMIT ?"
        )
        taken = []
        with self._write(durable=False) as cur:
            due = self._all(cur, sql, (kind, now, now, *targets, max(limit, 0)))
            for row in due:
                work = ob.claimed(rows.work_from_row(row), holder, now + ttl)
                params = (holder, now + ttl, kind, work.work_id, now, now)
                # Another replica may have claimed it since the read: the row count says.
                if self._run(cur, CLAIM_WORK, params).rowcount == 1:
                    taken.append(work)
        return taken

    def update_work(
        self,
        kind: str,
        work_id: str,
        change: ob.WorkChange,
        *,
        durable: bool = False,
        records: Sequence[ob.Work] = (),
        audit: Mapping[str, Any] | None = None,
    ) -> ob.Work | None:
        if not records and audit is None:
            with self._write(durable=durable) as cur:
                return self._change_work(cur, kind, work_id, change)
        with self._write_batched() as cur:
            current = self._work(cur, kind, work_id, lock=True)
            updated = change(current)
            if updated is None or updated == current:
                return updated
            self._run(cur, UPSERT_WORK, rows.work_row(updated))
            for work in records:
                self._record_work(cur, work, updated.updated_at)
            if audit is None:
                return updated
            with self._counters(cur) as counters:
                counters.append_audit("follow_up", audit)
        return counters.settled(updated)

    def _change_work(
        self, cur: Cursor, kind: str, work_id: str, change: ob.WorkChange
    ) -> ob.Work | None:
        """Apply ``change`` to one row inside a write transaction."""
        current = self._work(cur, kind, work_id, lock=True)
        updated = change(current)
        if updated is not None and updated != current:
            self._run(cur, UPSERT_WORK, rows.work_row(updated))
        return updated

    def delivery_cursor(self, subscription: str) -> int | None:
        with self._read() as cur:
            row = self._one(cur, SELECT_CURSOR, (subscription,))
        return None if row is None else int(row[0])

    def advance_delivery_cursor(
        self,
        subscription: str,
        *,
        start: int | None,
        to: int,
        deliveries: Sequence[ob.Work] = (),
        now: float,
    ) -> bool:
        with self._write() as cur:
            if start is None:
                moved = self._run(cur, START_CURSOR, (subscription, to, now)).rowcount == 1
            else:
                params = (to, now, subscription, start)
                moved = self._run(cur, MOVE_CURSOR, params).rowcount == 1
            if moved:
                for delivery in deliveries:
                    self._run(cur, INSERT_WORK, rows.work_row(delivery))
            return moved

    # -- execution records ---------------------------------------------------------

    def update_execution(
        self, request_id: str, change: ex.ExecutionChange, *, durable: bool = True
    ) -> ex.Execution | None:
        with self._write_batched(durable=durable) as cur:
            updated, stored = self._change_execution(cur, request_id, change)
            if stored is not None:
                with self._counters(cur) as counters:
                    counters.append_audit("execution", ex.execution_audit(stored))
        return updated

    def _change_execution(
        self, cur: Cursor, request_id: str, change: ex.ExecutionChange
    ) -> tuple[ex.Execution | None, ex.Execution | None]:
        """``(after, stored)``: the record after ``change``, and the one this write stored
        (None: unchanged), whose audit entry the caller appends under the counters."""
        self._lock_execution(cur, request_id)
        current = self._execution(cur, request_id)
        problem = execution_vouched(current, self._execution_entry(cur, request_id))
        if problem is not None:
            raise LedgerIntegrityError("aais_executions", request_id, problem)
        updated = change(current)
        if updated is None or updated == current:
            return updated, None
        if updated.request_id != request_id:  # pragma: no cover - the changes keep the id
            raise ValueError("request_id: an execution change cannot move the record")
        self._run(cur, UPSERT_EXECUTION, execution_row(updated))
        return updated, updated

    def _execution_entry(self, cur: Cursor, request_id: str) -> AuditEntry | None:
        sql = (
            f"SELECT {rows.AUDIT_COLUMNS} FROM aais_audit WHERE kind = 'execution' "
            f"AND {self.execution_subject} = ? ORDER BY idx DESC LIMIT 1"
        )
        row = self._one(cur, sql, (request_id,))
        return None if row is None else audit_from_row(row)

    def follow_up_entries(self, request_id: str) -> list[AuditEntry]:
        sql = (
            f"SELECT {rows.AUDIT_COLUMNS} FROM aais_audit WHERE kind = 'follow_up' "
            f"AND {self.execution_subject} = ? ORDER BY idx"
        )
        with self._read() as cur:
            return [audit_from_row(row) for row in self._all(cur, sql, (request_id,))]

    def execution_with_entry(
        self, request_id: str
    ) -> tuple[ex.Execution | None, AuditEntry | None]:
        with self._snapshot() as cur:
            return self._execution(cur, request_id), self._execution_entry(cur, request_id)

    def _execution(self, cur: Cursor, request_id: str) -> ex.Execution | None:
        sql = f"SELECT {EXECUTION_COLUMNS} FROM aais_executions WHERE request_id = ?"
        row = self._one(cur, sql, (request_id,))
        return None if row is None else execution_from_row(row)

    def list_executions(
        self,
        *,
        states: tuple[ex.ExecutionState, ...] = ("unknown",),
        thread_id: str | None = None,
    ) -> list[ex.Execution]:
        marks = ", ".join("?" for _ in states) or "NULL"
        sql = f"SELECT {EXECUTION_COLUMNS} FROM aais_executions WHERE state IN ({marks})"
        params: list[Any] = list(states)
        if thread_id is not None:
            sql += " AND thread_id = ?"
            params.append(thread_id)
        with self._read() as cur:
            rows = self._all(cur, sql + " ORDER BY started_at, request_id", params)
        return [execution_from_row(row) for row in rows]


def _posters(found: list[Any]) -> dict[str, frozenset[str]]:
    """Each thread's posters from ``(thread_id, poster)`` rows."""
    posters: dict[str, set[str]] = {}
    for thread_id, poster in found:
        posters.setdefault(str(thread_id), set()).add(str(poster))
    return {thread_id: frozenset(names) for thread_id, names in posters.items()}

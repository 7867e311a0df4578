"""The ledger contract: the authority's durable state, independent of any backend.

A ledger stores requests, their one resolution, grants, the AAIS event stream,
a hash-chained audit log and per-thread run leases. Every method that changes
state is atomic: resolve-once and sequence allocation hold across threads and,
for durable backends, across OS processes. Values are plain JSON-ready dicts so
any backend can store them as text. Every public method has an ``a``-prefixed
async twin with the same parameters; the default twins run the sync method in a
worker thread (tests/ledger/test_async.py checks that none is missing).
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar, cast

from .outbox import OPEN_STATES, Work, WorkChange, WorkState
from .records import (
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
from .selection import PendingSelection, RowFacts

if TYPE_CHECKING:
    from .deliveries import DeliveryPlan
    from .executions import Execution, ExecutionChange, ExecutionState
    from .retention import CompactionReport, RetentionPolicy

P = ParamSpec("P")
R = TypeVar("R")


class NotALedgerError(ValueError):
    """``--db`` names no ledger: a missing, empty, foreign or unreadable file or database."""


class LedgerVersionError(NotALedgerError, RuntimeError):
    """``schema_version``: the ledger was written by another version of aais-langgraph
    (nothing earlier than this schema was released, so none is upgraded)."""

    def __init__(self, found: object, expected: int) -> None:
        super().__init__(
            f"schema_version: ledger schema version {found} is not {expected}; "
            "it was written by another version of aais-langgraph"
        )


def _approved(write: ResolutionWrite) -> bool:
    """Whether ``write`` records an ``approved`` resolution (the only kind that is claimed)."""
    resolution = write.resolved.get("resolution")
    return isinstance(resolution, dict) and resolution.get("outcome") == "approved"


def _twin(
    method: Callable[Concatenate[Ledger, P], R],
) -> Callable[Concatenate[Ledger, P], Coroutine[Any, Any, R]]:
    """The ``a``-prefixed twin of a ledger method: the backend's method in a worker thread."""
    name = method.__name__

    async def twin(self: Ledger, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return cast("R", await asyncio.to_thread(getattr(self, name), *args, **kwargs))

    twin.__name__ = twin.__qualname__ = f"a{name}"
    twin.__wrapped__ = method  # type: ignore[attr-defined]  # inspect.signature: the method's
    twin.__doc__ = f"Async twin of :meth:`{name}` (runs it in a worker thread)."
    return twin


class Ledger(ABC):
    """Durable authority state. Backends: memory, SQLite, Postgres (one module each)."""

    # -- lifecycle -----------------------------------------------------------------

    def setup(self) -> None:  # noqa: B027 - optional hook: a backend without schema needs nothing
        """Create the schema if missing; idempotent. A schema another version of
        aais-langgraph wrote raises :class:`LedgerVersionError` (none is upgraded).

        ``SqliteLedger`` runs it on first use; ``PostgresLedger`` needs it called
        (by whoever deploys), as LangGraph's ``PostgresSaver`` does."""

    def is_set_up(self) -> bool:
        """Whether the ledger's tables exist (False for an empty or foreign database)."""
        return True

    # -- the authority key -----------------------------------------------------------

    _authority_key: bytes | None = None

    @property
    def authority_key(self) -> bytes | None:
        """The key the ledger's one append primitive seals every audit entry with, and a
        compaction its checkpoint (None: no seal). The authority sets it to the key it
        resolved; a ledger serves one deployment, so it keeps the first key it is given
        (another authority on it with another key verifies against its own, and fails)."""
        return self._authority_key

    @authority_key.setter
    def authority_key(self, key: bytes | None) -> None:
        if key is not None and self._authority_key is None:
            self._authority_key = bytes(key)

    def _sealing_key(self, key: bytes | None = None) -> bytes | None:
        """The key a compaction seals its checkpoint with: ``key`` when given (then also
        the ledger's, if it had none), else the one the authority handed the ledger."""
        self.authority_key = key
        return self.authority_key if key is None else key

    # -- requests ------------------------------------------------------------------

    @abstractmethod
    def add_request(
        self,
        envelope: Mapping[str, Any],
        *,
        thread_id: str | None = None,
        context: Mapping[str, Any] | None = None,
        mac: str | None = None,
    ) -> tuple[StoredRequest, bool]:
        """Store a new request, or return the stored one with the same id.

        Atomically assigns the envelope's ``sequence``, appends it to the event
        stream and a ``requested`` audit entry. ``mac`` is stored with the row.
        Returns ``(stored, created)``.

        Args:
            envelope: the ``approval.requested`` envelope (its ``sequence`` is assigned here).
            thread_id: the LangGraph thread that waits for it.
            context: runtime facts stored beside it (``requester``, ``tool_call_id``, ...).
            mac: the row's seal (None without an authority key).
        """

    @abstractmethod
    def get_request(self, request_id: str) -> StoredRequest | None:
        """The stored request, pending or resolved."""

    @abstractmethod
    def list_pending(
        self,
        *,
        thread_id: str | None = None,
        session_id: str | None = None,
        expires_before: float | None = None,
        limit: int | None = None,
    ) -> list[StoredRequest]:
        """Pending requests in sequence order; cost O(pending), not O(history).

        Args:
            thread_id: only this thread's requests.
            session_id: only this session's requests.
            expires_before: only those with ``expires_at <= expires_before`` (expired at that
                moment).
            limit: at most this many.
        """

    @abstractmethod
    def count_pending(
        self, *, session_id: str | None = None, requester: str | None = None, limit: int
    ) -> int:
        """How many requests are pending in the session, or for the requester (the
        ``requester`` member of their context), counting no further than ``limit``: an
        indexed read of at most ``limit`` rows, for bounds checked on every request."""

    def list_pending_rows(
        self, *, session_id: str | None = None, selection: PendingSelection | None = None
    ) -> list[PendingRow]:
        """:meth:`list_pending` as stored rows, JSON unparsed (for listings that remember
        what they have seen; a backend storing text overrides this to skip the parsing).

        ``selection``: at least the rows it admits (a backend may return more, never
        fewer; None: every row), so a listing for one viewer reads what they may see."""
        rows = self.list_pending(session_id=session_id)
        if selection is not None and not selection.unbounded:
            rows = [s for s in rows if selection.admits(RowFacts.of(s.envelope, s.context))]
        return [PendingRow.of(stored) for stored in rows]

    # -- resolutions ---------------------------------------------------------------

    @abstractmethod
    def record_resolution(self, write: ResolutionWrite) -> tuple[StoredResolution, bool]:
        """Record the request's one resolution, or return the one already recorded.

        In one transaction: if the request already resolved, return ``(existing,
        False)`` and change nothing; otherwise append ``decided`` (if any) and
        ``resolved`` to the event stream with fresh sequences, mark the request
        resolved, store the grant, append audit entries, record the thread's resume
        work (unless ``write.in_run``), and return ``(new, True)``.
        Raises KeyError if the request is unknown.
        """

    def record_resolution_claiming(
        self, write: ResolutionWrite, claim: ExecutionChange
    ) -> tuple[StoredResolution, bool, Execution | None]:
        """:meth:`record_resolution`, and when it records an ``approved`` resolution, the
        execution ``claim`` applied (as :meth:`update_execution`) in the same transaction
        where the backend can: one durable write for "decide + claim". The record is
        None when nothing was claimed (nothing recorded, or not approved).
        """
        recorded, created = self.record_resolution(write)
        if not created or not _approved(write):
            return recorded, created, None
        return recorded, created, self.update_execution(write.request_id, claim)

    @abstractmethod
    def get_resolution(self, request_id: str) -> StoredResolution | None:
        """The recorded resolution of a request, if any."""

    # -- grants --------------------------------------------------------------------

    @abstractmethod
    def list_grants(
        self,
        *,
        session_id: str | None = None,
        action_name: str | None = None,
        include_revoked: bool = False,
    ) -> list[Grant]:
        """Grants, optionally those usable in a session (its session grants plus
        every persistent grant) for one action name."""

    @abstractmethod
    def revoke_grant(
        self, grant_id: str, *, now: float, actor: Mapping[str, Any] | None = None
    ) -> bool:
        """Revoke a live grant and audit it (naming ``actor`` when given); False if unknown
        or already revoked."""

    # -- events and audit ----------------------------------------------------------

    @abstractmethod
    def events_after(self, sequence: int, *, limit: int = 1000) -> list[JsonDict]:
        """Stored AAIS envelopes with a sequence greater than ``sequence``, in order."""

    @abstractmethod
    def first_event_sequence(self) -> int | None:
        """The oldest sequence still stored (to detect a gap after compaction)."""

    @abstractmethod
    def last_sequence(self) -> int:
        """The highest sequence assigned so far (0 when empty)."""

    @abstractmethod
    def compact_events(self, before_sequence: int, *, key: bytes | None = None) -> int:
        """Drop events older than ``before_sequence``; returns how many. A compaction that
        drops any is audited (``compacted``, naming ``before_sequence``, sealed with the
        authority ``key`` when one is given) in the same transaction, so a ledger whose
        events were deleted does not look like one compacted."""

    def compact_history(
        self, policy: RetentionPolicy, *, now: float, key: bytes | None = None
    ) -> CompactionReport:
        """Remove the resolved requests ``policy`` lets go, with their events, grants,
        execution records, resume work and audit entries, in one transaction that appends
        a ``compacted`` checkpoint so the chain left still verifies (see :mod:`.retention`:
        what is still needed stays). The checkpoint records the carried entries' and the
        tombstones' digests and is sealed with the authority ``key`` when one is given. A
        removed id can never be stored again."""
        raise NotImplementedError("compact_history: this ledger backend cannot compact")

    @abstractmethod
    def append_audit(self, kind: AuditKind, payload: Mapping[str, Any]) -> AuditEntry:
        """Append one entry to the audit chain."""

    @abstractmethod
    def audit_entries(self, *, after_index: int = -1, limit: int | None = None) -> list[AuditEntry]:
        """Audit entries with index greater than ``after_index``, in order."""

    def audit_entries_at(self, indexes: Collection[int]) -> dict[int, AuditEntry]:
        """The audit entries at ``indexes`` (those that exist), by index: the entries of
        many rows in one read where a backend can (here: one read per index)."""
        found: dict[int, AuditEntry] = {}
        for index in sorted(set(indexes)):
            for entry in self.audit_entries(after_index=index - 1, limit=1):
                if entry.index == index:
                    found[index] = entry
        return found

    @abstractmethod
    def follow_up_entries(self, request_id: str) -> list[AuditEntry]:
        """The request's ``follow_up`` audit entries (:mod:`.follow_ups`), oldest first: an
        indexed read, for the access object to ask whether an escalation is vouched for."""

    @abstractmethod
    def audit_tip(self) -> tuple[int, str] | None:
        """The recorded (index, hash) of the last audit entry, kept apart from the
        entries so that truncation is detectable."""

    def audit_link(self, index: int) -> tuple[list[AuditEntry], tuple[int, str] | None]:
        """The entry at ``index`` and the one after it (fewer where there are none), and the
        recorded tip read first (:meth:`audit_tip`, then :meth:`audit_entries`): what
        vouching for one row reads (its entry, intact and linked into the recorded chain).
        A backend may read both in one statement."""
        tip = self.audit_tip()  # first: entries up to it are committed
        return self.audit_entries(after_index=index - 1, limit=2), tip

    @abstractmethod
    def contents(self) -> LedgerContents:
        """Every request, resolution, grant, event and audit entry, in one consistent
        read (for verification: its cost and memory grow with the history)."""

    # -- threads --------------------------------------------------------------------

    @abstractmethod
    def post_to_thread(
        self, thread_id: str, sender: str, *, now: float, start: bool = False
    ) -> ThreadRecord:
        """Record a post by ``sender``: with ``start``, only if nobody started the thread
        yet (``sender`` becomes its owner; a thread someone else started is returned
        unchanged, the post not recorded); else as the latest post of a started thread
        (a thread nobody started gets ``sender`` as its owner). Returns the record
        after the write. Relaxed like a lease: the write survives a crashed process,
        not a power loss.

        Args:
            thread_id: the thread.
            sender: who posts (an actor id).
            now: when (epoch seconds).
            start: record it only as the thread's start.
        """

    def thread_entries(self, thread_id: str) -> list[AuditEntry]:
        """The thread's ``thread`` audit entries (who started it, who first posted to it),
        oldest first: what vouches for its :meth:`thread_record`. Default: read the whole
        chain (a SQL backend reads its index)."""
        return [
            entry
            for entry in self.audit_entries()
            if entry.kind == "thread" and entry.payload.get("thread_id") == thread_id
        ]

    @abstractmethod
    def thread_record(self, thread_id: str) -> ThreadRecord | None:
        """Who started the thread and who posted to it (:meth:`post_to_thread`), if anyone."""

    @abstractmethod
    def requests_of_thread(self, thread_id: str, *, limit: int = 100) -> list[StoredRequest]:
        """The thread's requests, pending or resolved, oldest first (an indexed read)."""

    # -- run leases ----------------------------------------------------------------

    @abstractmethod
    def acquire_lease(self, thread_id: str, holder: str, *, ttl: float, now: float) -> Lease | None:
        """Take the thread's lease if free, expired, or already ours; None if held.

        Args:
            thread_id: the thread.
            holder: who takes it.
            ttl: seconds it lives (positive).
            now: the moment (epoch seconds) its expiry is counted from.
        """

    @abstractmethod
    def renew_lease(self, thread_id: str, holder: str, *, ttl: float, now: float) -> Lease | None:
        """Extend our unexpired lease; None if we no longer hold it.

        Args:
            thread_id: the thread.
            holder: who holds it.
            ttl: seconds it lives from ``now``.
            now: the moment (epoch seconds) of the renewal.
        """

    @abstractmethod
    def release_lease(
        self,
        thread_id: str,
        holder: str,
        *,
        done: Sequence[str] = (),
        executions: Mapping[str, ExecutionChange] | None = None,
    ) -> bool:
        """Release our lease; False if we did not hold it. ``done`` names requests whose
        resume work a run on the thread just finished: marked done in the same write
        (whether or not the lease was still ours), one transaction instead of two.
        ``executions`` (request id -> change) are execution changes the run's end makes
        (its claims settled ``executed``), applied in the same write as
        :meth:`update_execution` with ``durable=False`` applies them, checks and audit
        entries included: a record that fails its check raises, and nothing is written.

        Args:
            thread_id: the thread.
            holder: who holds it.
            done: requests whose resume work is marked done in the same write.
            executions: execution changes (request id -> change) made in the same write.
        """

    @abstractmethod
    def get_lease(self, thread_id: str) -> Lease | None:
        """The thread's lease row as stored (it may have expired), if any."""

    @abstractmethod
    def list_leases(self) -> list[Lease]:
        """Every lease row as stored, expired ones included (for ``audit verify``)."""

    def check_storage(self) -> str | None:
        """The backend's own check of its storage (SQLite: ``PRAGMA quick_check``): what is
        wrong, in words that hold no stored value, or None. Default: nothing to check."""
        return None

    # -- the outbox: durable work of every kind (the runtime's, see :mod:`.outbox`) ----

    _delivery_plan: DeliveryPlan | None = None

    @property
    def delivery_plan(self) -> DeliveryPlan | None:
        """Which webhook deliveries a new request or resolution records in its own
        transaction (None: none), as given to the ledger's constructor: every process
        writing to the ledger whose writes should notify opens it with its own."""
        return self._delivery_plan

    @abstractmethod
    def get_work(self, kind: str, work_id: str) -> Work | None:
        """The outbox row of this kind and id (resume work: the request's id), if any."""

    @abstractmethod
    def list_work(
        self,
        kind: str,
        *,
        states: tuple[WorkState, ...] = OPEN_STATES,
        due_before: float | None = None,
        thread_id: str | None = None,
        request_id: str | None = None,
        limit: int | None = None,
    ) -> list[Work]:
        """Rows of this kind in these states (default: all not finished), those with
        ``next_at <= due_before`` when given, of one thread or request when given, in
        ``next_at`` order; cost O(open work) for open states.

        Args:
            kind: the kind of work (``resume``, ``delivery``, ...).
            states: the states listed (default: every open one).
            due_before: only rows with ``next_at <= due_before``.
            thread_id: only this thread's rows.
            request_id: only this request's rows.
            limit: at most this many.
        """

    @abstractmethod
    def claim_work(
        self,
        kind: str,
        holder: str,
        *,
        targets: tuple[str, ...],
        ttl: float,
        now: float,
        limit: int = 20,
    ) -> list[Work]:
        """Claim up to ``limit`` due rows of this kind for these targets, for ``holder``
        until ``now + ttl`` (a claim another worker holds is skipped): the claimed rows.
        Relaxed like a lease: a lost claim only does the work again.

        Args:
            kind: the kind of work.
            holder: the worker that claims.
            targets: the targets it serves (a delivery's subscription, ...).
            ttl: seconds the claim lives.
            now: the moment (epoch seconds).
            limit: at most this many rows.
        """

    @abstractmethod
    def update_work(
        self,
        kind: str,
        work_id: str,
        change: WorkChange,
        *,
        durable: bool = False,
        records: Sequence[Work] = (),
        audit: Mapping[str, Any] | None = None,
    ) -> Work | None:
        """Apply ``change`` (:mod:`.outbox`'s transitions) to the row atomically; the row
        after. Relaxed by default: a lost update only repeats an attempt, which the work
        makes idempotent (a resume, a delivery with the same ``webhook-id``).

        When ``change`` moves the row, ``records`` (new work: one already recorded, by
        its id, stays as it is) and ``audit`` (a ``follow_up`` audit entry's payload) are
        written in the same transaction, durably: work that causes more work (a
        follow-up's deliveries) records it once, however often it is retried.

        Args:
            kind: the kind of work.
            work_id: the row's id (a request id, a delivery id).
            change: the transition to apply (:mod:`.outbox`).
            durable: sync the write to disk (default: relaxed).
            records: new work recorded with the change.
            audit: a ``follow_up`` audit entry's payload, recorded with the change.
        """

    def delivery_cursor(self, subscription: str) -> int | None:
        """The sequence up to which ``subscription``'s deliveries were made from the
        event stream (None: its cursor has not started)."""
        raise NotImplementedError(f"{type(self).__name__} does not store webhook deliveries")

    def advance_delivery_cursor(
        self,
        subscription: str,
        *,
        start: int | None,
        to: int,
        deliveries: Sequence[Work] = (),
        now: float,
    ) -> bool:
        """Move ``subscription``'s cursor from ``start`` (None: start it) to ``to`` and
        record those of ``deliveries`` not recorded yet (one already recorded, by its id,
        stays as it is), in one transaction. False, and nothing written, when the cursor
        is no longer at ``start`` (another sender moved it first).

        Args:
            subscription: the webhook subscription.
            start: where the cursor must be now (None: not started).
            to: the sequence to move it to.
            deliveries: the deliveries to record with the move.
            now: the moment (epoch seconds).
        """
        raise NotImplementedError(f"{type(self).__name__} does not store webhook deliveries")

    # -- execution records (the runtime's, not AAIS's: see :mod:`.executions`) -------

    @abstractmethod
    def update_execution(
        self, request_id: str, change: ExecutionChange, *, durable: bool = True
    ) -> Execution | None:
        """Apply ``change`` to the request's execution record atomically; the record after.

        A change that stores a new record appends its ``execution`` audit entry
        (:func:`~.executions.execution_audit`) in the same transaction. Before the
        change sees the stored record, the record is checked against the request's
        latest ``execution`` entry: a record that is missing, edited or planted
        raises :class:`~.integrity.LedgerIntegrityError` and nothing is written.
        ``durable=False`` may skip the disk sync (the gate's claim and ``executed``
        mark): the write survives a crashed process, not a power loss."""

    @abstractmethod
    def execution_with_entry(self, request_id: str) -> tuple[Execution | None, AuditEntry | None]:
        """The request's execution record (if a gate let its approval run) and its latest
        ``execution`` audit entry, read in one snapshot (the entry by an index:
        O(log n)); either may be absent. The one read of a record: the authority vouches
        for it with the entry (:meth:`~aais_langgraph.authority.ApprovalAuthority.execution`)."""

    @abstractmethod
    def list_executions(
        self, *, states: tuple[ExecutionState, ...] = ("unknown",), thread_id: str | None = None
    ) -> list[Execution]:
        """Execution records in these states, oldest first (default: those to reconcile;
        :func:`~.executions.unknown_outcomes` adds the claims no longer live)."""

    # -- async twins: each sync method in a worker thread (a backend may override) --

    asetup = _twin(setup)
    ais_set_up = _twin(is_set_up)
    aadd_request = _twin(add_request)
    aget_request = _twin(get_request)
    alist_pending = _twin(list_pending)
    alist_pending_rows = _twin(list_pending_rows)
    acount_pending = _twin(count_pending)
    arecord_resolution = _twin(record_resolution)
    arecord_resolution_claiming = _twin(record_resolution_claiming)
    aget_resolution = _twin(get_resolution)
    alist_grants = _twin(list_grants)
    arevoke_grant = _twin(revoke_grant)
    aevents_after = _twin(events_after)
    afirst_event_sequence = _twin(first_event_sequence)
    alast_sequence = _twin(last_sequence)
    acompact_events = _twin(compact_events)
    acompact_history = _twin(compact_history)
    aappend_audit = _twin(append_audit)
    aaudit_entries = _twin(audit_entries)
    aaudit_entries_at = _twin(audit_entries_at)
    aaudit_tip = _twin(audit_tip)
    aaudit_link = _twin(audit_link)
    afollow_up_entries = _twin(follow_up_entries)
    acontents = _twin(contents)
    apost_to_thread = _twin(post_to_thread)
    athread_record = _twin(thread_record)
    athread_entries = _twin(thread_entries)
    arequests_of_thread = _twin(requests_of_thread)
    aacquire_lease = _twin(acquire_lease)
    arenew_lease = _twin(renew_lease)
    arelease_lease = _twin(release_lease)
    aget_lease = _twin(get_lease)
    alist_leases = _twin(list_leases)
    acheck_storage = _twin(check_storage)
    aget_work = _twin(get_work)
    alist_work = _twin(list_work)
    aclaim_work = _twin(claim_work)
    aupdate_work = _twin(update_work)
    adelivery_cursor = _twin(delivery_cursor)
    aadvance_delivery_cursor = _twin(advance_delivery_cursor)
    aupdate_execution = _twin(update_execution)
    aexecution_with_entry = _twin(execution_with_entry)
    alist_executions = _twin(list_executions)

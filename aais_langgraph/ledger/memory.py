"""An in-process ledger: the whole contract behind one lock, for tests and single-process use.

State lives in dicts and lists and is lost when the process exits. Values go in
and come out as detached copies, so callers cannot change stored state by
mutating what they passed or received.
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import replace
from fnmatch import fnmatchcase
from typing import Any, Protocol, TypeVar

from ._records import (
    check_ttl,
    compacted_audit,
    draft_write,
    grant_matches,
    next_audit_entry,
    plain,
    request_fields,
    requested_audit,
    resolution_audits,
    revoked_audit,
    thread_audit,
    with_sequence,
)
from .base import Ledger
from .deliveries import DeliveryPlan
from .executions import Execution, ExecutionChange, ExecutionState, execution_audit
from .integrity import LedgerIntegrityError, execution_vouched, grant_seal, sealed_checkpoint
from .outbox import (
    OPEN_STATES,
    RESUME,
    Work,
    WorkChange,
    WorkState,
    claimed,
    coalesces,
    settled_change,
)
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
from .resume_work import new_resume_work
from .retention import (
    CompactedRequestError,
    CompactionReport,
    RetentionPolicy,
    keeps_all,
    plan_compaction,
    vouched_tombstones,
)
from .selection import ActionPattern, PendingSelection, RowFacts

_INDEXES = ("session", "kind", "requester", "context")
"""What pending requests are indexed by: session, action kind, requester (the selection's:
the request's requester extension, else its context's) and the context's ``requester``
(which the bounds count)."""


class InMemoryLedger(Ledger):
    """A thread-safe ledger held in memory; every method runs under one lock."""

    def __init__(self, *, delivery_plan: DeliveryPlan | None = None) -> None:
        """``delivery_plan``: the webhook deliveries its writes record (None: none)."""
        self._delivery_plan = delivery_plan
        self._lock = threading.Lock()
        self._requests: dict[str, StoredRequest] = {}
        self._thread_requests: dict[str | None, dict[str, None]] = {}
        """Thread id -> the ids of its requests (the other backends' index on the thread)."""
        # Insertion order is sequence order: sequences are allocated under the lock.
        self._pending: dict[str, None] = {}
        self._pending_facts: dict[str, RowFacts] = {}
        self._pending_sequences: dict[str, int] = {}
        self._pending_by: dict[str, dict[str, dict[str, None]]] = {i: {} for i in _INDEXES}
        self._pending_rows: dict[str, PendingRow] = {}
        self._resolutions: dict[str, StoredResolution] = {}
        self._grants: dict[str, Grant] = {}
        self._event_sequences: list[int] = []
        self._events: list[JsonDict] = []
        self._last_sequence = 0
        self._audit: list[AuditEntry] = []
        self._leases: dict[str, Lease] = {}
        self._executions: dict[str, Execution] = {}
        self._executions_in: dict[ExecutionState, dict[str, None]] = {}
        """State -> the request ids whose execution record is in it (the other backends'
        index on the state): a listing of claims still held reads those, not every record."""
        self._execution_entries: dict[str, AuditEntry] = {}
        self._thread_owners: dict[str, str] = {}
        self._thread_posts: dict[str, dict[str, float]] = {}
        self._work: dict[tuple[str, str], Work] = {}
        self._work_in: dict[WorkState, dict[tuple[str, str], None]] = {}
        """State -> the keys of the work in it (the other backends' index on open work):
        listings and claims read the rows in the states they ask for, not every row."""
        self._compacted: set[str] = set()
        self._vouched_tombstones: frozenset[str] | None = None
        self._delivery_cursors: dict[str, int] = {}

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
        with self._lock:
            existing = self._requests.get(fields.request_id)
            if existing is not None:
                return _copy_request(existing), False
            if fields.request_id in self._compacted:
                raise CompactedRequestError()
            if self._vouched_tombstones is None:
                self._vouched_tombstones = vouched_tombstones(
                    self._audit, self._compacted, key=self.authority_key
                )
            if fields.request_id in self._vouched_tombstones:
                raise CompactedRequestError()
            sequence = self._last_sequence + 1
            stored_envelope = {**draft, "sequence": sequence}
            entry = next_audit_entry(
                self._tip(),
                "requested",
                requested_audit(stored_envelope, thread_id, stored_context, checked=True),
                key=self.authority_key,
            )
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
            self._requests[fields.request_id] = stored
            self._thread_requests.setdefault(thread_id, {})[fields.request_id] = None
            self._pending[fields.request_id] = None
            self._index_pending(stored, sequence)
            self._append_event(sequence, stored_envelope)
            self._audit.append(entry)
            self._record_deliveries("approval.requested", stored)
            return _copy_request(stored), True

    def get_request(self, request_id: str) -> StoredRequest | None:
        with self._lock:
            stored = self._requests.get(request_id)
            return None if stored is None else _copy_request(stored)

    def list_pending(
        self,
        *,
        thread_id: str | None = None,
        session_id: str | None = None,
        expires_before: float | None = None,
        limit: int | None = None,
    ) -> list[StoredRequest]:
        found: list[StoredRequest] = []
        if limit is not None and limit <= 0:
            return found
        with self._lock:
            for request_id in self._pending:
                stored = self._requests[request_id]
                if thread_id is not None and stored.thread_id != thread_id:
                    continue
                if session_id is not None and stored.session_id != session_id:
                    continue
                if expires_before is not None and (
                    stored.expires_at is None or stored.expires_at > expires_before
                ):
                    continue
                found.append(_copy_request(stored))
                if limit is not None and len(found) >= limit:
                    break
        return found

    # -- resolutions ---------------------------------------------------------------

    def record_resolution(self, write: ResolutionWrite) -> tuple[StoredResolution, bool]:
        with self._lock:
            return self._record_resolution(write)

    def record_resolution_claiming(
        self, write: ResolutionWrite, claim: ExecutionChange
    ) -> tuple[StoredResolution, bool, Execution | None]:
        with self._lock:  # one "transaction": no reader sees the approval without its claim
            recorded, created = self._record_resolution(write)
            if not created or recorded.envelope["resolution"]["outcome"] != "approved":
                return recorded, created, None
            return recorded, created, self._update_execution(write.request_id, claim)

    def _record_resolution(self, write: ResolutionWrite) -> tuple[StoredResolution, bool]:
        """:meth:`record_resolution` under the lock."""
        draft = draft_write(write)
        grant = draft.grant
        request = self._requests.get(write.request_id)
        if request is None:
            raise KeyError(write.request_id)
        existing = self._resolutions.get(write.request_id)
        if existing is not None:
            return _copy_resolution(existing), False
        if grant is not None and grant.grant_id in self._grants:
            raise ValueError("grant: a grant with this id is already recorded")

        sequence = self._last_sequence
        decided = None
        if draft.decided is not None:
            sequence += 1
            decided = {**draft.decided, "sequence": sequence}
        sequence += 1
        resolved = {**draft.resolved, "sequence": sequence}
        entries: list[AuditEntry] = []
        tip = self._tip()
        for kind, payload in resolution_audits(
            decided, resolved, write.decision_fingerprint, grant
        ):
            entry = next_audit_entry(tip, kind, payload, key=self.authority_key)
            entries.append(entry)
            tip = (entry.index, entry.entry_hash)
        indexes = {entry.kind: entry.index for entry in entries}

        resolution = StoredResolution(
            write.request_id,
            resolved,
            write.decision_fingerprint,
            audit_index=indexes["resolved"],
            mac=write.mac,
        )
        if decided is not None:
            self._append_event(decided["sequence"], decided)
        self._append_event(sequence, resolved)
        self._requests[write.request_id] = replace(request, status="resolved")
        del self._pending[write.request_id]
        self._unindex_pending(request)
        self._resolutions[write.request_id] = resolution
        if grant is not None:
            self._grants[grant.grant_id] = replace(grant, audit_index=indexes["granted"])
        if request.thread_id is not None and not write.in_run:
            now = time.time()
            self._record_work(new_resume_work(write.request_id, request.thread_id, now), now)
        self._audit.extend(entries)
        self._record_deliveries("approval.resolved", request)
        return _copy_resolution(resolution), True

    def get_resolution(self, request_id: str) -> StoredResolution | None:
        with self._lock:
            resolution = self._resolutions.get(request_id)
            return None if resolution is None else _copy_resolution(resolution)

    # -- grants --------------------------------------------------------------------

    def count_pending(
        self, *, session_id: str | None = None, requester: str | None = None, limit: int
    ) -> int:
        if (session_id is None) == (requester is None):
            raise ValueError("count_pending: give exactly one of session_id and requester")
        index, value = ("session", session_id) if session_id is not None else ("context", requester)
        with self._lock:
            return max(0, min(limit, len(self._pending_by[index].get(value or "", ()))))

    def list_pending_rows(
        self, *, session_id: str | None = None, selection: PendingSelection | None = None
    ) -> list[PendingRow]:
        with self._lock:
            if selection is not None and not selection.unbounded:
                ids: Any = self._selected(selection)
            elif session_id is not None:
                ids = self._pending_by["session"].get(session_id, {})
            else:
                ids = self._pending
            rows = []
            for request_id in ids:
                row = self._pending_rows.get(request_id)
                if row is None:
                    # A pending row never changes, so its text is made once.
                    row = PendingRow.of(self._requests[request_id])
                    self._pending_rows[request_id] = row
                if session_id is None or row.session_id == session_id:
                    rows.append(row)
            return rows

    def _selected(self, selection: PendingSelection) -> list[str]:
        """The pending ids ``selection`` admits, in sequence order (under the lock)."""
        sources: list[list[str]] = []
        found: set[str] = set()  # the ids of every source but the last (what to skip)
        if selection.requester is not None:
            sources.append(list(self._pending_by["requester"].get(selection.requester, ())))
        for pattern in selection.actions:
            if sources:
                found.update(sources[-1])
            sources.append(self._matching(pattern, found))
        nonempty = [source for source in sources if source]
        if len(nonempty) == 1:
            return nonempty[0]  # one index's ids: in sequence order already
        if sources:
            found.update(sources[-1])
        return sorted(found, key=self._pending_sequences.__getitem__)

    def _matching(self, pattern: ActionPattern, found: set[str]) -> list[str]:
        if pattern.kinds:
            by_kind = self._pending_by["kind"]
            kinds = [kind for kind in by_kind if any(fnmatchcase(kind, k) for k in pattern.kinds)]
            if len(kinds) == 1:
                candidates: list[str] = list(by_kind[kinds[0]])
            else:  # several kinds' ids, merged back into sequence order
                ids = [i for kind in kinds for i in by_kind[kind]]
                candidates = sorted(ids, key=self._pending_sequences.__getitem__)
            if not pattern.names and not pattern.risks:
                return candidates
        else:
            candidates = list(self._pending)
        matches = []
        for request_id in candidates:
            if request_id in found:
                continue
            facts = self._pending_facts[request_id]
            if pattern.matches(facts.kind, facts.name, facts.risk):
                matches.append(request_id)
        return matches

    def _index_keys(self, stored: StoredRequest, facts: RowFacts) -> list[tuple[str, str]]:
        keys = [("session", stored.session_id), ("kind", facts.kind)]
        if facts.requester is not None:
            keys.append(("requester", facts.requester))
        requester = stored.context.get("requester")
        if isinstance(requester, str):
            keys.append(("context", requester))
        return keys

    def _index_pending(self, stored: StoredRequest, sequence: int) -> None:
        facts = RowFacts.of(stored.envelope, stored.context)
        self._pending_facts[stored.request_id] = facts
        self._pending_sequences[stored.request_id] = sequence
        for index, value in self._index_keys(stored, facts):
            self._pending_by[index].setdefault(value, {})[stored.request_id] = None

    def _unindex_pending(self, stored: StoredRequest) -> None:
        facts = self._pending_facts.pop(stored.request_id)
        del self._pending_sequences[stored.request_id]
        self._pending_rows.pop(stored.request_id, None)
        for index, value in self._index_keys(stored, facts):
            ids = self._pending_by[index][value]
            del ids[stored.request_id]
            if not ids:
                del self._pending_by[index][value]

    def list_grants(
        self,
        *,
        session_id: str | None = None,
        action_name: str | None = None,
        include_revoked: bool = False,
    ) -> list[Grant]:
        with self._lock:
            return [
                _copy_grant(grant)
                for grant in self._grants.values()
                if grant_matches(grant, session_id, action_name, include_revoked)
            ]

    def revoke_grant(
        self, grant_id: str, *, now: float, actor: Mapping[str, Any] | None = None
    ) -> bool:
        with self._lock:
            grant = self._grants.get(grant_id)
            if grant is None or grant.revoked_at is not None:
                return False
            entry = next_audit_entry(
                self._tip(), "revoked", revoked_audit(grant, now, actor), key=self.authority_key
            )
            revoked = replace(grant, revoked_at=now)
            key = self.authority_key
            self._grants[grant_id] = (
                revoked if key is None else replace(revoked, mac=grant_seal(key, revoked))
            )
            self._audit.append(entry)
            return True

    # -- events and audit ----------------------------------------------------------

    def events_after(self, sequence: int, *, limit: int = 1000) -> list[JsonDict]:
        with self._lock:
            start = bisect_right(self._event_sequences, sequence)
            return [_detached(event) for event in self._events[start : start + max(limit, 0)]]

    def first_event_sequence(self) -> int | None:
        with self._lock:
            return self._event_sequences[0] if self._event_sequences else None

    def last_sequence(self) -> int:
        with self._lock:
            return self._last_sequence

    def compact_events(self, before_sequence: int, *, key: bytes | None = None) -> int:
        key = self._sealing_key(key)
        with self._lock:
            cut = bisect_left(self._event_sequences, before_sequence)
            del self._event_sequences[:cut]
            del self._events[:cut]
            if cut:
                floor = min(before_sequence, self._last_sequence + 1)  # never past the events
                payload = sealed_checkpoint(key, compacted_audit(floor, cut))
                self._audit.append(
                    next_audit_entry(self._tip(), "compacted", payload, key=self.authority_key)
                )
            return cut

    def compact_history(
        self, policy: RetentionPolicy, *, now: float, key: bytes | None = None
    ) -> CompactionReport:
        key = self._sealing_key(key)
        with self._lock:
            if keeps_all(policy, len(self._resolutions)):
                return CompactionReport()
            open_work = [w.request_id for w in self._work.values() if w.state in OPEN_STATES]
            plan = plan_compaction(self._contents(), open_work, policy, now=now)
            if plan is None:
                return CompactionReport()
            for request_id in plan.removed:
                removed = self._requests.pop(request_id, None)
                if removed is not None:
                    self._thread_requests[removed.thread_id].pop(request_id, None)
                self._resolutions.pop(request_id, None)
                self._store_execution(request_id, None)
                self._execution_entries.pop(request_id, None)
            for slot, work in list(self._work.items()):
                # Work still to do (or to retry by hand) stays.
                if work.request_id in plan.removed and work.state not in OPEN_STATES:
                    self._store_work(slot, None)
            for grant_id in plan.removed_grants:
                del self._grants[grant_id]
            self._compacted.update(plan.removed)
            self._vouched_tombstones = plan.tombstones
            cut = bisect_left(self._event_sequences, plan.before_sequence)
            del self._event_sequences[:cut]
            del self._events[:cut]
            for old in plan.carried:
                entry = next_audit_entry(self._tip(), old.kind, old.payload, key=self.authority_key)
                self._audit.append(entry)
                self._revouch(entry)
            checkpoint = next_audit_entry(
                self._tip(), "compacted", plan.checkpoint(key), key=self.authority_key
            )
            self._audit.append(checkpoint)
            self._audit = [entry for entry in self._audit if entry.index >= plan.cut]
            return plan.report(checkpoint)

    def _revouch(self, entry: AuditEntry) -> None:
        """Point the row a carried ``entry`` vouches for at it (under the lock)."""
        key = str(entry.payload.get("request_id"))
        if entry.kind == "requested":
            self._requests[key] = replace(self._requests[key], audit_index=entry.index)
            self._pending_rows.pop(key, None)
        elif entry.kind == "resolved":
            self._resolutions[key] = replace(self._resolutions[key], audit_index=entry.index)
        elif entry.kind == "granted":
            grant_id = str(entry.payload.get("grant_id"))
            self._grants[grant_id] = replace(self._grants[grant_id], audit_index=entry.index)
        elif entry.kind == "execution":
            self._execution_entries[key] = entry

    def contents(self) -> LedgerContents:
        with self._lock:
            return self._contents()

    def _contents(self) -> LedgerContents:
        """Every row and entry (the caller holds the lock)."""
        return LedgerContents(
            requests=sorted(
                map(_copy_request, self._requests.values()),
                key=lambda stored: int(stored.envelope["sequence"]),
            ),
            resolutions=[
                _copy_resolution(self._resolutions[key]) for key in sorted(self._resolutions)
            ],
            grants=[_copy_grant(grant) for grant in self._grants.values()],
            events=list(zip(self._event_sequences, _detached(self._events), strict=True)),
            audit=[_copy_entry(entry) for entry in self._audit],
            audit_tip=self._tip(),
            last_sequence=self._last_sequence,
            executions=[self._executions[key] for key in sorted(self._executions)],
            tombstones=frozenset(self._compacted),
            threads=dict(self._thread_owners),
            thread_posters={
                thread_id: frozenset(posts) for thread_id, posts in self._thread_posts.items()
            },
        )

    def append_audit(self, kind: AuditKind, payload: Mapping[str, Any]) -> AuditEntry:
        with self._lock:
            entry = next_audit_entry(self._tip(), kind, payload, key=self.authority_key)
            self._audit.append(entry)
            return _copy_entry(entry)

    def audit_entries(self, *, after_index: int = -1, limit: int | None = None) -> list[AuditEntry]:
        with self._lock:
            first = self._audit[0].index if self._audit else 0  # retention removes a prefix
            start = max(after_index + 1 - first, 0)
            stop = None if limit is None else start + max(limit, 0)
            return [_copy_entry(entry) for entry in self._audit[start:stop]]

    def audit_tip(self) -> tuple[int, str] | None:
        with self._lock:
            return self._tip()

    def follow_up_entries(self, request_id: str) -> list[AuditEntry]:
        with self._lock:
            return [
                _copy_entry(entry)
                for entry in self._audit
                if entry.kind == "follow_up" and entry.payload.get("request_id") == request_id
            ]

    # -- run leases ----------------------------------------------------------------

    def acquire_lease(self, thread_id: str, holder: str, *, ttl: float, now: float) -> Lease | None:
        check_ttl(ttl)
        with self._lock:
            current = self._leases.get(thread_id)
            if current is not None and current.holder != holder and current.expires_at > now:
                return None
            lease = Lease(thread_id, holder, now + ttl)
            self._leases[thread_id] = lease
            return lease

    def renew_lease(self, thread_id: str, holder: str, *, ttl: float, now: float) -> Lease | None:
        check_ttl(ttl)
        with self._lock:
            current = self._leases.get(thread_id)
            if current is None or current.holder != holder or current.expires_at <= now:
                return None
            lease = Lease(thread_id, holder, now + ttl)
            self._leases[thread_id] = lease
            return lease

    def release_lease(
        self,
        thread_id: str,
        holder: str,
        *,
        done: Sequence[str] = (),
        executions: Mapping[str, ExecutionChange] | None = None,
    ) -> bool:
        for request_id, change in (executions or {}).items():
            self.update_execution(request_id, change, durable=False)
        with self._lock:
            settle = settled_change("done", time.time())
            for request_id in done:
                self._change_work(RESUME, request_id, settle)
            current = self._leases.get(thread_id)
            if current is None or current.holder != holder:
                return False
            del self._leases[thread_id]
            return True

    def get_lease(self, thread_id: str) -> Lease | None:
        with self._lock:
            return self._leases.get(thread_id)

    def post_to_thread(
        self, thread_id: str, sender: str, *, now: float, start: bool = False
    ) -> ThreadRecord:
        with self._lock:
            owner = self._thread_owners.get(thread_id)
            if owner is not None and start and owner != sender:
                return self._thread_record(thread_id, owner)
            audits = []
            if owner is None:
                owner = self._thread_owners[thread_id] = sender
                audits.append(thread_audit(thread_id, owner=owner))
            posts = self._thread_posts.setdefault(thread_id, {})
            if posts.pop(sender, None) is None:
                audits.append(thread_audit(thread_id, poster=sender))
            posts[sender] = now  # the latest post last
            for payload in audits:
                entry = next_audit_entry(self._tip(), "thread", payload, key=self.authority_key)
                self._audit.append(entry)
            return self._thread_record(thread_id, owner)

    def thread_record(self, thread_id: str) -> ThreadRecord | None:
        with self._lock:
            owner = self._thread_owners.get(thread_id)
            return None if owner is None else self._thread_record(thread_id, owner)

    def _thread_record(self, thread_id: str, owner: str) -> ThreadRecord:
        posters = tuple(reversed(list(self._thread_posts.get(thread_id, {}))))
        return ThreadRecord(thread_id, owner, posters[:THREAD_POSTERS])

    def requests_of_thread(self, thread_id: str, *, limit: int = 100) -> list[StoredRequest]:
        with self._lock:
            found = [self._requests[rid] for rid in self._thread_requests.get(thread_id, ())]
            found.sort(key=lambda stored: int(stored.envelope["sequence"]))
            return [_copy_request(stored) for stored in found[: max(limit, 0)]]

    def list_leases(self) -> list[Lease]:
        with self._lock:
            return sorted(self._leases.values(), key=lambda lease: lease.thread_id)

    # -- the outbox ---------------------------------------------------------------

    def _record_work(self, work: Work, now: float) -> None:
        """Record new work (under the lock): a row already recorded stays as it is; one
        it coalesces is replaced."""
        if work.coalesce_key is not None:
            for key, earlier in self._works_in(("due", "claimed")):
                if coalesces(earlier, work, now):
                    self._store_work(key, replace(earlier, state="coalesced", updated_at=now))
        self._add_work(work)

    def _add_work(self, work: Work) -> None:
        """Store new work unless a row with its key is stored already (under the lock)."""
        key = (work.kind, work.work_id)
        if key not in self._work:
            self._store_work(key, work)

    def _store_work(self, key: tuple[str, str], work: Work | None) -> None:
        """Store ``work`` under ``key`` (None: forget the row; under the lock)."""
        _store_by_state(self._work, self._work_in, key, work)

    def _works_in(self, states: Sequence[WorkState]) -> list[tuple[tuple[str, str], Work]]:
        """The stored work in ``states`` with its keys (under the lock)."""
        return _in_states(self._work, self._work_in, states)

    def _record_deliveries(self, notice: Any, request: StoredRequest) -> None:
        """The deliveries the plan asks for with this write (under the lock)."""
        if self.delivery_plan is None:
            return
        now = time.time()
        for delivery in self.delivery_plan.deliveries(notice, request, now):
            self._record_work(delivery, now)

    def get_work(self, kind: str, work_id: str) -> Work | None:
        with self._lock:
            return self._work.get((kind, work_id))

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
        with self._lock:
            found = [
                work
                for _, work in self._works_in(states)
                if work.kind == kind
                and (due_before is None or work.next_at <= due_before)
                and thread_id in (None, work.thread_id)
                and request_id in (None, work.request_id)
            ]
        found.sort(key=lambda work: (work.next_at, work.work_id))
        return found if limit is None else found[: max(limit, 0)]

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
        check_ttl(ttl)
        with self._lock:
            due = sorted(
                (
                    work
                    for _, work in self._works_in(("due", "claimed"))
                    if work.kind == kind and work.due(now) and work.target in targets
                ),
                key=lambda work: (work.next_at, work.work_id),
            )[: max(limit, 0)]
            taken = [claimed(work, holder, now + ttl) for work in due]
            for work in taken:
                self._store_work((kind, work.work_id), work)
            return taken

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
        with self._lock:
            current = self._work.get((kind, work_id))
            updated = change(current)
            if updated is None or updated == current:
                return updated
            entry = (
                None
                if audit is None
                else next_audit_entry(self._tip(), "follow_up", audit, key=self.authority_key)
            )
            self._store_work((kind, work_id), updated)
            for work in records:
                self._record_work(work, updated.updated_at)
            if entry is not None:
                self._audit.append(entry)
            return updated

    def _change_work(self, kind: str, work_id: str, change: WorkChange) -> Work | None:
        """Apply ``change`` to one row (the caller holds the lock)."""
        updated = change(self._work.get((kind, work_id)))
        if updated is not None:
            self._store_work((kind, work_id), updated)
        return updated

    def delivery_cursor(self, subscription: str) -> int | None:
        with self._lock:
            return self._delivery_cursors.get(subscription)

    def advance_delivery_cursor(
        self,
        subscription: str,
        *,
        start: int | None,
        to: int,
        deliveries: Sequence[Work] = (),
        now: float,
    ) -> bool:
        with self._lock:
            if self._delivery_cursors.get(subscription) != start:
                return False
            self._delivery_cursors[subscription] = to
            for delivery in deliveries:
                self._add_work(delivery)
            return True

    # -- execution records ---------------------------------------------------------

    def update_execution(
        self, request_id: str, change: ExecutionChange, *, durable: bool = True
    ) -> Execution | None:
        with self._lock:
            return self._update_execution(request_id, change)

    def _update_execution(self, request_id: str, change: ExecutionChange) -> Execution | None:
        """:meth:`update_execution` under the lock."""
        current = self._executions.get(request_id)
        problem = execution_vouched(current, self._execution_entries.get(request_id))
        if problem is not None:
            raise LedgerIntegrityError("aais_executions", request_id, problem)
        updated = change(current)
        if updated is not None and updated != current:
            entry = next_audit_entry(
                self._tip(), "execution", execution_audit(updated), key=self.authority_key
            )
            self._audit.append(entry)
            self._execution_entries[request_id] = entry
            self._store_execution(request_id, updated)
        return updated

    def _store_execution(self, request_id: str, record: Execution | None) -> None:
        """Store ``record`` as the execution record of ``request_id`` (None: forget it;
        under the lock)."""
        _store_by_state(self._executions, self._executions_in, request_id, record)

    def execution_with_entry(self, request_id: str) -> tuple[Execution | None, AuditEntry | None]:
        with self._lock:
            entry = self._execution_entries.get(request_id)
            return self._executions.get(request_id), None if entry is None else _copy_entry(entry)

    def list_executions(
        self, *, states: tuple[ExecutionState, ...] = ("unknown",), thread_id: str | None = None
    ) -> list[Execution]:
        with self._lock:
            found = [
                record
                for _, record in _in_states(self._executions, self._executions_in, states)
                if thread_id in (None, record.thread_id)
            ]
        return sorted(found, key=lambda record: (record.started_at, record.request_id))

    # -- internals -----------------------------------------------------------------

    def _tip(self) -> tuple[int, str] | None:
        if not self._audit:
            return None
        last = self._audit[-1]
        return last.index, last.entry_hash

    def _append_event(self, sequence: int, envelope: JsonDict) -> None:
        self._event_sequences.append(sequence)
        self._events.append(envelope)
        self._last_sequence = sequence


class _Stated(Protocol):
    @property
    def state(self) -> str: ...


_K = TypeVar("_K")
_R = TypeVar("_R", bound=_Stated)


def _store_by_state(
    rows: dict[_K, _R], index: dict[Any, dict[_K, None]], key: _K, row: _R | None
) -> None:
    """Store ``row`` under ``key`` in ``rows`` (None: forget the row there), keeping
    ``index`` (state -> the keys of the rows in it) in step."""
    current = rows.get(key)
    if current is not None:
        index[current.state].pop(key, None)
    if row is None:
        rows.pop(key, None)
        return
    rows[key] = row
    index.setdefault(row.state, {})[key] = None


def _in_states(
    rows: dict[_K, _R], index: dict[Any, dict[_K, None]], states: Sequence[str]
) -> list[tuple[_K, _R]]:
    """The rows of ``rows`` in ``states`` with their keys, read through ``index``: a
    list, so the caller may store rows while it goes through them."""
    return [(key, rows[key]) for state in dict.fromkeys(states) for key in index.get(state, ())]


def _copy_request(stored: StoredRequest) -> StoredRequest:
    return replace(stored, envelope=_detached(stored.envelope), context=_detached(stored.context))


def _copy_resolution(resolution: StoredResolution) -> StoredResolution:
    return replace(resolution, envelope=_detached(resolution.envelope))


def _copy_grant(grant: Grant) -> Grant:
    return replace(grant, constraints=_detached(grant.constraints))


def _copy_entry(entry: AuditEntry) -> AuditEntry:
    return replace(entry, payload=_detached(entry.payload))


def _detached(value: Any) -> Any:
    """A copy of stored JSON data that callers may change freely (dicts and lists are
    new; strings, numbers, booleans and null are immutable and shared). Several
    times faster than ``copy.deepcopy``, which the data's plain shape does not need."""
    kind = type(value)
    if kind is dict:
        return {key: _detached(child) for key, child in value.items()}
    if kind is list:
        return [_detached(child) for child in value]
    return value

"""An in-process ledger: the whole contract behind one lock, for tests and single-process use.

State lives in dicts and lists and is lost when the process exits. Values go in
and come out as detached copies, so callers cannot change stored state by
mutating what they passed or received.
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_left, bisect_right
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

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
from .executions import Execution, ExecutionChange, ExecutionState, execution_audit
from .integrity import LedgerIntegrityError, execution_vouched
from .resume_work import ResumeWork, ResumeWorkChange, ResumeWorkState, new_resume_work


class InMemoryLedger(Ledger):
    """A thread-safe ledger held in memory; every method runs under one lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: dict[str, StoredRequest] = {}
        # Insertion order is sequence order: sequences are allocated under the lock.
        self._pending: dict[str, None] = {}
        self._resolutions: dict[str, StoredResolution] = {}
        self._grants: dict[str, Grant] = {}
        self._event_sequences: list[int] = []
        self._events: list[JsonDict] = []
        self._last_sequence = 0
        self._audit: list[AuditEntry] = []
        self._leases: dict[str, Lease] = {}
        self._executions: dict[str, Execution] = {}
        self._execution_entries: dict[str, AuditEntry] = {}
        self._thread_owners: dict[str, str] = {}
        self._resume_work: dict[str, ResumeWork] = {}

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
            sequence = self._last_sequence + 1
            stored_envelope = {**draft, "sequence": sequence}
            entry = next_audit_entry(
                self._tip(),
                "requested",
                requested_audit(stored_envelope, thread_id, stored_context),
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
            self._pending[fields.request_id] = None
            self._append_event(sequence, stored_envelope)
            self._audit.append(entry)
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
        """Pending requests in sequence order; ``expires_before`` keeps those with
        ``expires_at <= expires_before`` (expired at that moment)."""
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
        draft = draft_write(write)
        grant = draft.grant
        with self._lock:
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
                entry = next_audit_entry(tip, kind, payload)
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
            self._resolutions[write.request_id] = resolution
            if grant is not None:
                self._grants[grant.grant_id] = replace(grant, audit_index=indexes["granted"])
            if request.thread_id is not None and not write.in_run:
                self._resume_work[write.request_id] = new_resume_work(
                    write.request_id, request.thread_id, time.time()
                )
            self._audit.extend(entries)
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
        with self._lock:
            wanted = session_id if session_id is not None else requester
            found = 0
            for request_id in self._pending:
                if found >= limit:
                    break
                stored = self._requests[request_id]
                if session_id is not None:
                    found += stored.session_id == wanted
                else:
                    found += stored.context.get("requester") == wanted
            return found

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
            entry = next_audit_entry(self._tip(), "revoked", revoked_audit(grant, now, actor))
            self._grants[grant_id] = replace(grant, revoked_at=now)
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

    def compact_events(self, before_sequence: int) -> int:
        with self._lock:
            cut = bisect_left(self._event_sequences, before_sequence)
            del self._event_sequences[:cut]
            del self._events[:cut]
            if cut:
                payload = compacted_audit(before_sequence, cut)
                self._audit.append(next_audit_entry(self._tip(), "compacted", payload))
            return cut

    def contents(self) -> LedgerContents:
        with self._lock:
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
            )

    def append_audit(self, kind: AuditKind, payload: Mapping[str, Any]) -> AuditEntry:
        with self._lock:
            entry = next_audit_entry(self._tip(), kind, payload)
            self._audit.append(entry)
            return _copy_entry(entry)

    def audit_entries(self, *, after_index: int = -1, limit: int | None = None) -> list[AuditEntry]:
        with self._lock:
            start = max(after_index + 1, 0)
            stop = None if limit is None else start + max(limit, 0)
            return [_copy_entry(entry) for entry in self._audit[start:stop]]

    def audit_tip(self) -> tuple[int, str] | None:
        with self._lock:
            return self._tip()

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

    def release_lease(self, thread_id: str, holder: str) -> bool:
        with self._lock:
            current = self._leases.get(thread_id)
            if current is None or current.holder != holder:
                return False
            del self._leases[thread_id]
            return True

    def get_lease(self, thread_id: str) -> Lease | None:
        with self._lock:
            return self._leases.get(thread_id)

    def own_thread(self, thread_id: str, owner: str, *, now: float) -> str:
        with self._lock:
            return self._thread_owners.setdefault(thread_id, owner)

    def thread_owner(self, thread_id: str) -> str | None:
        with self._lock:
            return self._thread_owners.get(thread_id)

    def requests_of_thread(self, thread_id: str, *, limit: int = 100) -> list[StoredRequest]:
        with self._lock:
            found = [
                _copy_request(stored)
                for stored in self._requests.values()
                if stored.thread_id == thread_id
            ]
        found.sort(key=lambda stored: int(stored.envelope["sequence"]))
        return found[: max(limit, 0)]

    def list_leases(self) -> list[Lease]:
        with self._lock:
            return sorted(self._leases.values(), key=lambda lease: lease.thread_id)

    # -- durable resume work -------------------------------------------------------

    def get_resume_work(self, request_id: str) -> ResumeWork | None:
        with self._lock:
            return self._resume_work.get(request_id)

    def list_resume_work(
        self,
        *,
        states: tuple[ResumeWorkState, ...] = ("due", "unknown"),
        due_before: float | None = None,
        thread_id: str | None = None,
        limit: int | None = None,
    ) -> list[ResumeWork]:
        with self._lock:
            found = [
                work
                for work in self._resume_work.values()
                if work.state in states
                and (due_before is None or work.next_at <= due_before)
                and thread_id in (None, work.thread_id)
            ]
        found.sort(key=lambda work: (work.next_at, work.request_id))
        return found if limit is None else found[: max(limit, 0)]

    def update_resume_work(
        self, request_id: str, change: ResumeWorkChange, *, durable: bool = False
    ) -> ResumeWork | None:
        with self._lock:
            updated = change(self._resume_work.get(request_id))
            if updated is not None:
                self._resume_work[request_id] = updated
            return updated

    # -- execution records ---------------------------------------------------------

    def update_execution(
        self, request_id: str, change: ExecutionChange, *, durable: bool = True
    ) -> Execution | None:
        with self._lock:
            current = self._executions.get(request_id)
            problem = execution_vouched(current, self._execution_entries.get(request_id))
            if problem is not None:
                raise LedgerIntegrityError("aais_executions", request_id, problem)
            updated = change(current)
            if updated is not None and updated != current:
                entry = next_audit_entry(self._tip(), "execution", execution_audit(updated))
                self._audit.append(entry)
                self._execution_entries[request_id] = entry
                self._executions[request_id] = updated
            return updated

    def execution_with_entry(self, request_id: str) -> tuple[Execution | None, AuditEntry | None]:
        with self._lock:
            entry = self._execution_entries.get(request_id)
            return self._executions.get(request_id), None if entry is None else _copy_entry(entry)

    def get_execution(self, request_id: str) -> Execution | None:
        with self._lock:
            return self._executions.get(request_id)

    def list_executions(
        self, *, states: tuple[ExecutionState, ...] = ("unknown",), thread_id: str | None = None
    ) -> list[Execution]:
        with self._lock:
            found = [
                record
                for record in self._executions.values()
                if record.state in states and thread_id in (None, record.thread_id)
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

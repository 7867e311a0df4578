"""Stored rows read back only when their audit entry (and, with a key, their seal) vouches for them.

This is the authority's one integrity component: it seals the rows the authority
writes (with a key), reads rows back only when they are vouched for, and runs the
full ``audit verify``.

Every reader of a stored request, resolution or grant in the authority goes
through :class:`VouchedRecords`, so the gate, grants and recovery never act on a
row someone changed or inserted behind the ledger's back: they get a
:class:`~aais_langgraph.ledger.LedgerIntegrityError` instead.

A row is checked once per process against the one entry it names (two indexed
reads: the recorded tip, then the entry and its successor, whose link it must
keep), then cached. With an authority key the entry must also carry its audit seal,
and a chain that does not start at entry 0 must start where a sealed ``compacted``
checkpoint on it says (one more indexed read: the first entry; the checkpoint is
found once per compaction), so a forged compaction that hides a revocation or an
execution record is refused at the first row read after it, as ``audit verify``
refuses it. An escalation counts only through :meth:`VouchedRecords.escalation`: its
entry vouched for the same way, and due by the policy's rule.

Recorded rows never change, so a cache hit returns the content that was verified,
whatever the row holds now. The rows this process wrote or vouched for are also
remembered by their id (:meth:`VouchedRecords.known_request`,
:meth:`VouchedRecords.known_resolution`), so a caller that needs no fresh read
(the request's content and a recorded resolution never change) skips it; a miss
reads the store as before, which is where a row another process wrote is found.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..ledger import (
    AuditEntry,
    AuditVerification,
    Grant,
    Ledger,
    LedgerContents,
    LedgerIntegrityError,
    PendingRow,
    StoredRequest,
    StoredResolution,
    ThreadRecord,
    chain_hash,
    verify_contents,
)
from ..ledger.executions import Execution, ExecutionChange
from ..ledger.follow_ups import EscalationRule, escalation_entry, escalation_problem
from ..ledger.integrity import (
    checkpoint_problem,
    entry_seal_problem,
    execution_seal,
    execution_vouched,
    grant_seal,
    grant_vouched,
    request_seal,
    request_vouched,
    resolution_seal,
    resolution_vouched,
    seal_problem,
    sealed,
    thread_vouched,
)
from ..ledger.records import THREAD_POSTERS
from ..protocol import AAISValidationError, ApprovalRequested, ApprovalResolved, Request
from .cache import LruCache

__all__ = ["VouchedRecords"]


class VouchedRecords:
    """Verified, validated stored rows of one ledger, cached by their identity."""

    def __init__(self, ledger: Ledger, key: bytes | None, size: int = 4096) -> None:
        self._ledger = ledger
        self._key = key
        self._requests: LruCache[tuple[Any, ...], tuple[StoredRequest, ApprovalRequested]] = (
            LruCache(size)
        )
        self._resolutions: LruCache[tuple[Any, ...], ApprovalResolved] = LruCache(size)
        self._grants: LruCache[tuple[Any, ...], Grant] = LruCache(size)
        # By id: the rows this process wrote or vouched for (a request's status as then).
        self._known_requests: LruCache[str, tuple[StoredRequest, ApprovalRequested]] = LruCache(
            size
        )
        self._known_resolutions: LruCache[str, ApprovalResolved] = LruCache(size)
        # By owner and set of posters: the order of the posters (who posted last) is not
        # vouched for, so a new order needs no new check.
        self._threads: LruCache[tuple[str, str, frozenset[str]], ThreadRecord] = LruCache(size)
        # The chain's start and the sealed checkpoint that vouches for it, as last verified.
        self._start: tuple[int, str, int, str] | None = None
        self._contradicted: str | None = None

    # -- a history a witness contradicts ---------------------------------------------

    def refuse_history(self, reason: str) -> None:
        """Refuse every row from now on (a witness contradicts the ledger's history: rows
        may have been rewritten in ways no seal shows). ``reason``: words, no value."""
        self._contradicted = reason

    def _trusted(self, table: str, row_id: str) -> None:
        if self._contradicted is not None:
            raise LedgerIntegrityError(table, row_id, self._contradicted)

    # -- sealing what the authority writes -----------------------------------------

    def request_seal(
        self, envelope: Mapping[str, Any], thread_id: str | None, context: Mapping[str, Any] | None
    ) -> str | None:
        """The seal a new request row carries (None without a key)."""
        if self._key is None:
            return None
        return request_seal(self._key, envelope, thread_id, dict(context or {}))

    def resolution_seal(
        self, request_id: str, envelope: Mapping[str, Any], decision_fingerprint: str | None
    ) -> str | None:
        """The seal a new resolution row carries (None without a key)."""
        if self._key is None:
            return None
        return resolution_seal(self._key, request_id, envelope, decision_fingerprint)

    def sealed_grant(self, grant: Grant) -> Grant:
        """``grant`` carrying its seal (unchanged without a key)."""
        return grant if self._key is None else replace(grant, mac=grant_seal(self._key, grant))

    # -- the whole ledger ----------------------------------------------------------

    def verify_all(
        self,
        *,
        expected_tip: tuple[int, str] | None = None,
        escalation_rule: Callable[[Request], EscalationRule | None] | None = None,
    ) -> AuditVerification:
        """``audit verify``: the backend's own storage check, the chain, every row against
        its entry, every seal (audit entries' included), every escalation against the
        policy's rule (``escalation_rule``: due, sealed), and leases and claims that would
        block a thread for an implausibly long time."""
        problem = self._ledger.check_storage()
        if problem is not None:
            return AuditVerification(False, 0, reason=problem, table="(storage)")
        try:
            contents = self._ledger.contents()
        except LedgerIntegrityError as error:  # a row that cannot even be read
            return AuditVerification(
                False, 0, reason=error.reason, table=error.table, row_id=error.row_id
            )
        verified = verify_contents(contents, expected_tip=expected_tip, key=self._key)
        if not verified.ok:
            return verified
        if escalation_rule is not None:
            found = _escalation_failure(contents, escalation_rule, self._key, verified)
            if found is not None:
                return found
        return _implausible_holds(self._ledger, verified) or verified

    # -- requests ------------------------------------------------------------------

    def request(
        self,
        stored: StoredRequest,
        read: _AuditRead | None = None,
        texts: tuple[str, str] | None = None,
    ) -> tuple[StoredRequest, ApprovalRequested]:
        """The verified row (with its current status) and its validated envelope
        (``read``: the audit entries read already for a batch of rows; ``texts``: the
        row's envelope and context text as stored, which ``stored`` was parsed from)."""
        self._trusted("aais_requests", stored.request_id)
        identity = _identity(stored.request_id, stored.audit_index, stored.envelope)
        cached = self._requests.get(identity)
        if cached is not None:
            found = replace(cached[0], status=stored.status), cached[1]
            self._known_requests.put(stored.request_id, found)
            return found
        table = "aais_requests"
        # A batch vouched for the chain's start once (see requests()).
        entry = self._entry(table, stored.request_id, stored.audit_index, read, start=read is None)
        problem = request_vouched(stored, entry, texts)
        self._raise_if(table, stored.request_id, problem, stored.mac, stored)
        model = ApprovalRequested.from_data(stored.envelope)
        self._requests.put(identity, (stored, model))
        self._known_requests.put(stored.request_id, (stored, model))
        return stored, model

    def requests(
        self, stored: Sequence[StoredRequest | PendingRow]
    ) -> list[ApprovalRequested | Exception]:
        """For each row, its validated envelope if vouched for, or the error that says why
        not: as :meth:`request` row by row, with every row's audit entry (and the entry after it)
        read in one go after the recorded tip. A :class:`~aais_langgraph.ledger.PendingRow`
        is parsed when its turn comes (its stored text is what ``texts`` is to
        :meth:`request`), so a batch never holds every row's parsed JSON at once."""
        indexes = {row.audit_index for row in stored if type(row.audit_index) is int}
        read: _AuditRead | None = None
        if indexes:
            tip = self._ledger.audit_tip()  # first: entries up to it are committed
            try:
                at = self._ledger.audit_entries_at(indexes | {index + 1 for index in indexes})
            except LedgerIntegrityError:
                at = None  # an unreadable entry: each row reads its own, and is told why
            read = None if at is None else _AuditRead(tip, at)
        if read is not None:
            try:
                self._start_vouched("aais_requests", "")
            except LedgerIntegrityError as error:
                return [error for _ in stored]
        found: list[ApprovalRequested | Exception] = []
        for row in stored:
            try:
                if isinstance(row, PendingRow):
                    texts = (row.envelope_text, row.context_text)
                    found.append(self.request(row.parsed(), read, texts)[1])
                else:
                    found.append(self.request(row, read)[1])
            except (LedgerIntegrityError, AAISValidationError, ValueError, TypeError) as error:
                found.append(error)
        return found

    def trust_request(self, stored: StoredRequest, model: ApprovalRequested) -> ApprovalRequested:
        """Cache a row this authority has just written (nothing to check)."""
        self._requests.put(
            _identity(stored.request_id, stored.audit_index, stored.envelope), (stored, model)
        )
        self._known_requests.put(stored.request_id, (stored, model))
        return model

    def known_request(self, request_id: str) -> tuple[StoredRequest, ApprovalRequested] | None:
        """The row of ``request_id`` this process last wrote or vouched for (its status as
        it was then), or None: nothing is read, so a row only another process wrote is
        not found here."""
        self._trusted("aais_requests", request_id)
        return self._known_requests.get(request_id)

    # -- resolutions ---------------------------------------------------------------

    def resolution(self, stored: StoredResolution) -> ApprovalResolved:
        """The validated envelope of a verified resolution row."""
        self._trusted("aais_resolutions", stored.request_id)
        identity = _identity(stored.request_id, stored.audit_index, stored.envelope)
        cached = self._resolutions.get(identity)
        if cached is None:
            table = "aais_resolutions"
            entry = self._entry(table, stored.request_id, stored.audit_index)
            self._raise_if(
                table, stored.request_id, resolution_vouched(stored, entry), stored.mac, stored
            )
            cached = self._resolutions.put(identity, ApprovalResolved.from_data(stored.envelope))
        return self._known_resolutions.put(stored.request_id, cached)

    def trust_resolution(
        self, stored: StoredResolution, model: ApprovalResolved
    ) -> ApprovalResolved:
        """Cache a resolution this authority has just recorded (nothing to check)."""
        self._resolutions.put(
            _identity(stored.request_id, stored.audit_index, stored.envelope), model
        )
        return self._known_resolutions.put(stored.request_id, model)

    def known_resolution(self, request_id: str) -> ApprovalResolved | None:
        """The resolution of ``request_id`` this process recorded or vouched for, or None:
        nothing is read, so one another process recorded is not found here (a recorded
        resolution never changes, so a hit is the one stored)."""
        self._trusted("aais_resolutions", request_id)
        return self._known_resolutions.get(request_id)

    # -- grants --------------------------------------------------------------------

    def grant(self, grant: Grant) -> Grant:
        """The verified grant, with its current ``revoked_at``.

        Revocation is the one change a grant row sees, and it seals the row anew (with a
        key): a grant un-revoked behind the ledger's back does not verify. Without a key
        that is a rollback only ``audit verify`` (and a kept tip or a witness) detects.
        """
        self._trusted("aais_grants", grant.grant_id)
        identity = (grant.grant_id, grant.audit_index, grant.revoked_at, grant.mac)
        cached = self._grants.get(identity)
        if cached is None:
            table = "aais_grants"
            entry = self._entry(table, grant.grant_id, grant.audit_index)
            self._raise_if(table, grant.grant_id, grant_vouched(grant, entry), grant.mac, grant)
            cached = self._grants.put(identity, grant)
        return cached

    # -- execution records -----------------------------------------------------------

    def execution(self, request_id: str) -> Execution | None:
        """The request's execution record, vouched for by its latest ``execution`` entry
        (intact, on the recorded chain) and its seal: what the gate may act on. A record
        that was deleted, edited or planted raises
        :class:`~aais_langgraph.ledger.LedgerIntegrityError`. Not cached: it changes."""
        table = "aais_executions"
        self._trusted(table, request_id)
        record, entry = self._ledger.execution_with_entry(request_id)
        self._start_vouched(table, request_id)  # a hidden record leaves no entry to check
        problem = execution_vouched(record, entry)
        if problem is None and entry is not None:
            self._entry(table, request_id, entry.index)
        if record is not None:
            self._raise_if(table, request_id, problem, record.mac, record)
        elif problem is not None:
            raise LedgerIntegrityError(table, request_id, problem)
        return record

    # -- threads ---------------------------------------------------------------------

    def thread(self, thread_id: str, record: ThreadRecord | None) -> ThreadRecord | None:
        """``record`` (the thread's row as read, None: no row) once its ``thread`` audit
        entries vouch for it: one names its owner, one each poster listed, each intact, on
        the recorded chain and sealed with a key; a thread the entries record but whose
        row is gone raises too (else whoever posts next would own it). Cached per owner
        and set of posters: a new poster is checked once."""
        table = "aais_threads"
        self._trusted(table, thread_id)
        identity = None if record is None else (thread_id, record.owner, frozenset(record.posters))
        if identity is not None and self._threads.get(identity) is not None:
            return record
        entries = self._ledger.thread_entries(thread_id)
        problem = thread_vouched(
            thread_id,
            None if record is None else record.owner,
            () if record is None else record.posters,
            entries,
            complete=record is None or len(record.posters) < THREAD_POSTERS,
        )
        if problem is not None:
            raise LedgerIntegrityError(table, thread_id, problem)
        for entry in entries:
            self._entry(table, thread_id, entry.index)
        if identity is not None and record is not None:
            self._threads.put(identity, record)
        return record

    def trust_thread(self, record: ThreadRecord) -> ThreadRecord:
        """Cache a thread record this process has just written (nothing to check)."""
        identity = (record.thread_id, record.owner, frozenset(record.posters))
        return self._threads.put(identity, record)

    # -- escalations -----------------------------------------------------------------

    def escalation(
        self,
        request_id: str,
        created_at: str,
        rule: EscalationRule,
        *,
        now: float | None = None,
    ) -> bool:
        """Whether the request's escalation counts: its row ``done`` and its ``follow_up``
        entry vouched for (intact, on the recorded chain, sealed with a key, the chain's
        start vouched) and due by ``rule`` (the policy's). An entry that is there but not
        vouched for counts for nothing (and is counted as an integrity error); not
        cached: it may run at any moment.

        Args:
            request_id: the escalated request.
            created_at: the request's ``created_at`` (the rule's delay counts from it).
            rule: the policy's escalation rule for the request.
            now: the authority's clock, epoch seconds (an entry dated later has not run).
        """
        entry = escalation_entry(self._ledger, request_id)
        if entry is None:
            return False
        table = "aais_audit"
        try:
            self._entry(table, request_id, entry.index)
            problem = escalation_problem(entry, created_at, rule, self._key, now=now)
            if problem is not None:
                raise LedgerIntegrityError(table, str(entry.index), problem)
        except LedgerIntegrityError:
            return False  # counted where it was raised; the escalation grants nothing
        return True

    def sealed_change(self, change: ExecutionChange, request_id: str = "") -> ExecutionChange:
        """``change`` that refuses a stored record whose seal does not verify and seals
        the record it stores (``change`` itself without a key). The ledger has already
        checked the stored record against its audit entry when this runs; with a key the
        chain's start is vouched for first (here, before any claim is taken), so a
        forged compaction that hid the record cannot make room for a second run."""
        self._trusted("aais_executions", request_id)
        key = self._key
        if key is None:
            return change
        self._start_vouched("aais_executions", request_id)

        def sealed(current: Execution | None) -> Execution | None:
            if current is not None:
                problem = seal_problem(execution_seal(key, current), current.mac)
                if problem is not None:
                    raise LedgerIntegrityError("aais_executions", current.request_id, problem)
            updated = change(current)
            if updated is None or updated == current:
                return updated
            return replace(updated, mac=execution_seal(key, updated))

        return sealed

    # -- internals -----------------------------------------------------------------

    def _raise_if(
        self, table: str, row_id: str, reason: str | None, mac: str | None, row: Any
    ) -> None:
        if reason is None:
            try:
                reason = seal_problem(sealed(self._key, table, row), mac)
            except AAISValidationError:
                reason = "it cannot be sealed (not I-JSON)"
        if reason is not None:
            raise LedgerIntegrityError(table, row_id, reason)

    def _entry(
        self,
        table: str,
        row_id: str,
        index: int | None,
        read: _AuditRead | None = None,
        *,
        start: bool = True,
    ) -> AuditEntry:
        """The row's audit entry, intact and still linked into the recorded chain (from
        ``read`` when given: the tip and the entries read for a batch of rows)."""
        self._trusted(table, row_id)
        if index is None:
            raise LedgerIntegrityError(table, row_id, "no audit entry vouches for it")
        if read is not None:
            tip = read.tip
            found = [e for e in (read.at.get(index), read.at.get(index + 1)) if e is not None]
        else:
            found, tip = self._ledger.audit_link(index)
        if not found or found[0].index != index:
            raise LedgerIntegrityError(table, row_id, f"its audit entry {index} is missing")
        entry = found[0]
        try:
            intact = entry.entry_hash == chain_hash(
                entry.index, entry.kind, entry.occurred_at, entry.payload, entry.prev_hash
            )
        except AAISValidationError:
            intact = False
        if not intact:
            raise LedgerIntegrityError(
                table, row_id, f"its audit entry {index} does not match its hash"
            )
        linked = (
            found[1].prev_hash == entry.entry_hash
            if len(found) > 1
            else tip == (index, entry.entry_hash)
        )
        if not linked:
            raise LedgerIntegrityError(
                table, row_id, f"its audit entry {index} is not on the recorded chain"
            )
        sealed = entry_seal_problem(self._key, entry)
        if sealed is not None:
            raise LedgerIntegrityError(table, row_id, f"its audit entry {index}: {sealed}")
        if start:
            self._start_vouched(table, row_id)
        return entry

    def _start_vouched(self, table: str, row_id: str) -> None:
        """With a key: the chain starts at entry 0, or right after the range a sealed
        ``compacted`` checkpoint on the chain names (else a forged compaction could have
        dropped any entry); raises :class:`~aais_langgraph.ledger.LedgerIntegrityError`."""
        if self._key is None:
            return
        first = self._ledger.audit_entries(limit=1)
        if not first or first[0].index == 0:
            return
        start = first[0]
        known = self._start
        if known is not None and known[:2] == (start.index, start.prev_hash):
            again = self._ledger.audit_entries_at({known[2]}).get(known[2])
            if again is not None and again.entry_hash == known[3]:
                return
        checkpoint = self._checkpoint_of(start)
        if checkpoint is None:
            raise LedgerIntegrityError(
                table,
                row_id,
                "the audit chain starts after entry 0, but no compaction checkpoint vouches "
                "for the entries before it",
            )
        problem = checkpoint_problem(self._key, checkpoint)
        if problem is not None:
            raise LedgerIntegrityError(
                "aais_audit", str(checkpoint.index), f"the compaction checkpoint: {problem}"
            )
        self._entry("aais_audit", str(checkpoint.index), checkpoint.index, start=False)
        self._start = (start.index, start.prev_hash, checkpoint.index, checkpoint.entry_hash)

    def _checkpoint_of(self, start: AuditEntry) -> AuditEntry | None:
        """The ``compacted`` entry that names the range right before ``start`` (it follows
        the entries its pass carried, near the chain's start)."""
        after = start.index - 1
        while True:
            page = self._ledger.audit_entries(after_index=after, limit=_CHECKPOINT_PAGE)
            for entry in page:
                if (
                    entry.kind == "compacted"
                    and entry.payload.get("audit_through") == start.index - 1
                    and entry.payload.get("audit_through_hash") == start.prev_hash
                ):
                    return entry
            if len(page) < _CHECKPOINT_PAGE:
                return None
            after = page[-1].index


_CHECKPOINT_PAGE = 500
"""Entries read at a time while looking for the checkpoint that vouches for the chain's start."""


@dataclass(frozen=True)
class _AuditRead:
    """The recorded tip, then the audit entries at some indexes (read after it)."""

    tip: tuple[int, str] | None
    at: Mapping[int, AuditEntry]


def _identity(row_id: str, audit_index: int | None, envelope: dict[str, Any]) -> tuple[Any, ...]:
    return (row_id, audit_index, envelope.get("id"), envelope.get("sequence"))


def _escalation_failure(
    contents: LedgerContents,
    rule_of: Callable[[Request], EscalationRule | None],
    key: bytes | None,
    verified: AuditVerification,
) -> AuditVerification | None:
    """A failed verification naming the first escalation entry the policy's rule does not
    vouch for (not due when it ran, unsealed with a key), or None. An entry of a request
    no rule escalates (or one retention removed) is not judged here."""
    requests = {stored.request_id: stored for stored in contents.requests}
    for entry in contents.audit:
        if entry.kind != "follow_up" or entry.payload.get("follow_up") != "escalation":
            continue
        stored = requests.get(str(entry.payload.get("request_id")))
        if stored is None:
            continue
        try:
            request = ApprovalRequested.from_data(stored.envelope).request
        except (AAISValidationError, ValueError, TypeError):
            continue  # the request row's own check reports it
        rule = rule_of(request)
        if rule is None:
            continue
        problem = escalation_problem(entry, request.created_at, rule, key)
        if problem is not None:
            return AuditVerification(
                False,
                verified.checked,
                entry.index,
                f"the escalation of a request: {problem}",
                table="aais_audit",
                row_id=str(entry.index),
                tip=verified.tip,
            )
    return None


IMPLAUSIBLE_HOLD = 24 * 3600.0
"""A lease or execution claim that lives longer than this from now blocks its thread for
longer than any run holds one (leases renew every third of a minute-long TTL)."""


def _implausible_holds(ledger: Ledger, verified: AuditVerification) -> AuditVerification | None:
    """A failed verification naming the first lease or claim that expires implausibly far
    in the future (a planted row would block its thread, listed nowhere), or None."""
    limit = time.time() + IMPLAUSIBLE_HOLD
    for lease in ledger.list_leases():
        if lease.expires_at > limit:
            return AuditVerification(
                False,
                verified.checked,
                reason="the lease expires implausibly far in the future",
                table="aais_leases",
                row_id=lease.thread_id,
                tip=verified.tip,
            )
    for record in ledger.list_executions(states=("executing",)):
        if record.live_until > limit:
            return AuditVerification(
                False,
                verified.checked,
                reason="the execution claim lives implausibly far into the future",
                table="aais_executions",
                row_id=record.request_id,
                tip=verified.tip,
            )
    return None

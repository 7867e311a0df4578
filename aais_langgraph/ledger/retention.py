"""Bounded history: which resolved requests a retention policy removes, and what must stay.

A :class:`RetentionPolicy` keeps resolved requests (with their events, grants,
execution records and resume work) for ``keep_days`` days after they resolved, or
the ``keep_last`` most recently resolved ones, or both (a request either rule keeps
stays). :func:`plan_compaction` turns a policy and one consistent read of the ledger
into a :class:`CompactionPlan`: a backend applies it in one transaction
(:meth:`Ledger.compact_history <aais_langgraph.ledger.Ledger.compact_history>`).

What is never removed, whatever the policy says: pending requests, requests whose
resume work is open or whose webhook deliveries are still to be sent (pending, or dead
and waiting for a retry by hand), requests whose execution is not final (``executing``
or ``unknown``), and requests whose grant is still live. Delivered deliveries of a
removed request go with it. When their audit entries lie in
the removed prefix of the chain they are *carried*: appended again, unchanged, at the
tip, so every row left is still vouched for by exactly one entry. The prefix itself is
replaced by a ``compacted`` checkpoint (:mod:`.compaction`) that records its range and
the hash of its last entry, so ``audit verify`` still verifies the chain that is left.

Every removed request id is kept as a tombstone (``aais_compacted_requests``): a
request with that id can never be stored again, so an old decision replayed against a
re-created request finds nothing to approve (:class:`CompactedRequestError`). The
checkpoint records the count and digest of all tombstones, so ``audit verify`` detects
a deleted one, and a backend checks its tombstones against the newest checkpoint the
first time it stores a request in a process, then refuses the ids it verified even if
their rows go later (:func:`vouched_tombstones`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from aais_langgraph.protocol import AAISValidationError, parse_timestamp

from .audit import chain_hash
from .compaction import (
    carried_digest,
    history_audit,
    newest_tombstones_checkpoint,
    tombstones_digest,
    tombstones_problem,
)
from .integrity import LedgerIntegrityError, checkpoint_problem, sealed_checkpoint
from .records import AuditEntry, JsonDict, LedgerContents

__all__ = [
    "CompactedRequestError",
    "CompactionPlan",
    "CompactionReport",
    "RetentionPolicy",
    "keeps_all",
    "plan_compaction",
    "vouched_tombstones",
]

_FINAL_EXECUTIONS = frozenset({"executed", "done", "retry"})
_ROW_KINDS = frozenset(
    {"requested", "resolved", "granted", "revoked", "execution", "follow_up", "thread"}
)
_SEQUENCED = frozenset({"requested", "decided", "resolved"})
_DAY = 86400.0


class CompactedRequestError(LookupError):
    """The request id belongs to a request retention removed: it is never stored again."""

    def __init__(self) -> None:
        super().__init__("request_id: this request was resolved and compacted; it cannot be reused")


@dataclass(frozen=True)
class RetentionPolicy:
    """Keep resolved requests for ``keep_days`` days after they resolved and/or the
    ``keep_last`` most recently resolved; at least one must be given."""

    keep_days: float | None = None
    keep_last: int | None = None

    def __post_init__(self) -> None:
        if self.keep_days is None and self.keep_last is None:
            raise ValueError("keep_days, keep_last: give at least one")
        if self.keep_days is not None and not (
            math.isfinite(self.keep_days) and self.keep_days >= 0
        ):
            raise ValueError("keep_days: must be a finite number of days, 0 or more")
        if self.keep_last is not None and (
            isinstance(self.keep_last, bool)
            or not isinstance(self.keep_last, int)
            or self.keep_last < 0
        ):
            raise ValueError("keep_last: must be a whole number, 0 or more")


def keeps_all(policy: RetentionPolicy, resolved: int) -> bool:
    """Whether ``policy`` keeps every one of ``resolved`` requests whatever their age (a
    pass can then stop before reading the history)."""
    if policy.keep_days is not None or policy.keep_last is None:
        return False
    return resolved <= policy.keep_last


@dataclass(frozen=True)
class CompactionReport:
    """What one retention pass removed (all zero when it had nothing to do)."""

    requests_removed: int = 0
    entries_removed: int = 0
    events_removed: int = 0
    carried: int = 0
    compacted_through: int | None = None
    """The last audit index now covered by a checkpoint (None: nothing removed)."""
    checkpoint: tuple[int, str] | None = None
    """The checkpoint entry's ``(index, hash)``, to publish to witnesses."""
    chained_from: str | None = None
    """The hash of entry ``compacted_through``, which the chain left links to."""

    def to_json(self) -> JsonDict:
        """A JSON-ready dict of the report."""
        return {
            "requests_removed": self.requests_removed,
            "entries_removed": self.entries_removed,
            "events_removed": self.events_removed,
            "carried": self.carried,
            "compacted_through": self.compacted_through,
        }


@dataclass(frozen=True)
class CompactionPlan:
    """What a backend removes and re-appends, in one transaction.

    ``cut``: audit entries with a smaller index go; ``before_sequence``: events with a
    smaller sequence go; ``removed``: request ids whose rows go (and become
    tombstones); ``carried``: the entries of kept rows that lie below ``cut``, in chain
    order, appended again before the ``checkpoint`` payload; ``tombstones``: every
    tombstone once the plan is applied.
    """

    cut: int
    before_sequence: int
    removed: frozenset[str]
    removed_grants: frozenset[str]
    carried: tuple[AuditEntry, ...]
    entries_removed: int
    events_removed: int
    audit_from: int
    audit_through_hash: str
    tombstones: frozenset[str] = frozenset()

    def checkpoint(self, key: bytes | None = None) -> JsonDict:
        """The ``compacted`` entry's payload, sealed with ``key`` when one is given."""
        payload = history_audit(
            before_sequence=self.before_sequence,
            removed_events=self.events_removed,
            audit_from=self.audit_from,
            audit_through=self.cut - 1,
            audit_through_hash=self.audit_through_hash,
            requests_removed=len(self.removed),
            carried=len(self.carried),
            carried_digest=carried_digest(self.carried),
            tombstones=len(self.tombstones),
            tombstones_digest=tombstones_digest(self.tombstones),
        )
        return sealed_checkpoint(key, payload)

    def report(self, checkpoint: AuditEntry) -> CompactionReport:
        """The report of this plan once applied, with its ``checkpoint`` entry."""
        return CompactionReport(
            requests_removed=len(self.removed),
            entries_removed=self.entries_removed,
            events_removed=self.events_removed,
            carried=len(self.carried),
            compacted_through=self.cut - 1,
            checkpoint=(checkpoint.index, checkpoint.entry_hash),
            chained_from=self.audit_through_hash,
        )


def _request_of(entry: AuditEntry) -> str | None:
    value = entry.payload.get("request_id")
    return value if isinstance(value, str) else None


def _sequence(entry: AuditEntry) -> int | None:
    value = entry.payload.get("sequence")
    if entry.kind in _SEQUENCED and isinstance(value, int) and not isinstance(value, bool):
        return value
    return None


def _resolved_at(envelope: Mapping[str, object]) -> float:
    resolution = envelope.get("resolution")
    text = resolution.get("resolved_at") if isinstance(resolution, Mapping) else None
    if not isinstance(text, str):
        return math.inf  # unreadable: never old enough to remove
    try:
        return parse_timestamp(text, "/resolution/resolved_at").timestamp()
    except ValueError:
        return math.inf


def _kept_by_policy(contents: LedgerContents, policy: RetentionPolicy, now: float) -> set[str]:
    ordered = sorted(
        contents.resolutions, key=lambda r: int(r.envelope.get("sequence") or 0), reverse=True
    )
    kept: set[str] = set()
    if policy.keep_last is not None:
        kept.update(r.request_id for r in ordered[: policy.keep_last])
    if policy.keep_days is not None:
        horizon = now - policy.keep_days * _DAY
        kept.update(r.request_id for r in ordered if _resolved_at(r.envelope) >= horizon)
    return kept


def _needed(contents: LedgerContents, open_work: Iterable[str], now: float) -> set[str]:
    """Requests that must stay whatever the policy says."""
    needed = {stored.request_id for stored in contents.requests if stored.status == "pending"}
    needed.update(open_work)
    needed.update(
        record.request_id for record in contents.executions if record.state not in _FINAL_EXECUTIONS
    )
    needed.update(
        grant.request_id
        for grant in contents.grants
        if grant.revoked_at is None and (grant.expires_at is None or grant.expires_at > now)
    )
    return needed


def plan_compaction(
    contents: LedgerContents,
    open_work: Iterable[str],
    policy: RetentionPolicy,
    *,
    now: float,
) -> CompactionPlan | None:
    """The plan that removes what ``policy`` lets go, or None when nothing can go.

    ``open_work``: ids of requests with durable work still open (resume work not done,
    webhook deliveries pending or dead: their sender reads the request). The cut is the
    highest audit index such that every request kept by the policy lies wholly at or
    above it and every request removed lies wholly below it; a request that straddles
    it is kept for a later pass (the cut moves down to it). Tombstones that the newest
    checkpoint does not vouch for raise
    :class:`~aais_langgraph.ledger.LedgerIntegrityError`: a new checkpoint must not
    vouch for a set someone changed.

    Args:
        contents: everything the ledger holds.
        open_work: ids of requests with durable work still open.
        policy: what may go.
        now: the moment (epoch seconds) ages are counted to.
    """
    audit = contents.audit
    if not audit:
        return None
    vouching = newest_tombstones_checkpoint(audit)
    problem = tombstones_problem(vouching, contents.tombstones)
    if problem is not None and vouching is not None:
        raise LedgerIntegrityError("aais_compacted_requests", str(vouching.index), problem)
    spans: dict[str, tuple[int, int]] = {}
    for entry in audit:
        request_id = _request_of(entry)
        if request_id is not None:
            low, high = spans.get(request_id, (entry.index, entry.index))
            spans[request_id] = (min(low, entry.index), max(high, entry.index))
    resolved = {r.request_id for r in contents.resolutions}
    needed = _needed(contents, open_work, now)
    windowed = _kept_by_policy(contents, policy, now) - needed
    keep = windowed | needed
    first, tip = audit[0].index, audit[-1].index
    # Requests the policy keeps stay where they are; needed ones are carried if need be.
    cut = min((spans[r][0] for r in windowed if r in spans), default=tip + 1)
    expendable = sorted(
        (spans[r] for r in resolved if r not in keep and r in spans), key=lambda s: -s[1]
    )
    moved = True
    while moved:  # a straddling request moves the cut down to its first entry
        moved = False
        for low, high in expendable:
            if low < cut <= high:
                cut, moved = low, True
    removed = frozenset(
        r for r in resolved if r not in keep and (r not in spans or spans[r][1] < cut)
    )
    if cut <= first:
        return None
    by_index = {entry.index: entry for entry in audit}
    carried = _carried(contents, audit, cut, removed)
    vouched_by = {
        sequence: entry.index for entry in audit if (sequence := _sequence(entry)) is not None
    }
    stored = [sequence for sequence, _ in contents.events]
    floor = min(
        (s for s in stored if vouched_by.get(s, -1) >= cut), default=contents.last_sequence + 1
    )
    return CompactionPlan(
        cut=cut,
        before_sequence=floor,
        removed=removed,
        removed_grants=frozenset(g.grant_id for g in contents.grants if g.request_id in removed),
        carried=carried,
        entries_removed=cut - first,
        events_removed=sum(1 for s in stored if s < floor),
        audit_from=first,
        audit_through_hash=by_index[cut - 1].entry_hash,
        tombstones=contents.tombstones | removed,
    )


def _carried(
    contents: LedgerContents, audit: list[AuditEntry], cut: int, removed: frozenset[str]
) -> tuple[AuditEntry, ...]:
    """The entries below ``cut`` that vouch for a row that stays: its request, resolution,
    grant (and revocation) entries, the latest entry of its execution record, and the
    entry of its escalation (:func:`~.follow_ups.escalated`)."""
    latest_execution: dict[str, int] = {}
    for entry in audit:
        if entry.kind == "execution" and (request_id := _request_of(entry)) is not None:
            latest_execution[request_id] = entry.index
    kept_grants = {g.grant_id for g in contents.grants if g.request_id not in removed}
    rows = {stored.request_id for stored in contents.requests if stored.request_id not in removed}
    carried: list[AuditEntry] = []
    for entry in audit:
        if entry.index >= cut:
            break
        if entry.kind not in _ROW_KINDS:
            continue
        if entry.kind == "thread":
            carried.append(entry)  # threads stay: their entries vouch for them
            continue
        request_id = _request_of(entry)
        if entry.kind in ("granted", "revoked"):
            if entry.payload.get("grant_id") in kept_grants:
                carried.append(entry)
        elif request_id not in rows:
            continue
        elif entry.kind == "execution":
            if latest_execution.get(request_id) == entry.index:
                carried.append(entry)
        elif entry.kind == "follow_up":
            if entry.payload.get("follow_up") == "escalation":
                carried.append(entry)  # it vouches for the escalation the access asks
        elif entry.kind == "requested" or _sequence(entry) is not None:
            carried.append(entry)  # a recorded resolution (standing ones have no row)
    return tuple(carried)


def vouched_tombstones(
    checkpoints: Iterable[AuditEntry], tombstones: Iterable[str], *, key: bytes | None = None
) -> frozenset[str]:
    """The stored ``tombstones``, once the newest of ``checkpoints`` (``compacted``
    entries) that records tombstones vouches for them (it must match its hash, and carry
    its seals under ``key`` with one); raises
    :class:`~aais_langgraph.ledger.LedgerIntegrityError` when it does not."""
    newest = newest_tombstones_checkpoint(checkpoints)
    ids = frozenset(tombstones)
    if newest is None:
        return ids
    table = "aais_compacted_requests"
    try:
        intact = newest.entry_hash == chain_hash(
            newest.index, newest.kind, newest.occurred_at, newest.payload, newest.prev_hash
        )
    except AAISValidationError:
        intact = False
    if not intact:
        raise LedgerIntegrityError(
            table, str(newest.index), "the compaction checkpoint does not match its hash"
        )
    problem = checkpoint_problem(key, newest) or tombstones_problem(newest, ids)
    if problem is not None:
        raise LedgerIntegrityError(table, str(newest.index), problem)
    return ids

"""``audit verify``: the chain, then every stored row against the audit entry that vouches for it.

The chain alone proves only that the audit log is intact; the rows the gate acts
on live in other tables. So every request, resolution, grant, event and execution
row is recomputed into the payload its audit entry must hold, every audited row
must still exist, and (with an authority key) every row's seal must verify. An
execution record must also belong to an approved request. With a key every audit entry
must carry its seal (:func:`~.integrity.audit_seal`). A ``compacted`` checkpoint
must carry a valid seal (with a key), the entries appended right before it must be the
ones it says it carried, and the newest one must name exactly the stored tombstones.
The first mismatch is reported by table and id; reasons never contain row values.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from aais_langgraph.protocol import AAISValidationError, sha256_digest

from .audit import AuditVerification, verify_audit
from .compaction import carried_digest, tombstones_problem
from .integrity import (
    checkpoint_seal,
    entry_seal_problem,
    execution_vouched,
    grant_vouched,
    request_vouched,
    resolution_vouched,
    seal_problem,
    sealed,
    thread_vouched,
)
from .records import AuditEntry, LedgerContents

__all__ = ["verify_contents"]

Problem = tuple[str, str, str]
"""``(table, row_id, reason)``."""


class _Vouchers:
    """The audit entries that vouch for rows, by the id of the row they name."""

    def __init__(self, audit: list[AuditEntry]) -> None:
        self.requested: dict[str, list[AuditEntry]] = {}
        self.resolved: dict[str, list[AuditEntry]] = {}
        self.granted: dict[str, list[AuditEntry]] = {}
        self.revoked: dict[str, list[AuditEntry]] = {}
        self.events: dict[int, str] = {}
        self.executions: dict[str, AuditEntry] = {}
        self.compacted_before: int | None = None
        for entry in audit:
            payload = entry.payload
            if entry.kind == "execution":  # each request's latest one vouches for its row
                self.executions[str(payload.get("request_id"))] = entry
            sequence = payload.get("sequence")
            # Rejections and standing resolutions have no row (and no sequence).
            recorded = isinstance(sequence, int) and not isinstance(sequence, bool)
            if entry.kind == "requested":
                self.requested.setdefault(str(payload.get("request_id")), []).append(entry)
            elif entry.kind == "resolved" and recorded:
                self.resolved.setdefault(str(payload.get("request_id")), []).append(entry)
            elif entry.kind == "granted":
                self.granted.setdefault(str(payload.get("grant_id")), []).append(entry)
            elif entry.kind == "revoked":
                self.revoked.setdefault(str(payload.get("grant_id")), []).append(entry)
            if entry.kind == "compacted" and isinstance(payload.get("before_sequence"), int):
                before = int(payload["before_sequence"])
                self.compacted_before = max(self.compacted_before or 0, before)
            if entry.kind in ("requested", "decided", "resolved") and isinstance(sequence, int):
                self.events[sequence] = str(payload.get("envelope_digest"))


def _one(found: dict[str, list[AuditEntry]], row_id: str) -> AuditEntry | str | None:
    entries = found.get(row_id, [])
    if len(entries) > 1:
        return "more than one audit entry claims it"
    return entries[0] if entries else None


def _index_problem(audit_index: int | None, entry: AuditEntry | None) -> str | None:
    if entry is not None and audit_index is not None and audit_index != entry.index:
        return "it names another audit entry than the one that records it"
    return None


def _request_problems(
    contents: LedgerContents, vouchers: _Vouchers, key: bytes | None
) -> Iterator[Problem]:
    resolved = {stored.request_id for stored in contents.resolutions}
    seen: set[str] = set()
    for stored in contents.requests:
        seen.add(stored.request_id)
        entry = _one(vouchers.requested, stored.request_id)
        reason = (
            entry
            if isinstance(entry, str)
            else request_vouched(stored, entry) or _index_problem(stored.audit_index, entry)
        )
        if reason is None and (stored.status == "resolved") != (stored.request_id in resolved):
            reason = (
                "it is marked pending, but a resolution is recorded"
                if stored.status == "pending"
                else "it is marked resolved, but no resolution is recorded"
            )
        column = contents.request_sequences.get(stored.request_id)
        if reason is None and column is not None and column != stored.envelope.get("sequence"):
            reason = "its sequence column does not match its envelope (listings follow it)"
        if reason is None:
            reason = seal_problem(sealed(key, "aais_requests", stored), stored.mac)
        if reason is not None:
            yield "aais_requests", stored.request_id, reason
    for request_id, entries in vouchers.requested.items():
        if request_id not in seen:
            yield "aais_requests", request_id, f"missing (audit entry {entries[0].index})"


def _resolution_problems(
    contents: LedgerContents, vouchers: _Vouchers, key: bytes | None
) -> Iterator[Problem]:
    seen: set[str] = set()
    for stored in contents.resolutions:
        seen.add(stored.request_id)
        entry = _one(vouchers.resolved, stored.request_id)
        reason = (
            entry
            if isinstance(entry, str)
            else resolution_vouched(stored, entry) or _index_problem(stored.audit_index, entry)
        )
        if reason is None:
            reason = seal_problem(sealed(key, "aais_resolutions", stored), stored.mac)
        if reason is not None:
            yield "aais_resolutions", stored.request_id, reason
    for request_id, entries in vouchers.resolved.items():
        if request_id not in seen:
            yield "aais_resolutions", request_id, f"missing (audit entry {entries[0].index})"


def _grant_problems(
    contents: LedgerContents, vouchers: _Vouchers, key: bytes | None
) -> Iterator[Problem]:
    seen: set[str] = set()
    for grant in contents.grants:
        seen.add(grant.grant_id)
        entry = _one(vouchers.granted, grant.grant_id)
        reason = (
            entry
            if isinstance(entry, str)
            else grant_vouched(grant, entry) or _index_problem(grant.audit_index, entry)
        )
        revocations = vouchers.revoked.get(grant.grant_id, [])
        if reason is None and grant.revoked_at is None and revocations:
            reason = f"it is live, but audit entry {revocations[0].index} revoked it"
        elif reason is None and grant.revoked_at is not None:
            if len(revocations) != 1:
                reason = "its revocation is not recorded once in the audit"
            elif revocations[0].payload.get("revoked_at") != grant.revoked_at:
                reason = "its revocation time differs from its audit entry"
        if reason is None:
            reason = seal_problem(sealed(key, "aais_grants", grant), grant.mac)
        if reason is not None:
            yield "aais_grants", grant.grant_id, reason
    for grant_id, entries in vouchers.granted.items():
        if grant_id not in seen:
            yield "aais_grants", grant_id, f"missing (audit entry {entries[0].index})"


def _event_problems(contents: LedgerContents, vouchers: _Vouchers) -> Iterator[Problem]:
    stored = {sequence for sequence, _ in contents.events}
    for sequence, envelope in contents.events:
        vouched = vouchers.events.get(sequence)
        try:
            digest = sha256_digest(envelope)
        except AAISValidationError:
            digest = None
        if vouched is None:
            yield "aais_events", str(sequence), "no audit entry vouches for it"
        elif digest != vouched or envelope.get("sequence") != sequence:
            yield "aais_events", str(sequence), "it does not match its audit entry"
    # Compaction drops the oldest events and says so in the audit (``compacted``): an
    # event the audit records at or after the last compaction's floor must be stored.
    # A ledger compacted by a version that did not audit it has no floor: a hole after
    # the oldest event kept is a deletion, and no event kept at all is one too.
    floor = vouchers.compacted_before
    if floor is None:
        floor = min(stored, default=1)
    for sequence in sorted(vouchers.events):
        if sequence >= floor and sequence not in stored:
            yield "aais_events", str(sequence), "missing"
    newest = max(vouchers.events, default=0)
    if contents.last_sequence < newest:
        yield "aais_meta", "last_sequence", "it is behind the sequences the audit records"


def _execution_problems(
    contents: LedgerContents, vouchers: _Vouchers, key: bytes | None
) -> Iterator[Problem]:
    approved = {
        stored.request_id
        for stored in contents.resolutions
        if stored.envelope.get("resolution", {}).get("outcome") == "approved"
    }
    requests = {stored.request_id for stored in contents.requests}
    seen: set[str] = set()
    for record in contents.executions:
        seen.add(record.request_id)
        reason = execution_vouched(record, vouchers.executions.get(record.request_id))
        if reason is None and record.request_id not in requests:
            reason = "its request does not exist"
        elif reason is None and record.request_id not in approved:
            reason = "its request was not approved"
        if reason is None:
            try:
                reason = seal_problem(sealed(key, "aais_executions", record), record.mac)
            except AAISValidationError:
                reason = "it cannot be sealed (not I-JSON)"
        if reason is not None:
            yield "aais_executions", record.request_id, reason
    for request_id, entry in vouchers.executions.items():
        if request_id not in seen:
            yield "aais_executions", request_id, f"missing (audit entry {entry.index})"


def _entry_seal_problems(contents: LedgerContents, key: bytes | None) -> Iterator[Problem]:
    """With a key: every audit entry that does not carry its seal (an entry appended or
    edited without the key: a forged escalation, a forged ``follow_up``)."""
    if key is None:
        return
    for entry in contents.audit:
        problem = entry_seal_problem(key, entry)
        if problem is not None:
            yield "aais_audit", str(entry.index), f"entry {entry.index}: {problem}"


def _thread_problems(contents: LedgerContents) -> Iterator[Problem]:
    """Threads whose owner or posters their ``thread`` entries do not record, and threads
    the entries record that are gone."""
    entries: dict[str, list[AuditEntry]] = {}
    for entry in contents.audit:
        if entry.kind == "thread":
            entries.setdefault(str(entry.payload.get("thread_id")), []).append(entry)
    posters = contents.thread_posters
    for thread_id in sorted({*contents.threads, *posters, *entries}):
        owner = contents.threads.get(thread_id)
        found = posters.get(thread_id, frozenset())
        reason = thread_vouched(thread_id, owner, found, entries.get(thread_id, []))
        if reason is None and owner is None and found:
            reason = "it has posts but no owner"
        if reason is not None:
            table = "aais_threads" if owner is not None or not found else "aais_thread_posts"
            yield table, thread_id, reason


def _checkpoint_problems(contents: LedgerContents, key: bytes | None) -> Iterator[Problem]:
    """Checkpoints that are unsealed (with a key), whose carried entries differ from the
    ones they record, or (the newest) whose tombstones differ from the stored ones."""
    by_index = {entry.index: entry for entry in contents.audit}
    first = contents.audit[0].index if contents.audit else 0
    newest: AuditEntry | None = None
    newest_index = max(
        (e.index for e in contents.audit if e.kind == "compacted" and "carried" in e.payload),
        default=None,
    )
    for entry in contents.audit:
        if entry.kind != "compacted":
            continue
        payload = entry.payload
        if key is not None:
            problem = seal_problem(checkpoint_seal(key, payload), _text(payload.get("mac")))
            if problem is not None:
                yield "aais_audit", str(entry.index), f"the compaction checkpoint: {problem}"
                continue
        carried, recorded = payload.get("carried"), payload.get("carried_digest")
        if isinstance(carried, int) and isinstance(recorded, str):
            start = entry.index - carried
            # A later pass may have removed an older checkpoint's carried entries; the
            # newest checkpoint's were appended after the chain's first entry.
            if start >= first or entry.index == newest_index:
                entries = [by_index[i] for i in range(start, entry.index) if i in by_index]
                if len(entries) != carried or carried_digest(entries) != recorded:
                    yield (
                        "aais_audit",
                        str(entry.index),
                        "the entries carried before the compaction checkpoint are not the "
                        "ones it records",
                    )
        if "tombstones_digest" in payload:
            newest = entry
    problem = tombstones_problem(newest, contents.tombstones)
    if problem is not None and newest is not None:
        yield "aais_compacted_requests", str(newest.index), problem


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def verify_contents(
    contents: LedgerContents,
    *,
    expected_tip: tuple[int, str] | None = None,
    key: bytes | None = None,
) -> AuditVerification:
    """Verify the chain, then cross-check every row; the first problem is reported.

    ``key`` (the authority key, if one is configured) also checks every row's seal.
    """
    chain = verify_audit(
        contents.audit,
        contents.audit_tip,
        expected_tip=expected_tip,
        sealed_checkpoints=key is not None,
    )
    if not chain.ok:
        return replace(chain, table="aais_audit", row_id=str(chain.first_bad_index))
    vouchers = _Vouchers(contents.audit)
    for problems in (
        _checkpoint_problems(contents, key),
        _entry_seal_problems(contents, key),
        _request_problems(contents, vouchers, key),
        _resolution_problems(contents, vouchers, key),
        _grant_problems(contents, vouchers, key),
        _event_problems(contents, vouchers),
        _execution_problems(contents, vouchers, key),
        _thread_problems(contents),
    ):
        for table, row_id, reason in problems:
            return replace(chain, ok=False, table=table, row_id=row_id, reason=reason)
    return chain

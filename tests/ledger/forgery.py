"""Forged compactions, as someone with write access to the ledger's storage would make them.

:func:`forge_compaction` rewrites the whole chain into a ``compacted`` checkpoint that
claims its removed range ends at a tip (typically a witnessed one), with the entries
that vouch for kept rows appended again, minus the ones to hide, and every row
re-pointed at its new entry. It uses the library's own payload helpers, so whatever
a check can recompute without the authority key, the forgery gets right. The writers
put the forged state into an in-memory ledger (its attributes) or a SQLite file (SQL).
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

from aais_langgraph.ledger import AuditEntry, InMemoryLedger, Ledger, LedgerContents, chain_hash
from aais_langgraph.ledger.compaction import carried_digest, history_audit, tombstones_digest

_ROW_KINDS = ("requested", "resolved", "granted", "revoked", "execution")


@dataclasses.dataclass(frozen=True)
class Forgery:
    """The forged chain and the rows it vouches for."""

    contents: LedgerContents
    tombstones: frozenset[str]


def _entry(index: int, kind: str, occurred_at: str, payload: dict, prev: str) -> AuditEntry:
    return AuditEntry(
        index, kind, occurred_at, payload, prev, chain_hash(index, kind, occurred_at, payload, prev)
    )


def forge_compaction(
    contents: LedgerContents,
    through: tuple[int, str],
    *,
    hide: Callable[[AuditEntry], bool] = lambda entry: False,
    tombstones: frozenset[str] = frozenset(),
) -> Forgery:
    """A chain that starts after ``through`` (index, hash) and carries every row's
    entries but those ``hide`` picks; a grant whose revocation is hidden is live again."""
    index, prev = through[0] + 1, through[1]
    latest_execution = {
        str(e.payload.get("request_id")): e.index for e in contents.audit if e.kind == "execution"
    }
    carried: list[AuditEntry] = []
    moved: dict[tuple[str, str], int] = {}
    for old in contents.audit:
        if old.kind not in _ROW_KINDS or hide(old):
            continue
        if old.kind == "resolved" and "sequence" not in old.payload:
            continue
        request_id = str(old.payload.get("request_id"))
        if old.kind == "execution" and latest_execution.get(request_id) != old.index:
            continue
        entry = _entry(index, old.kind, old.occurred_at, dict(old.payload), prev)
        carried.append(entry)
        key = "grant_id" if old.kind in ("granted", "revoked") else "request_id"
        moved[(old.kind, str(old.payload.get(key)))] = index
        index, prev = index + 1, entry.entry_hash
    revoked = {str(e.payload.get("grant_id")) for e in carried if e.kind == "revoked"}
    checkpoint = history_audit(
        before_sequence=contents.last_sequence + 1,
        removed_events=len(contents.events),
        audit_from=0,
        audit_through=through[0],
        audit_through_hash=through[1],
        requests_removed=0,
        carried=len(carried),
        carried_digest=carried_digest(carried),
        tombstones=len(tombstones),
        tombstones_digest=tombstones_digest(tombstones),
    )
    occurred_at = contents.audit[-1].occurred_at
    chain = [*carried, _entry(index, "compacted", occurred_at, checkpoint, prev)]
    forged = dataclasses.replace(
        contents,
        requests=[
            dataclasses.replace(r, audit_index=moved[("requested", r.request_id)])
            for r in contents.requests
        ],
        resolutions=[
            dataclasses.replace(r, audit_index=moved[("resolved", r.request_id)])
            for r in contents.resolutions
        ],
        grants=[
            dataclasses.replace(
                g,
                audit_index=moved[("granted", g.grant_id)],
                revoked_at=g.revoked_at if g.grant_id in revoked else None,
            )
            for g in contents.grants
        ],
        events=[],
        executions=[x for x in contents.executions if ("execution", x.request_id) in moved],
        audit=chain,
        audit_tip=(chain[-1].index, chain[-1].entry_hash),
    )
    return Forgery(forged, tombstones)


def write_memory(ledger: InMemoryLedger, forgery: Forgery) -> None:
    """Put the forged state into an in-memory ledger."""
    contents = forgery.contents
    ledger._requests = {r.request_id: r for r in contents.requests}
    ledger._resolutions = {r.request_id: r for r in contents.resolutions}
    ledger._grants = {g.grant_id: g for g in contents.grants}
    ledger._executions = {x.request_id: x for x in contents.executions}
    ledger._event_sequences, ledger._events = [], []
    ledger._audit = list(contents.audit)
    ledger._execution_entries = {
        str(e.payload.get("request_id")): e for e in contents.audit if e.kind == "execution"
    }
    ledger._compacted = set(forgery.tombstones)


def write_sqlite(path: Path, forgery: Forgery) -> None:
    """Put the forged state into a SQLite ledger file."""
    contents = forgery.contents
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM aais_audit")
        conn.executemany(
            "INSERT INTO aais_audit (idx, kind, occurred_at, payload, prev_hash, entry_hash) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            [
                (e.index, e.kind, e.occurred_at, json.dumps(e.payload), e.prev_hash, e.entry_hash)
                for e in contents.audit
            ],
        )
        for r in contents.requests:
            conn.execute(
                "UPDATE aais_requests SET audit_index = ? WHERE request_id = ?",
                (r.audit_index, r.request_id),
            )
        for s in contents.resolutions:
            conn.execute(
                "UPDATE aais_resolutions SET audit_index = ? WHERE request_id = ?",
                (s.audit_index, s.request_id),
            )
        for g in contents.grants:
            conn.execute(
                "UPDATE aais_grants SET audit_index = ?, revoked_at = ? WHERE grant_id = ?",
                (g.audit_index, g.revoked_at, g.grant_id),
            )
        conn.execute("DELETE FROM aais_events")
        kept = [x.request_id for x in contents.executions]
        marks = ", ".join("?" for _ in kept) or "''"
        conn.execute(f"DELETE FROM aais_executions WHERE request_id NOT IN ({marks})", kept)
        conn.execute("DELETE FROM aais_compacted_requests")
        conn.executemany(
            "INSERT INTO aais_compacted_requests (request_id) VALUES (?)",
            [(t,) for t in sorted(forgery.tombstones)],
        )
        conn.execute(
            "UPDATE aais_meta SET value = ? WHERE key = 'audit_tip'",
            (json.dumps(list(contents.audit_tip or ())),),
        )


def write(ledger: Ledger, path: Path | None, forgery: Forgery) -> None:
    """Write the forgery into ``ledger`` (in memory) or the SQLite file at ``path``."""
    if isinstance(ledger, InMemoryLedger):
        write_memory(ledger, forgery)
    else:
        assert path is not None
        write_sqlite(path, forgery)

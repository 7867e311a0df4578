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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

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


def write_sql(conn: Any, forgery: Forgery, *, mark: str, tip_sql: str) -> None:
    """Put the forged state into a SQL ledger through ``conn`` (a DB-API connection whose
    placeholder is ``mark``; ``tip_sql`` stores the tip from ``(index, hash)``)."""
    contents = forgery.contents

    def run(sql: str, params: Sequence[Any] = ()) -> None:
        conn.execute(sql.replace("?", mark), params)

    run("DELETE FROM aais_audit")
    for e in contents.audit:
        run(
            "INSERT INTO aais_audit (idx, kind, occurred_at, payload, prev_hash, entry_hash) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (e.index, e.kind, e.occurred_at, json.dumps(e.payload), e.prev_hash, e.entry_hash),
        )
    for r in contents.requests:
        run(
            "UPDATE aais_requests SET audit_index = ? WHERE request_id = ?",
            (r.audit_index, r.request_id),
        )
    for s in contents.resolutions:
        run(
            "UPDATE aais_resolutions SET audit_index = ? WHERE request_id = ?",
            (s.audit_index, s.request_id),
        )
    for g in contents.grants:
        run(
            "UPDATE aais_grants SET audit_index = ?, revoked_at = ? WHERE grant_id = ?",
            (g.audit_index, g.revoked_at, g.grant_id),
        )
    run("DELETE FROM aais_events")
    kept = [x.request_id for x in contents.executions]
    marks = ", ".join("?" for _ in kept) or "''"
    run(f"DELETE FROM aais_executions WHERE request_id NOT IN ({marks})", kept)
    run("DELETE FROM aais_compacted_requests")
    for tombstone in sorted(forgery.tombstones):
        run("INSERT INTO aais_compacted_requests (request_id) VALUES (?)", (tombstone,))
    assert contents.audit_tip is not None
    conn.execute(tip_sql, contents.audit_tip)


SQLITE_TIP = "UPDATE aais_meta SET value = json_array(?, ?) WHERE key = 'audit_tip'"
POSTGRES_TIP = "UPDATE aais_meta SET audit_tip_index = %s, audit_tip_hash = %s"


def write_sqlite(path: Path, forgery: Forgery) -> None:
    """Put the forged state into a SQLite ledger file."""
    with sqlite3.connect(path) as conn:
        write_sql(conn, forgery, mark="?", tip_sql=SQLITE_TIP)


def write_postgres(url: str, forgery: Forgery) -> None:
    """Put the forged state into a Postgres ledger."""
    import psycopg

    with psycopg.connect(url) as conn:
        write_sql(conn, forgery, mark="%s", tip_sql=POSTGRES_TIP)


def write(ledger: Ledger, where: Path | str | None, forgery: Forgery) -> None:
    """Write the forgery into ``ledger`` (in memory), the SQLite file at ``where`` (a
    path) or the Postgres database at ``where`` (a URL)."""
    if isinstance(ledger, InMemoryLedger):
        write_memory(ledger, forgery)
    elif isinstance(where, str):
        write_postgres(where, forgery)
    else:
        assert where is not None
        write_sqlite(where, forgery)

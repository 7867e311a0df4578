"""``audit verify`` reads what the chain does not: the file's pages, and holds that never end."""

from __future__ import annotations

import os
import time
from pathlib import Path

from aais_langgraph.authority import ApprovalAuthority
from aais_langgraph.ledger import Ledger, SqliteLedger
from aais_langgraph.ledger.executions import claim_change

from .support import FakeClock, decision, new_request


def test_garbage_in_the_middle_of_a_sqlite_ledger_fails_verify(
    sqlite_path: Path, clock: FakeClock
) -> None:
    with SqliteLedger.from_path(sqlite_path) as ledger:
        authority = ApprovalAuthority(ledger, clock=clock)
        for index in range(300):
            new_request(authority, command=f"echo {index} " + "x" * 200)
        assert authority.verify_audit().ok
        ledger._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    size = os.path.getsize(sqlite_path)
    assert size > 64 * 4096
    with open(sqlite_path, "r+b") as handle:
        handle.seek((size // 2) // 4096 * 4096)
        handle.write(os.urandom(4096))

    with SqliteLedger.from_path(sqlite_path) as reopened:
        result = ApprovalAuthority(reopened, clock=clock).verify_audit()

    assert not result.ok and result.table == "(storage)"
    assert "sk-" not in (result.reason or "") and "echo" not in (result.reason or "")


def test_a_lease_that_never_ends_fails_verify(authority: ApprovalAuthority, ledger: Ledger) -> None:
    new_request(authority, thread_id="t-1")
    ledger.acquire_lease("t-1", "holder_planted", ttl=10 * 365 * 86400.0, now=time.time())

    result = authority.verify_audit()

    assert not result.ok and result.table == "aais_leases" and result.row_id == "t-1"


def test_a_claim_that_never_ends_fails_verify(authority: ApprovalAuthority, ledger: Ledger) -> None:
    requested = new_request(authority, thread_id="t-1")
    authority.decide(decision(requested))
    request_id = requested.request.id
    change = claim_change(
        request_id, "holder_planted", thread_id="t-1", ttl=1e9, now=time.time(), retry=False
    )
    authority.change_execution(request_id, change)

    result = authority.verify_audit()

    assert not result.ok and result.table == "aais_executions" and result.row_id == request_id


def test_ordinary_leases_and_claims_verify(authority: ApprovalAuthority, ledger: Ledger) -> None:
    requested = new_request(authority, thread_id="t-1")
    authority.decide(decision(requested))
    ledger.acquire_lease("t-1", "holder_live", ttl=60.0, now=time.time())
    change = claim_change(
        requested.request.id, "holder_live", thread_id="t-1", ttl=30.0, now=time.time(), retry=False
    )
    authority.change_execution(requested.request.id, change)

    assert authority.verify_audit().ok


def test_deleting_every_event_is_not_mistaken_for_a_compaction(
    sqlite_path: Path, clock: FakeClock
) -> None:
    with SqliteLedger.from_path(sqlite_path) as ledger:
        authority = ApprovalAuthority(ledger, clock=clock)
        for index in range(3):
            new_request(authority, command=f"echo {index}")
        ledger._conn.execute("DELETE FROM aais_events")

        result = authority.verify_audit()

    assert not result.ok and result.table == "aais_events" and result.reason == "missing"


def test_a_compaction_is_audited_and_verifies(authority: ApprovalAuthority, ledger: Ledger) -> None:
    for index in range(4):
        new_request(authority, command=f"echo {index}")
    assert ledger.compact_events(ledger.last_sequence() + 1) == 4
    [compacted] = [entry for entry in ledger.audit_entries() if entry.kind == "compacted"]
    assert compacted.payload == {"before_sequence": 5, "removed": 4}

    assert authority.verify_audit().ok
    new_request(authority, command="echo after")
    assert authority.verify_audit().ok


def test_an_edited_request_sequence_column_fails_verify(
    sqlite_path: Path, clock: FakeClock
) -> None:
    with SqliteLedger.from_path(sqlite_path) as ledger:
        authority = ApprovalAuthority(ledger, clock=clock)
        first = new_request(authority, command="echo 1")
        new_request(authority, command="echo 2")
        ledger._conn.execute(
            "UPDATE aais_requests SET sequence = 99 WHERE request_id = ?", (first.request.id,)
        )

        result = authority.verify_audit()

    assert not result.ok and result.table == "aais_requests" and result.row_id == first.request.id
    assert "sequence column" in (result.reason or "")

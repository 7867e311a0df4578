"""The audit chain as the authority sees it: intact after a workflow, tampering located."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from aais_langgraph.authority import ApprovalAuthority
from aais_langgraph.ledger import Ledger, SqliteLedger

from .support import START, FakeClock, action, decision, new_request, origin


def workflow(authority: ApprovalAuthority) -> None:
    """Every kind of audited step: request, refusals, approval with grant, conflict, revoke."""
    approved = new_request(authority)
    authority.decide(decision(approved, action_digest="sha256:" + "f" * 64))
    authority.decide(decision(approved, scope="persistent"))
    authority.decide(decision(approved, scope="session"))
    authority.decide(decision(approved, "deny"))
    authority.screen(action("node --check b.js"), origin=origin())
    cancelled = new_request(authority)
    authority.cancel(cancelled.request.id)
    for grant in authority.list_grants():
        authority.revoke_grant(grant.grant_id)


def test_audit_verifies_after_a_workflow(authority: ApprovalAuthority) -> None:
    workflow(authority)
    kinds = [entry.kind for entry in authority.ledger.audit_entries()]
    assert set(kinds) == {"requested", "decided", "resolved", "granted", "conflict", "revoked"}
    verification = authority.verify_audit()
    assert verification.ok
    assert verification.checked == len(kinds)


def test_audit_verifies_against_a_tip_kept_earlier(authority: ApprovalAuthority) -> None:
    workflow(authority)
    tip = authority.ledger.audit_tip()
    workflow(authority)
    assert authority.verify_audit(expected_tip=tip).ok


def test_empty_audit_verifies(ledger: Ledger) -> None:
    assert ApprovalAuthority(ledger).verify_audit().ok


def test_tampered_sqlite_audit_row_is_reported_at_its_index(sqlite_path: Path) -> None:
    with SqliteLedger.from_path(sqlite_path) as ledger:
        ledger.setup()
        authority = ApprovalAuthority(ledger, clock=FakeClock(START))
        workflow(authority)
        entries = authority.ledger.audit_entries()
        target = next(e.index for e in entries if e.kind == "resolved")
        assert 0 < target < len(entries) - 1
        with sqlite3.connect(sqlite_path) as raw:
            raw.execute(
                "UPDATE aais_audit SET payload = replace(payload, '\"approved\"', '\"denied\"') "
                "WHERE idx = ?",
                (target,),
            )
        verification = authority.verify_audit()
    assert not verification.ok
    assert verification.first_bad_index == target
    assert verification.checked == target


def test_deleted_sqlite_audit_tail_is_reported(sqlite_path: Path) -> None:
    with SqliteLedger.from_path(sqlite_path) as ledger:
        ledger.setup()
        authority = ApprovalAuthority(ledger, clock=FakeClock(START))
        workflow(authority)
        last = authority.ledger.audit_entries()[-1].index
        with sqlite3.connect(sqlite_path) as raw:
            raw.execute("DELETE FROM aais_audit WHERE idx = ?", (last,))
        verification = authority.verify_audit()
    assert not verification.ok
    assert verification.first_bad_index == last

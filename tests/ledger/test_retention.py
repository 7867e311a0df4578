"""Retention: compacting resolved history keeps ``audit verify`` passing and what is needed."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from aais_langgraph.authority import ApprovalAuthority, UnknownRequestError
from aais_langgraph.ledger import DELIVERY, RESUME, Ledger, shown_states, verify_contents
from aais_langgraph.ledger.deliveries import new_delivery
from aais_langgraph.ledger.executions import claim_change, finish_change
from aais_langgraph.ledger.retention import CompactedRequestError, RetentionPolicy
from aais_langgraph.protocol import build_decision

from .envelopes import approval, request_envelope

ACTION = {"kind": "tool_call", "name": "shell", "summary": "Run ls", "arguments": {"command": "ls"}}
SCOPED = [
    {"decision": "approve", "scope": "once", "label": "Approve once"},
    {
        "decision": "approve",
        "scope": "persistent",
        "label": "Always",
        "scope_constraints": {"command_prefix": "ls"},
    },
    {"decision": "deny", "scope": "once", "label": "Deny"},
]


def _ask(authority: ApprovalAuthority, request_id: str, **kwargs: Any) -> Any:
    return authority.request(
        ACTION,
        origin={"harness": "tests", "session_id": "sess_1"},
        request_id=request_id,
        choices=SCOPED,
        **kwargs,
    )


def _approve(authority: ApprovalAuthority, request_id: str, scope: str = "once") -> Any:
    requested = _ask(authority, request_id)
    decided = build_decision(
        requested, decision="approve", scope=scope, actor={"id": "user_alex", "type": "human"}
    )
    authority.decide(decided)
    return decided


def _verified(ledger: Ledger) -> Any:
    result = verify_contents(ledger.contents())
    assert result.ok, result
    return result


def test_keep_last_removes_the_oldest_resolved_requests_and_verify_passes(ledger: Ledger) -> None:
    authority = ApprovalAuthority(ledger)
    for number in range(6):
        _approve(authority, f"apr_{number}")

    report = ledger.compact_history(RetentionPolicy(keep_last=2), now=time.time())

    assert report.requests_removed == 4
    assert [ledger.get_request(f"apr_{n}") is None for n in range(6)] == [True] * 4 + [False] * 2
    result = _verified(ledger)
    assert result.compacted == (0, report.compacted_through)
    assert ledger.audit_entries()[0].index == report.compacted_through + 1


def test_nothing_to_remove_changes_nothing(ledger: Ledger) -> None:
    authority = ApprovalAuthority(ledger)
    _approve(authority, "apr_0")
    tip = ledger.audit_tip()

    report = ledger.compact_history(RetentionPolicy(keep_last=5), now=time.time())

    assert report.requests_removed == 0 and report.compacted_through is None
    assert ledger.audit_tip() == tip


def test_keep_days_keeps_what_resolved_within_the_window(ledger: Ledger) -> None:
    authority = ApprovalAuthority(ledger)
    _approve(authority, "apr_old")
    _approve(authority, "apr_new")
    now = time.time()

    assert ledger.compact_history(RetentionPolicy(keep_days=1), now=now).requests_removed == 0
    later = now + timedelta(days=2).total_seconds()
    assert ledger.compact_history(RetentionPolicy(keep_days=1), now=later).requests_removed == 2
    _verified(ledger)


def test_pending_requests_stay_and_are_still_vouched_for(ledger: Ledger) -> None:
    authority = ApprovalAuthority(ledger)
    _ask(authority, "apr_waiting")
    for number in range(3):
        _approve(authority, f"apr_{number}")

    report = ledger.compact_history(RetentionPolicy(keep_last=0), now=time.time())

    assert report.requests_removed == 3 and report.carried == 1
    assert authority.get_request("apr_waiting") is not None  # read back through its vouching
    _verified(ledger)
    requested = authority.get_request("apr_waiting")
    assert requested is not None
    decided = build_decision(
        requested, decision="approve", scope="once", actor={"id": "u_1", "type": "human"}
    )
    assert authority.decide(decided).resolution.outcome == "approved"
    _verified(ledger)


def test_open_resume_work_and_unfinished_executions_stay(ledger: Ledger) -> None:
    authority = ApprovalAuthority(ledger)
    requested = _ask(authority, "apr_thread", thread_id="thread_1")
    authority.decide(
        build_decision(
            requested, decision="approve", scope="once", actor={"id": "u_1", "type": "human"}
        )
    )
    _approve(authority, "apr_running")
    now = time.time()
    authority.change_execution(
        "apr_running",
        claim_change("apr_running", "h1", thread_id=None, ttl=60, now=now, retry=False),
    )
    _approve(authority, "apr_done")

    report = ledger.compact_history(RetentionPolicy(keep_last=0), now=now)

    assert report.requests_removed == 1
    assert ledger.get_work(RESUME, "apr_thread") is not None
    assert authority.execution("apr_running") is not None
    _verified(ledger)


def test_a_request_compacted_away_is_listed_no_more(ledger: Ledger) -> None:
    authority = ApprovalAuthority(ledger)
    envelope = request_envelope("apr_ran")
    ledger.add_request(envelope, thread_id="thread_1")
    ledger.record_resolution(approval(envelope))
    now = time.time()
    claimed = claim_change("apr_ran", "h1", thread_id="thread_1", ttl=60, now=now, retry=False)
    authority.change_execution("apr_ran", claimed)
    # The run's end: its resume work done, its claim settled, in the lease's release.
    assert ledger.acquire_lease("thread_1", "h1", ttl=60, now=now) is not None
    finished = {"apr_ran": finish_change(now + 1)}
    assert ledger.release_lease("thread_1", "h1", done=["apr_ran"], executions=finished)
    assert [stored.request_id for stored in ledger.requests_of_thread("thread_1")] == ["apr_ran"]
    assert [record.request_id for record in ledger.list_executions(states=("executed",))] == [
        "apr_ran"
    ]

    report = ledger.compact_history(RetentionPolicy(keep_last=0), now=now + 2)

    assert report.requests_removed == 1
    assert ledger.requests_of_thread("thread_1") == []
    assert ledger.list_executions(states=("executed", "executing", "unknown")) == []
    assert ledger.contents().executions == []
    _verified(ledger)


def test_live_grants_stay_and_still_match(ledger: Ledger) -> None:
    authority = ApprovalAuthority(ledger)
    _approve(authority, "apr_always", scope="persistent")
    _approve(authority, "apr_once")

    report = ledger.compact_history(RetentionPolicy(keep_last=0), now=time.time())

    assert report.requests_removed == 1
    assert [grant.request_id for grant in ledger.list_grants()] == ["apr_always"]
    _verified(ledger)


def test_a_decision_replayed_after_compaction_executes_nothing(ledger: Ledger) -> None:
    authority = ApprovalAuthority(ledger)
    decided = _approve(authority, "apr_0")
    ledger.compact_history(RetentionPolicy(keep_last=0), now=time.time())

    with pytest.raises(UnknownRequestError):
        authority.decide(decided)
    with pytest.raises(CompactedRequestError):
        _ask(authority, "apr_0")  # the same call re-run: the id is never stored again
    assert ledger.get_request("apr_0") is None
    assert ledger.execution_with_entry("apr_0")[0] is None
    _verified(ledger)


def test_repeated_compactions_keep_the_chain_verifiable(ledger: Ledger) -> None:
    authority = ApprovalAuthority(ledger)
    for round_number in range(4):
        for number in range(3):
            _approve(authority, f"apr_{round_number}_{number}")
        ledger.compact_history(RetentionPolicy(keep_last=2), now=time.time())
        _verified(ledger)
    assert len(ledger.contents().requests) == 2


def test_deleting_the_prefix_without_a_checkpoint_is_detected(ledger: Ledger) -> None:
    authority = ApprovalAuthority(ledger)
    for number in range(3):
        _approve(authority, f"apr_{number}")
    ledger.compact_history(RetentionPolicy(keep_last=1), now=time.time())
    contents = ledger.contents()
    checkpoint = next(e for e in contents.audit if e.kind == "compacted")
    forged = dataclasses.replace(
        checkpoint, payload={**checkpoint.payload, "audit_through": checkpoint.index}
    )
    audit = [forged if e.index == checkpoint.index else e for e in contents.audit]

    result = verify_contents(dataclasses.replace(contents, audit=audit))

    assert not result.ok and result.table == "aais_audit"


def test_a_removed_row_that_remains_audited_is_reported(ledger: Ledger) -> None:
    authority = ApprovalAuthority(ledger)
    for number in range(3):
        _approve(authority, f"apr_{number}")
    ledger.compact_history(RetentionPolicy(keep_last=1), now=time.time())
    contents = ledger.contents()

    result = verify_contents(dataclasses.replace(contents, requests=[]))

    assert not result.ok and result.table == "aais_requests"


def test_policy_needs_a_rule_and_sane_values() -> None:
    with pytest.raises(ValueError, match="keep_days, keep_last"):
        RetentionPolicy()
    with pytest.raises(ValueError, match="keep_last"):
        RetentionPolicy(keep_last=-1)
    with pytest.raises(ValueError, match="keep_days"):
        RetentionPolicy(keep_days=float("nan"))


class _ResolvedNotices:
    """One webhook subscription told of every resolution."""

    def deliveries(self, notice: str, request: Any, now: float) -> list[Any]:
        if notice != "approval.resolved":
            return []
        return [new_delivery("sub", notice, request, now)]


def test_requests_with_deliveries_still_to_send_stay(make_ledger: Callable[..., Ledger]) -> None:
    ledger = make_ledger(delivery_plan=_ResolvedNotices())
    authority = ApprovalAuthority(ledger)
    _approve(authority, "apr_sent")
    _approve(authority, "apr_waiting")
    [sent] = [d for d in ledger.list_work(DELIVERY) if d.request_id == "apr_sent"]
    ledger.update_work(
        DELIVERY,
        sent.work_id,
        lambda d: None if d is None else dataclasses.replace(d, state="done"),
    )

    report = ledger.compact_history(RetentionPolicy(keep_last=0), now=time.time())

    assert report.requests_removed == 1
    assert ledger.get_request("apr_waiting") is not None
    every = ledger.list_work(
        DELIVERY,
        states=shown_states(DELIVERY, ("pending", "delivered", "dead", "coalesced", "skipped")),
    )
    assert [d.request_id for d in every] == ["apr_waiting"]  # the delivered one went
    _verified(ledger)


def test_a_kept_tip_checks_against_the_checkpoint_or_says_it_was_compacted(
    ledger: Ledger,
) -> None:
    authority = ApprovalAuthority(ledger)
    _approve(authority, "apr_0")
    early = ledger.audit_entries()[0]
    _approve(authority, "apr_1")
    tip = ledger.audit_tip()
    assert tip is not None
    key = b"k" * 32
    ledger.compact_history(RetentionPolicy(keep_last=0), now=time.time(), key=key)

    # The checkpoint's hash counts only when its seal can be checked.
    assert verify_contents(ledger.contents(), expected_tip=tip, key=key).ok
    unsealed = verify_contents(ledger.contents(), expected_tip=tip)
    assert not unsealed.ok and unsealed.reason is not None
    assert "compacted away" in unsealed.reason
    result = verify_contents(
        ledger.contents(), expected_tip=(early.index, early.entry_hash), key=key
    )
    assert not result.ok and result.reason is not None and "compacted away" in result.reason
    forged = verify_contents(
        ledger.contents(), expected_tip=(tip[0], "sha256:" + "0" * 64), key=key
    )
    assert not forged.ok and forged.reason is not None and "rewritten" in forged.reason


def test_compaction_alongside_a_writer_keeps_verify_passing(
    make_ledger: Callable[[], Ledger],
) -> None:
    ledger = make_ledger()
    authority = ApprovalAuthority(ledger)
    for number in range(10):
        _approve(authority, f"apr_first_{number}")
    failures: list[BaseException] = []

    def write() -> None:
        try:
            for number in range(40):
                _approve(authority, f"apr_busy_{number}")
                if number % 3 == 0:
                    _ask(authority, f"apr_open_{number}")
        except BaseException as error:  # reported by the main thread
            failures.append(error)

    writer = threading.Thread(target=write)
    writer.start()
    while writer.is_alive():
        ledger.compact_history(RetentionPolicy(keep_last=5), now=time.time())
    writer.join()
    ledger.compact_history(RetentionPolicy(keep_last=5), now=time.time())

    assert failures == []
    _verified(ledger)
    assert len(ledger.list_pending()) == 14

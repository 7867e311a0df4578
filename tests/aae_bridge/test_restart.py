"""A real restart: the process waiting inside AAE's ``execute()`` is killed; the AAIS
request outlives it, is answered through the CLI, and a new process re-attaches to
the recorded resolution without raising a second request."""

from __future__ import annotations

import asyncio
import getpass
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from aae.audit import JsonlAuditSink

from aais_langgraph import ApprovalAuthority, SqliteLedger
from aais_langgraph.aae import aae_request_id

from .support import proposal

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}


def _worker(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "aae_bridge.restart_worker", *args],
        cwd=ROOT,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "aais_langgraph.cli", "--db", str(db), *args],
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _requested_events(db: Path) -> list[str]:
    ledger = SqliteLedger(db)
    try:
        return [
            e["request"]["id"] for e in ledger.events_after(0) if e["type"] == "approval.requested"
        ]
    finally:
        ledger.close()


def _wait_until_requested(db: Path, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()
        authority = ApprovalAuthority(SqliteLedger(db))
        try:
            if authority.snapshot().snapshot.pending:
                return
        finally:
            authority.ledger.close()
        time.sleep(0.1)
    raise AssertionError("the worker never raised its approval request")


def _wait_until_asking_again(audit: Path, proposal_id: str, process: subprocess.Popen[str]) -> None:
    """Until the new process's lifecycle reached its APPROVE step (AAE audits it first)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()
        kinds = [e.event_type for e in asyncio.run(JsonlAuditSink(audit).read(proposal_id))]
        if kinds.count("approval_requested") == 2:
            return
        time.sleep(0.1)
    raise AssertionError("the new process never reached AAE's APPROVE step")


def _chain(audit: Path, proposal_id: str) -> list[str]:
    sink = JsonlAuditSink(audit)
    asyncio.run(sink.verify(proposal_id))  # raises if the chain is broken
    return [e.event_type for e in asyncio.run(sink.read(proposal_id))]


@pytest.mark.parametrize("approve_while", ["no_process_runs", "the_new_process_waits"])
def test_a_killed_wait_is_answered_after_restart_and_reattached(
    tmp_path: Path, approve_while: str
) -> None:
    db, audit, note = tmp_path / "approvals.db", tmp_path / "aae-audit.jsonl", tmp_path / "n.txt"
    plan = proposal(note, "hello after restart")
    request_id = aae_request_id(plan)
    (tmp_path / "proposal.json").write_text(plan.model_dump_json())
    SqliteLedger(db).setup()  # the schema exists before anyone polls it

    first = _worker("start", str(db), str(audit), str(tmp_path / "proposal.json"))
    _wait_until_requested(db, first)
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=30)
    assert first.returncode == -signal.SIGKILL

    listing = _cli(db, "pending")
    assert listing.returncode == 0 and request_id in listing.stdout, listing
    if approve_while == "no_process_runs":
        approved = _cli(db, "approve", request_id, "--yes")
        assert approved.returncode == 0 and "approved" in approved.stdout, approved
        second = _worker("reattach", str(db), str(audit), request_id)
    else:
        second = _worker("reattach", str(db), str(audit), request_id)
        _wait_until_asking_again(audit, plan.proposal_id, second)
        approved = _cli(db, "approve", request_id, "--yes")
        assert approved.returncode == 0 and "approved" in approved.stdout, approved
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    result = json.loads(out)
    assert result["decision"] == "allow" and result["approval_outcome"] == "granted"
    assert note.read_text() == "hello after restart\n"
    assert _requested_events(db) == [request_id]  # the new process asked nothing new

    chain = _chain(audit, plan.proposal_id)
    first_run = chain[: chain.index("approval_requested") + 1]
    assert first_run == [
        "proposal_submitted",
        "preview_generated",
        "policy_decision",
        "approval_requested",
    ]
    assert chain[len(first_run) :] == [
        "proposal_submitted",
        "preview_generated",
        "policy_decision",
        "approval_requested",
        "approval_granted",
        "token_minted",
        "session_started",
        "step_executed",
        "session_completed",
    ]
    events = asyncio.run(JsonlAuditSink(audit).read(plan.proposal_id))
    [granted] = [e for e in events if e.event_type == "approval_granted"]
    assert granted.payload["approver_id"] == getpass.getuser()
    [minted] = [e for e in events if e.event_type == "token_minted"]
    stored = ApprovalAuthority(SqliteLedger(db)).get_request(request_id)
    assert stored is not None
    assert (
        minted.payload["approved_steps_hash"]
        == stored.request.action.arguments["approved_steps_hash"]
    )

    third = _worker("reattach", str(db), str(audit), request_id)
    out, err = third.communicate(timeout=120)
    assert third.returncode == 3, err
    assert note.read_text() == "hello after restart\n"

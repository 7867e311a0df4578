"""Invariant 5 across OS processes and threads: one resolution per request, whoever races.

Acceptance: several processes race 50 conflicting decisions (approve vs deny, distinct
decision ids) on one request in one SQLite file through ApprovalAuthority.decide.
Exactly one resolution is recorded, and every caller saw it or a ``conflict``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from aais_langgraph.authority import ApprovalAuthority
from aais_langgraph.ledger import Ledger, SqliteLedger
from aais_langgraph.protocol import ApprovalRequested, ApprovalResolved
from hostile.report import record

from .support import assert_spec_valid, decision, new_request

WORKER = Path(__file__).with_name("race_worker.py")
PROCESSES = 4
DECISIONS = 50


def conflicting_decisions(requested: ApprovalRequested, count: int) -> list[dict[str, Any]]:
    return [
        decision(requested, "approve" if i % 2 == 0 else "deny", id=f"dec_race_{i:03d}")
        for i in range(count)
    ]


def race_processes(db: Path, bodies: list[dict[str, Any]]) -> list[ApprovalResolved]:
    """Run the bodies in ``PROCESSES`` racers started together; return every answer."""
    racers = []
    for index in range(PROCESSES):
        racer = subprocess.Popen(
            [sys.executable, str(WORKER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert racer.stdin is not None and racer.stdout is not None
        racer.stdin.write(json.dumps({"db": str(db), "decisions": bodies[index::PROCESSES]}) + "\n")
        racer.stdin.flush()
        racers.append(racer)
    for racer in racers:
        assert racer.stdout is not None
        assert racer.stdout.readline().strip() == "ready"
    for racer in racers:
        assert racer.stdin is not None
        racer.stdin.write("go\n")
        racer.stdin.flush()
    answers: list[ApprovalResolved] = []
    for racer in racers:
        out, _ = racer.communicate(timeout=120)
        assert racer.returncode == 0
        answers += [ApprovalResolved.from_data(a) for a in json.loads(out)]
    return answers


def assert_one_resolution(
    authority: ApprovalAuthority, request_id: str, answers: list[ApprovalResolved]
) -> None:
    recorded = authority.get_resolution(request_id)
    assert recorded is not None
    assert recorded.resolution.outcome in ("approved", "denied")
    events = authority.events_after(0).events
    resolved = [
        e for e in events
        if e["type"] == "approval.resolved" and e["resolution"]["request_id"] == request_id
    ]  # fmt: skip
    # No action here: a second resolution recorded for the request is the double run.
    record("races", len(answers), double_runs=max(len(resolved) - 1, 0))
    decided = [
        e for e in events
        if e["type"] == "approval.decided" and e["decision"]["request_id"] == request_id
    ]  # fmt: skip
    assert [e["resolution"]["id"] for e in resolved] == [recorded.resolution.id]
    assert [e["decision"]["id"] for e in decided] == [recorded.resolution.decision_id]
    audited = [
        e for e in authority.ledger.audit_entries()
        if e.kind == "resolved" and e.payload["request_id"] == request_id
    ]  # fmt: skip
    assert len(audited) == 1
    winners = [a for a in answers if a.resolution.outcome != "conflict"]
    assert winners == [recorded]
    recorded_id = {"aais-langgraph.org/recorded_resolution_id": recorded.resolution.id}
    for answer in answers:
        assert_spec_valid(answer.to_json())
        if answer.resolution.outcome == "conflict":
            assert answer.resolution.extensions == recorded_id
    assert authority.verify_audit().ok


def test_processes_racing_conflicting_decisions_record_one_resolution(tmp_path: Path) -> None:
    db = tmp_path / "race.db"
    with SqliteLedger.from_path(db) as ledger:
        ledger.setup()
        authority = ApprovalAuthority(ledger)
        requested = new_request(authority, expires_in=3600)
        bodies = conflicting_decisions(requested, DECISIONS)
        answers = race_processes(db, bodies)
        assert len(answers) == DECISIONS
        assert_one_resolution(authority, requested.request.id, answers)


def test_threads_racing_conflicting_decisions_record_one_resolution(ledger: Ledger) -> None:
    authority = ApprovalAuthority(ledger)
    for _ in range(5):
        requested = new_request(authority, expires_in=3600)
        bodies = conflicting_decisions(requested, 16)
        with ThreadPoolExecutor(max_workers=8) as pool:
            answers = list(pool.map(authority.decide, bodies))
        assert_one_resolution(authority, requested.request.id, answers)

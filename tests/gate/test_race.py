"""Two OS processes answer the same pending approval at the same moment.

One approves, one denies. Whatever the interleaving, the action runs at most
once and the ledger records exactly one resolution. The control test shows the
same race without the gate: plain LangGraph runs the side effect in both.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver

from aais_langgraph import ApprovalAuthority, SqliteLedger
from aais_langgraph.protocol import ApprovalRequested
from hostile.report import record

from . import worker
from .support import decide

ROOT = Path(__file__).resolve().parents[2]
DELAY = 0.5  # seconds between the decision and the side effect, to widen the window


def spawn(job: dict[str, Any]) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.gate.worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(json.dumps({**job, "barrier": True}) + "\n")
    process.stdin.flush()
    return process


def race(jobs: list[dict[str, Any]]) -> list[Any]:
    """Start the racers, wait until every one is ready, then release them together."""
    racers = [spawn(job) for job in jobs]
    for racer in racers:
        assert racer.stdout is not None
        line = racer.stdout.readline().strip()
        assert line == "ready", (line, racer.stderr.read() if racer.stderr else "")
    for racer in racers:
        assert racer.stdin is not None
        racer.stdin.write("go\n")
        racer.stdin.flush()
    results = []
    for racer in racers:
        out, err = racer.communicate(timeout=90)
        assert racer.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


def start(tmp_path: Path, node: str = "gated") -> tuple[dict[str, Any], dict[str, Any]]:
    """Run the graph up to its interrupt in this process (the racers are separate ones)."""
    job = {
        "db": str(tmp_path / "race.db"),
        "effects": str(tmp_path / "effects.txt"),
        "thread": "t-race",
        "node": node,
        "delay": DELAY,
    }
    conn = sqlite3.connect(job["db"], check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()
    with SqliteLedger.from_path(job["db"]) as ledger:
        ledger.setup()
        authority = ApprovalAuthority(ledger)
        graph = worker.build(job, saver, authority)
        [started] = worker.act({**job, "mode": "start", "command": "deploy"}, graph, authority)
    conn.close()
    return job, started


def effects(job: dict[str, Any]) -> list[str]:
    path = Path(job["effects"])
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def resolutions(job: dict[str, Any], request_id: str) -> list[dict[str, Any]]:
    with SqliteLedger.from_path(job["db"]) as ledger:
        events = ApprovalAuthority(ledger).events_after(0).events
    return [
        event
        for event in events
        if event["type"] == "approval.resolved" and event["resolution"]["request_id"] == request_id
    ]


def assert_one_resolution_and_at_most_one_run(
    job: dict[str, Any], request_id: str, results: list[Any]
) -> None:
    recorded_all, ran = resolutions(job, request_id), effects(job)
    approved = any(r["resolution"]["outcome"] == "approved" for r in recorded_all)
    record(
        "races",
        len(results),
        failed_open=int(bool(ran) and not approved),
        double_runs=max(len(ran) - 1, 0),
    )
    [recorded] = recorded_all
    outcome = recorded["resolution"]["outcome"]
    assert outcome in ("approved", "denied"), results
    assert effects(job) == (["deploy"] if outcome == "approved" else []), results


@pytest.mark.parametrize("trial", range(2))
def test_two_presenters_racing_through_resume_with_decisions(tmp_path: Path, trial: int) -> None:
    job, started = start(tmp_path)
    requested = ApprovalRequested.from_data(started["value"])
    approve, deny = decide(requested).to_json(), decide(requested, "deny").to_json()

    results = race(
        [
            {**job, "mode": "resume", "decisions": [approve]},
            {**job, "mode": "resume", "decisions": [deny]},
        ]
    )

    outcomes = sorted(result["ok"][0] for result in results)
    assert "conflict" in outcomes and len(outcomes) == 2, results
    assert_one_resolution_and_at_most_one_run(job, requested.request.id, results)


def test_two_presenters_sending_the_same_approval_run_it_once(tmp_path: Path) -> None:
    """An identical replay is accepted, so only the run lease stops a second run."""
    job, started = start(tmp_path)
    requested = ApprovalRequested.from_data(started["value"])
    approve = decide(requested).to_json()

    results = race([{**job, "mode": "resume", "decisions": [approve]}] * 2)

    assert [result["ok"] for result in results] == [["approved"], ["approved"]], results
    assert_one_resolution_and_at_most_one_run(job, requested.request.id, results)
    assert effects(job) == ["deploy"]


@pytest.mark.parametrize("trial", range(2))
def test_two_processes_racing_through_raw_resume(tmp_path: Path, trial: int) -> None:
    job, started = start(tmp_path)
    requested = ApprovalRequested.from_data(started["value"])
    raw = {**job, "mode": "raw", "interrupt_id": started["interrupt_id"]}

    results = race(
        [
            {**raw, "answer": decide(requested).to_json()},
            {**raw, "answer": decide(requested, "deny").to_json()},
        ]
    )

    # The loser is refused (RejectedResumeError) or finds the run already finished.
    for result in results:
        assert "ok" in result or result["error"] == "RejectedResumeError", results
    assert_one_resolution_and_at_most_one_run(job, requested.request.id, results)


def test_control_plain_langgraph_runs_the_side_effect_twice(tmp_path: Path) -> None:
    """Without the gate both racers execute (the reason for the ledger and the lease)."""
    job, started = start(tmp_path, node="plain")
    raw = {**job, "mode": "raw", "interrupt_id": started["interrupt_id"], "answer": "approve"}

    results = race([raw, raw])

    entries = sorted(float(line) for line in Path(job["effects"] + ".entries").read_text().split())
    resumed = entries[1:]  # the first entry is the start run
    if len(resumed) != 2 or resumed[1] - resumed[0] > DELAY * 0.8:
        pytest.skip("the two processes did not overlap this time; the control proves nothing")
    assert all("ok" in result for result in results), results
    assert effects(job) == ["deploy", "deploy"]


@pytest.mark.parametrize("trial", range(2))
def test_two_processes_sending_the_same_approval_through_raw_resume_run_it_once(
    tmp_path: Path, trial: int
) -> None:
    """An identical raw replay is accepted by the authority; the execution claim stops
    the second run from executing the action (invariant 6 without the lease)."""
    job, started = start(tmp_path)
    requested = ApprovalRequested.from_data(started["value"])
    raw = {**job, "mode": "raw", "interrupt_id": started["interrupt_id"]}
    approve = decide(requested).to_json()

    results = race([{**raw, "answer": approve}, {**raw, "answer": approve}])

    for result in results:
        assert "ok" in result or result["error"] == "RejectedResumeError", results
    assert_one_resolution_and_at_most_one_run(job, requested.request.id, results)
    assert effects(job) == ["deploy"]

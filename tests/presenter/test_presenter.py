"""The NDJSON stdio presenter driven as a subprocess: snapshot, events, decisions, resume."""

from __future__ import annotations

import copy
import io
import json
import signal
import subprocess
import sys
from pathlib import Path

import aais
import pytest

from aais_langgraph import ApprovalAuthority, ThreadDriver, build_decision
from aais_langgraph.authority import DEFAULT_STREAM
from aais_langgraph.cli.presenter import IN_REPLY_TO, StdioPresenter
from aais_langgraph.ledger import open_ledger
from aais_langgraph.protocol import Actor

from .conftest import Paused
from .support import OS_USER, WAIT, PresenterProcess, is_reply, presenter


def test_a_paused_graph_is_approved_through_stdio_and_runs_once(paused: Paused) -> None:
    requested = paused.pause("t1")
    request_id = requested["request"]["id"]
    with presenter(paused.db) as stdio:
        [pending] = stdio.seen[0]["snapshot"]["pending"]
        assert pending["id"] == request_id
        decided = build_decision(requested, decision="approve", actor={"id": "x", "type": "human"})
        stdio.send(decided.to_json())
        reply = stdio.read_until(is_reply)
        assert reply["resolution"]["outcome"] == "approved"
        assert reply["resolution"]["request_id"] == request_id
        assert reply["extensions"][IN_REPLY_TO] == {"line": 1, "decision_id": decided.decision.id}
        recorded = stdio.read_until(lambda d: d["type"] == "approval.decided")
        assert recorded["decision"]["actor"] == {
            "id": OS_USER,
            "type": "human",
            "authenticated_by": "os-user",
        }
        assert paused.executed == []  # the presenter records; it runs nothing
        assert stdio.close() == 0
    assert [
        r.resolution.request_id
        for r in ThreadDriver(paused.graph, paused.authority).resume_stranded()
    ] == [request_id]
    assert ThreadDriver(paused.graph, paused.authority).resume_stranded() == []
    assert paused.executed == ["notes.txt"]


def test_events_after_the_snapshot_follow_in_sequence_order(paused: Paused) -> None:
    first = paused.pause("t1", "a.txt")
    with presenter(paused.db) as stdio:
        as_of = stdio.seen[0]["snapshot"]["as_of_sequence"]
        second = paused.pause("t2", "b.txt")
        event = stdio.read_until(lambda d: d["type"] == "approval.requested")
        assert event["request"]["id"] == second["request"]["id"]
        assert event["sequence"] > as_of and event["stream"] == DEFAULT_STREAM
        stdio.send(
            build_decision(first, decision="deny", actor={"id": "x", "type": "human"}).to_json()
        )
        stdio.read_until(lambda d: d["type"] == "approval.resolved" and not is_reply(d))
        assert stdio.close() == 0
    stream = [d for d in stdio.seen if d.get("stream") == DEFAULT_STREAM]
    sequences = [d["sequence"] for d in stream]
    assert sequences == sorted(set(sequences)) and sequences[0] == as_of
    assert [d["type"] for d in stream] == [
        "approval.snapshot",
        "approval.requested",
        "approval.decided",
        "approval.resolved",
    ]


def test_conflict_stale_and_invalid_are_reported_and_the_request_stays_answerable(
    paused: Paused,
) -> None:
    requested = paused.pause("t1")
    actor = {"id": "x", "type": "human"}
    approve = build_decision(requested, decision="approve", actor=actor).to_json()
    stale = copy.deepcopy(approve)
    stale["decision"]["action_digest"] = "sha256:" + "0" * 64
    unoffered = build_decision(requested, decision="approve", actor=actor).to_json()
    unoffered["decision"]["scope"] = "persistent"
    deny = build_decision(requested, decision="deny", actor=actor).to_json()
    with presenter(paused.db) as stdio:
        outcomes = []
        for line in (stale, unoffered, approve, approve, deny):
            stdio.send(line)
            outcomes.append(stdio.read_until(is_reply)["resolution"]["outcome"])
        assert stdio.close() == 0
    assert outcomes == ["stale", "invalid", "approved", "approved", "conflict"]
    replies = [d for d in stdio.seen if is_reply(d)]
    assert [d["sequence"] for d in replies] == [1, 2, 3, 4, 5]
    assert len({d["stream"] for d in replies}) == 1
    ThreadDriver(paused.graph, paused.authority).resume_stranded()
    assert paused.executed == ["notes.txt"]


def test_an_edit_inside_a_decision_is_refused_and_changes_nothing(paused: Paused) -> None:
    requested = paused.pause("t1")
    edited = build_decision(requested, decision="approve", actor={"id": "x", "type": "human"})
    line = edited.to_json()
    line["decision"]["arguments"] = {"path": "/etc/passwd"}
    with presenter(paused.db) as stdio:
        stdio.send(line)
        error = stdio.read_until(is_reply)["error"]
        assert error["code"] == "aais.invalid_envelope"
        assert error["pointer"] == "/decision/arguments" and "/etc" not in error["message"]
        assert stdio.close() == 0
    assert paused.authority.get_resolution(requested["request"]["id"]) is None


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_ends_the_presenter_cleanly(paused: Paused, sig: signal.Signals) -> None:
    paused.pause("t1")
    with presenter(paused.db) as stdio:
        stdio.process.send_signal(sig)
        assert stdio.process.wait(timeout=WAIT) == 0
        assert "Traceback" not in stdio.stderr()


def test_stdin_closing_with_no_decision_exits_zero(paused: Paused) -> None:
    with presenter(paused.db) as stdio:
        assert stdio.close() == 0
        assert "stdin closed" in stdio.stderr()


def test_no_ledger_is_one_line_on_stderr_and_nothing_on_stdout(tmp_path: Path) -> None:
    for target in (tmp_path / "missing.db", _empty(tmp_path / "empty.db")):
        done = subprocess.run(
            [sys.executable, "-m", "aais_langgraph.cli", "--db", str(target), "presenter"],
            input=b"",
            capture_output=True,
            timeout=WAIT,
        )
        assert done.returncode == 2
        assert done.stdout == b""
        assert done.stderr.decode().startswith("error: db:")
        assert done.stderr.count(b"\n") == 1
    assert not (tmp_path / "missing.db").exists()


def test_diagnostics_never_reach_stdout(paused: Paused) -> None:
    paused.pause("t1")
    running = PresenterProcess(paused.db)
    try:
        running.send("not json")
        assert running.close() == 0
    finally:
        running.kill()
    assert [d.get("type", "error") for d in running.seen] == ["approval.snapshot", "error"]
    assert "presenter: ready" in running.stderr()


def _empty(path: Path) -> Path:
    path.write_bytes(b"")
    return path


def test_events_compacted_before_they_were_read_bring_a_fresh_snapshot(paused: Paused) -> None:
    paused.pause("t1", "a.txt")
    output, diagnostics = io.StringIO(), io.StringIO()
    session = StdioPresenter(
        paused.authority,
        actor=Actor(id=OS_USER, type="human", authenticated_by="os-user"),
        output=output,
        diagnostics=diagnostics,
    )
    session.snapshot()
    paused.pause("t2", "b.txt")
    paused.pause("t3", "c.txt")
    ledger = paused.authority.ledger
    assert ledger.compact_events(ledger.last_sequence()) > 0
    session.follow()
    lines = [json.loads(line) for line in output.getvalue().splitlines()]
    for line in lines:
        aais.validate(line)
    assert [line["type"] for line in lines] == ["approval.snapshot", "approval.snapshot"]
    assert len(lines[1]["snapshot"]["pending"]) == 3
    assert lines[1]["sequence"] > lines[0]["sequence"]
    assert "compacted" in diagnostics.getvalue()


def test_the_presenter_works_on_a_postgres_ledger(postgres_url: str) -> None:
    with open_ledger(postgres_url) as ledger:
        authority = ApprovalAuthority(ledger)
        action = {"kind": "tool.call", "name": "t", "summary": "s", "arguments": {"n": 1}}
        requested = authority.request(action, origin={"harness": "h", "session_id": "s"})
        with presenter(postgres_url) as stdio:
            assert [r["id"] for r in stdio.seen[0]["snapshot"]["pending"]] == [requested.request.id]
            actor = {"id": "x", "type": "human"}
            stdio.send(build_decision(requested, decision="approve", actor=actor).to_json())
            assert stdio.read_until(is_reply)["resolution"]["outcome"] == "approved"
            assert stdio.close() == 0
        recorded = authority.get_resolution(requested.request.id)
        assert recorded is not None and recorded.resolution.outcome == "approved"


def test_a_reader_closing_stdout_ends_the_presenter_quietly(paused: Paused) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "aais_langgraph.cli", "--db", str(paused.db), "presenter"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert process.stdout is not None and process.stderr is not None
        assert json.loads(process.stdout.readline())["type"] == "approval.snapshot"
        process.stdout.close()
        paused.pause("t1")  # an event to write into the closed pipe
        assert process.wait(timeout=WAIT) == 0
        diagnostics = process.stderr.read().decode()
        assert "stdout closed" in diagnostics and "Traceback" not in diagnostics
        assert "Exception ignored" not in diagnostics
    finally:
        process.kill()
        process.wait(timeout=WAIT)

"""The aais-langgraph CLI end to end against a SQLite ledger while a run is paused."""

from __future__ import annotations

import io
import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, StateGraph

from aais_langgraph import ApprovalAuthority, SqliteLedger, ThreadDriver, request_approval
from aais_langgraph.cli import main

SECRETLESS_COMMAND = "ls\x1b[31m -la \u202e"
CHOICES = [
    {"decision": "approve", "scope": "once", "label": "Allow once"},
    {
        "decision": "approve",
        "scope": "session",
        "label": "Allow listing for this session",
        "scope_constraints": {"command_prefix": "ls"},
    },
    {"decision": "deny", "scope": "once", "label": "Deny"},
]


class State(TypedDict, total=False):
    command: str
    outcome: str


def run_cli(db: Path, *args: str, stdin: str = "") -> tuple[int, str]:
    out = io.StringIO()
    code = main(["--db", str(db), *args], stdin=io.StringIO(stdin), stdout=out)
    return code, out.getvalue()


@pytest.fixture
def paused(tmp_path: Path) -> Any:
    """A graph paused on two approvals (two threads) in one SQLite file."""
    db = tmp_path / "app.db"
    ledger = SqliteLedger(db)
    ledger.setup()
    authority = ApprovalAuthority(ledger)
    executed: list[str] = []

    def shell(state: State) -> State:
        action = {
            "kind": "process.exec",
            "name": "shell.exec",
            "summary": "List files",
            "arguments": {"command": state["command"]},
        }
        resolution = request_approval(action, authority=authority, choices=CHOICES)
        if resolution.approved:
            executed.append(state["command"])
        return {"outcome": resolution.resolution.outcome}

    builder = StateGraph(State)
    builder.add_node("shell", shell)
    builder.add_edge(START, "shell")
    import sqlite3

    conn = sqlite3.connect(db, check_same_thread=False)
    graph = builder.compile(checkpointer=SqliteSaver(conn))
    for thread in ("t-approve", "t-deny"):
        graph.invoke({"command": SECRETLESS_COMMAND}, {"configurable": {"thread_id": thread}})
    ids = {
        thread: graph.get_state({"configurable": {"thread_id": thread}})
        .interrupts[0]
        .value["request"]["id"]
        for thread in ("t-approve", "t-deny")
    }
    yield db, graph, authority, ids, executed
    conn.close()
    ledger.close()


def test_pending_lists_both_requests_with_escaped_summary(paused: Any) -> None:
    db, _, _, ids, _ = paused
    code, out = run_cli(db, "pending")
    assert code == 0
    assert ids["t-approve"] in out and ids["t-deny"] in out
    assert "2 pending" in out


def test_show_escapes_control_and_bidi_characters(paused: Any) -> None:
    db, _, _, ids, _ = paused
    code, out = run_cli(db, "show", ids["t-approve"])
    assert code == 0
    assert "\x1b" not in out and "\u202e" not in out
    assert "\\u001b[31m" in out and "\\u202e" in out
    assert "sha256:" in out and "status    pending" in out


def test_approve_shows_constraints_before_submitting_and_refuses_without_consent(
    paused: Any,
) -> None:
    db, _, authority, ids, _ = paused
    code, out = run_cli(db, "approve", ids["t-approve"], "--scope", "session", stdin="n\n")
    assert code == 1
    assert "will also cover" in out and "starting with 'ls'" in out
    assert "nothing submitted" in out
    assert authority.get_resolution(ids["t-approve"]) is None


def test_approve_then_server_resume_runs_the_action_once(paused: Any) -> None:
    db, graph, authority, ids, executed = paused
    code, out = run_cli(db, "approve", ids["t-approve"], "--yes")
    assert code == 0 and out.strip().endswith("approved: Approved.")
    assert executed == []  # recording a decision runs nothing by itself
    ThreadDriver(graph, authority).resume_resolved("t-approve")
    assert executed == [SECRETLESS_COMMAND]
    ThreadDriver(graph, authority).resume_resolved("t-approve")
    assert executed == [SECRETLESS_COMMAND]
    code, out = run_cli(db, "deny", ids["t-approve"], "--yes")
    assert code == 1 and "already resolved: approved" in out


def test_deny_records_denied_and_the_run_finishes_without_the_action(paused: Any) -> None:
    db, graph, authority, ids, executed = paused
    code, out = run_cli(db, "deny", ids["t-deny"], "--yes")
    assert code == 0 and "denied" in out
    ThreadDriver(graph, authority).resume_resolved("t-deny")
    assert executed == []
    state = graph.get_state({"configurable": {"thread_id": "t-deny"}})
    assert state.values["outcome"] == "denied"


def test_unoffered_scope_is_refused_and_leaves_request_pending(paused: Any) -> None:
    db, _, authority, ids, _ = paused
    code, out = run_cli(db, "approve", ids["t-approve"], "--scope", "persistent", "--yes")
    assert code == 2 and "not offered" in out
    assert authority.get_resolution(ids["t-approve"]) is None


def test_unknown_request_is_a_clear_error(paused: Any) -> None:
    db, *_ = paused
    code, out = run_cli(db, "show", "apr_missing")
    assert code == 2 and "no such approval request" in out


def test_grants_and_revoke(paused: Any) -> None:
    db, _, authority, ids, _ = paused
    run_cli(db, "approve", ids["t-approve"], "--scope", "session", "--yes")
    code, out = run_cli(db, "grants")
    assert code == 0 and "live" in out and "command_prefix" in out
    [grant] = authority.list_grants()
    assert run_cli(db, "revoke", grant.grant_id)[0] == 0
    code, out = run_cli(db, "grants")
    assert "revoked" in out
    assert run_cli(db, "revoke", grant.grant_id)[0] == 1


def test_audit_verify_and_export(paused: Any) -> None:
    db, _, _, ids, _ = paused
    run_cli(db, "deny", ids["t-deny"], "--yes")
    code, out = run_cli(db, "audit", "verify")
    assert code == 0 and out.startswith("audit ok")
    code, out = run_cli(db, "audit", "export")
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["index"] for r in records] == list(range(len(records)))
    assert {"requested", "resolved"} <= {r["kind"] for r in records}
    assert all(r["payload"] for r in records)


def test_audit_verify_fails_on_a_tampered_file(paused: Any) -> None:
    db, *_ = paused
    import sqlite3

    with sqlite3.connect(db) as conn:
        tables = [r[0] for r in conn.execute("select name from sqlite_master where type='table'")]
        audit_table = next(t for t in tables if "audit" in t and "meta" not in t)
        conn.execute(f"UPDATE {audit_table} SET kind = 'revoked' WHERE rowid = 1")
    code, out = run_cli(db, "audit", "verify")
    assert code == 1 and "FAILED" in out


def test_console_script_runs(paused: Any) -> None:
    db, *_ = paused
    done = subprocess.run(
        [sys.executable, "-m", "aais_langgraph.cli", "--db", str(db), "pending"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "2 pending" in done.stdout


def test_pending_reports_a_paused_run_whose_request_was_deleted(paused: Any) -> None:
    db, _, _, ids, _ = paused
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM aais_requests WHERE request_id = ?", (ids["t-deny"],))
    # The ledger file also holds the graph's checkpoints: the CLI reconciles with them.
    code, out = run_cli(db, "pending")
    assert code == 1
    assert ids["t-approve"] in out and "1 pending" in out
    assert f"INTEGRITY t-deny {ids['t-deny']}: paused on a request the ledger does not hold" in out


def test_pending_reconciles_with_a_separate_checkpoints_file(paused: Any, tmp_path: Path) -> None:
    db, *_ = paused
    empty = tmp_path / "fresh.db"
    assert run_cli(empty, "init")[0] == 0
    code, out = run_cli(empty, "pending", "--checkpoints", str(db))
    assert code == 1
    assert out.count("INTEGRITY ") == 2 and "0 pending" in out

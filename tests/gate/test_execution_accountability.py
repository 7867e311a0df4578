"""Execution state is accountable: the gate refuses rows the audit does not vouch for.

Each test is what someone with write access to the SQLite files can do (raw SQL on
the ledger, or copying the files back from a backup), followed by what a fresh
process does next: resume the thread. The action must never run twice, and
``audit verify`` must name what changed.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import time
from collections.abc import Iterator
from contextlib import ExitStack, closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

from aais_langgraph import (
    ApprovalAuthority,
    ApprovalRequested,
    ThreadDriver,
    build_decision,
    resume_with_decisions,
)
from aais_langgraph.gate import reconcile_execution, requires_approval
from aais_langgraph.ledger import LedgerIntegrityError, SqliteLedger, chain_hash
from hostile.report import record

HUMAN = {"id": "alice", "type": "human"}
LEASE_TTL = 0.3
KEY = b"k" * 32
CATEGORY = "execution tampering"


class State(TypedDict, total=False):
    command: str
    done: bool
    outcome: str


def deploy_action(state: State) -> dict[str, Any]:
    return {
        "kind": "process.exec",
        "name": "deploy",
        "summary": "Deploy",
        "arguments": {"command": state["command"]},
    }


@dataclass
class Process:
    """One process's view of the two files: its ledger, authority and graph."""

    authority: ApprovalAuthority
    graph: Any
    config: Any


@dataclass
class Files:
    ledger: Path
    checkpoints: Path
    runs: list[str]
    crashes: list[int]

    def raw(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        with closing(sqlite3.connect(self.ledger)) as conn, conn:
            return conn.execute(sql, params).fetchall()

    @contextmanager
    def process(self, key: bytes | None = None) -> Iterator[Process]:
        """A fresh process: new connections to both files, a new graph and authority."""
        with ExitStack() as stack:
            ledger = stack.enter_context(SqliteLedger.from_path(self.ledger))
            saver = stack.enter_context(SqliteSaver.from_conn_string(str(self.checkpoints)))
            authority = ApprovalAuthority(ledger, key=key)
            runs, crashes = self.runs, self.crashes

            @requires_approval(
                deploy_action,
                authority=authority,
                on_reject=lambda state, resolved: {"outcome": resolved.resolution.outcome},
            )
            def deploy(state: State) -> dict[str, Any]:
                runs.append("ran")
                if crashes[0]:
                    crashes[0] -= 1
                    raise RuntimeError("the process died here")
                return {"done": True, "outcome": "approved"}

            builder = StateGraph(State)
            builder.add_node("deploy", deploy)
            builder.add_edge(START, "deploy")
            builder.add_edge("deploy", END)
            graph = builder.compile(checkpointer=saver)
            yield Process(authority, graph, {"configurable": {"thread_id": "t-1"}})


@pytest.fixture
def files(tmp_path: Path) -> Files:
    return Files(tmp_path / "ledger.db", tmp_path / "checkpoints.db", [], [0])


def pause(process: Process) -> ApprovalRequested:
    [pending] = process.graph.invoke({"command": "deploy v2"}, process.config)["__interrupt__"]
    return ApprovalRequested.from_data(pending.value)


def approve_and_crash(files: Files, key: bytes | None = None) -> str:
    """Approve in a run whose action dies mid-way; the claim stays, its holder gone."""
    files.crashes[0] = 1
    with files.process(key) as process:
        requested = pause(process)
        decided = build_decision(requested, decision="approve", actor=HUMAN)
        with pytest.raises(RuntimeError, match="died"):
            resume_with_decisions(
                process.graph,
                process.config,
                [decided],
                actor=HUMAN,
                authority=process.authority,
                lease_ttl=LEASE_TTL,
            )
    time.sleep(LEASE_TTL)
    return requested.request.id


def approve_elsewhere(files: Files, key: bytes | None = None) -> str:
    """Pause, then approve outside the run (as the HTTP decisions endpoint does)."""
    with files.process(key) as process:
        requested = pause(process)
        decided = build_decision(requested, decision="approve", actor=HUMAN)
        process.authority.decide(decided)
    return requested.request.id


def resume_refused(files: Files, key: bytes | None = None) -> LedgerIntegrityError:
    """A fresh process resumes the thread: the gate must refuse, running nothing."""
    before = len(files.runs)
    with files.process(key) as process:
        with pytest.raises(LedgerIntegrityError) as raised:
            ThreadDriver(process.graph, process.authority, lease_ttl=LEASE_TTL).resume_resolved(
                "t-1"
            )
        assert len(process.graph.get_state(process.config).interrupts) == 1
    ran = len(files.runs) - before
    record(CATEGORY, 1, failed_open=int(ran > 0), double_runs=ran)
    assert ran == 0
    assert raised.value.table == "aais_executions"
    return raised.value


def verify(files: Files, key: bytes | None = None, **kwargs: Any) -> Any:
    with files.process(key) as process:
        return process.authority.verify_audit(**kwargs)


@pytest.mark.parametrize("key", [None, KEY], ids=["no-key", "key"])
def test_deleting_the_claim_after_a_crash_does_not_run_the_action_again(
    files: Files, key: bytes | None
) -> None:
    request_id = approve_and_crash(files, key)
    assert files.runs == ["ran"]
    files.raw("DELETE FROM aais_executions")

    refused = resume_refused(files, key)

    assert refused.row_id == request_id and "missing" in refused.reason
    result = verify(files, key)
    assert not result.ok and (result.table, result.row_id) == ("aais_executions", request_id)


@pytest.mark.parametrize("state", ["done", "executed"])
def test_an_edited_state_does_not_hide_an_unknown_outcome(files: Files, state: str) -> None:
    request_id = approve_and_crash(files)
    with files.process() as process, pytest.raises(Exception, match="unknown"):
        ThreadDriver(process.graph, process.authority, lease_ttl=LEASE_TTL).resume_resolved("t-1")
    files.raw("UPDATE aais_executions SET state = ?, reconciled_by = 'alice'", state)

    refused = resume_refused(files)

    assert refused.row_id == request_id and "does not match" in refused.reason
    result = verify(files)
    assert not result.ok and result.table == "aais_executions"
    assert "alice" not in (result.reason or "")


def test_an_edit_that_rewrites_the_audit_too_fails_the_seal(files: Files) -> None:
    """Without the key, the attacker rewrites the row, its entry and the chain after it:
    the chain verifies, the seal does not."""
    approve_and_crash(files, KEY)
    files.raw("UPDATE aais_executions SET state = 'executed'")
    rows = files.raw(
        "SELECT idx, kind, occurred_at, payload, prev_hash FROM aais_audit ORDER BY idx"
    )
    prev = None
    rewritten = []
    for idx, kind, occurred_at, payload, prev_hash in rows:
        body = json.loads(payload)
        if kind == "execution":
            body["state"] = "executed"
        link = prev_hash if prev is None else prev
        entry_hash = chain_hash(idx, kind, occurred_at, body, link)
        rewritten.append((json.dumps(body), link, entry_hash, idx))
        prev = entry_hash
    for payload, link, entry_hash, idx in rewritten:
        files.raw(
            "UPDATE aais_audit SET payload = ?, prev_hash = ?, entry_hash = ? WHERE idx = ?",
            payload,
            link,
            entry_hash,
            idx,
        )
    files.raw("UPDATE aais_meta SET value = ? WHERE key = 'audit_tip'", json.dumps([idx, prev]))
    assert verify(files).ok  # without the key, a consistent rewrite cannot be told apart

    refused = resume_refused(files, KEY)

    assert "seal" in refused.reason
    result = verify(files, KEY)
    assert not result.ok and "seal" in (result.reason or "")
    assert result.table in ("aais_audit", "aais_executions")  # the entry's seal, or the row's


def test_a_planted_executed_row_does_not_skip_an_approved_action(files: Files) -> None:
    request_id = approve_elsewhere(files)
    now = time.time()
    files.raw(
        "INSERT INTO aais_executions (request_id, thread_id, state, holder, attempt, "
        "started_at, live_until, updated_at) VALUES (?, 't-1', 'executed', 'x', 1, ?, ?, ?)",
        request_id,
        now,
        now,
        now,
    )

    refused = resume_refused(files)

    assert "no audit entry" in refused.reason
    result = verify(files)
    assert not result.ok and (result.table, result.row_id) == ("aais_executions", request_id)


def test_an_execution_row_for_no_request_fails_verify(files: Files) -> None:
    approve_elsewhere(files)
    with files.process() as process:  # the action runs, normally
        ThreadDriver(process.graph, process.authority, lease_ttl=LEASE_TTL).resume_resolved("t-1")
    assert verify(files).ok
    files.raw(
        "INSERT INTO aais_executions SELECT 'apr_nobody', thread_id, state, holder, attempt, "
        "started_at, live_until, updated_at, reconciled_by, mac FROM aais_executions"
    )

    result = verify(files)

    record(CATEGORY, 1, failed_open=int(result.ok))
    assert not result.ok and (result.table, result.row_id) == ("aais_executions", "apr_nobody")


def test_running_an_approved_action_moves_the_tip_so_a_restore_fails_the_kept_tip(
    files: Files, tmp_path: Path
) -> None:
    approve_elsewhere(files, KEY)
    backup = tmp_path / "backup"
    backup.mkdir()
    for path in (files.ledger, files.checkpoints):
        # Closed before the copy: a restore replaces files no connection holds open.
        with closing(sqlite3.connect(path)) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        shutil.copy(path, backup / path.name)
    before = verify(files, KEY).tip

    with files.process(KEY) as process:
        ThreadDriver(process.graph, process.authority, lease_ttl=LEASE_TTL).resume_resolved("t-1")
    kept = verify(files, KEY).tip  # the tip the operator keeps elsewhere after the run
    assert files.runs == ["ran"]
    assert kept is not None and before is not None and kept[0] > before[0]

    for path in (files.ledger, files.checkpoints):  # an ordinary whole-database restore
        for suffix in ("-wal", "-shm"):
            Path(str(path) + suffix).unlink(missing_ok=True)
        shutil.copy(backup / path.name, path)

    assert verify(files, KEY).ok  # the restored files are consistent on their own
    result = verify(files, KEY, expected_tip=kept)
    record("rollback", 1, failed_open=int(result.ok))
    assert not result.ok and "truncated" in (result.reason or "")


def test_a_reconcile_is_an_audit_entry_naming_its_actor(files: Files) -> None:
    request_id = approve_and_crash(files, KEY)
    with files.process(KEY) as process:
        settled = reconcile_execution(process.authority, request_id, "done", actor="ops-alice")
        assert settled is not None
        [entry] = process.authority.ledger.audit_entries(
            after_index=process.authority.ledger.audit_tip()[0] - 1
        )
        assert entry.kind == "execution"
        assert (entry.payload["state"], entry.payload["reconciled_by"]) == ("done", "ops-alice")
        [replayed] = ThreadDriver(
            process.graph, process.authority, lease_ttl=LEASE_TTL
        ).resume_resolved("t-1")
        assert replayed.approved  # the recorded resolution; the gate did not run it
        assert process.graph.get_state(process.config).values["outcome"] == "conflict"
    assert files.runs == ["ran"]
    assert verify(files, KEY).ok

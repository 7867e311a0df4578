"""`aais-langgraph unknown` and `reconcile`: a human settles an action of unknown outcome."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from aais_langgraph import ApprovalAuthority, SqliteLedger, build_decision
from aais_langgraph.cli import main
from aais_langgraph.ledger.executions import claim_change

HUMAN = {"id": "alice", "type": "human"}


def run_cli(db: Path, *args: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(["--db", str(db), *args], stdin=io.StringIO(""), stdout=out)
    return code, out.getvalue()


@pytest.fixture
def unknown(tmp_path: Path) -> tuple[Path, str]:
    """A ledger holding an approved request whose executing run died (its outcome unknown)."""
    db = tmp_path / "app.db"
    with SqliteLedger.from_path(db) as ledger:
        ledger.setup()
        authority = ApprovalAuthority(ledger)
        requested = authority.request(
            {
                "kind": "process.exec",
                "name": "deploy",
                "summary": "Deploy\x1b[31m v2",
                "arguments": {"command": "deploy v2"},
            },
            origin={"harness": "test", "session_id": "s1"},
            thread_id="t-1",
        )
        request_id = requested.request.id
        authority.decide(build_decision(requested, decision="approve", actor=HUMAN), actor=HUMAN)
        for holder, now in (("dead_run", 0.0), ("recovery", 100.0)):  # the second finds it dead
            ledger.update_execution(
                request_id,
                claim_change(request_id, holder, thread_id="t-1", ttl=1, now=now, retry=False),
            )
    return db, request_id


def test_unknown_outcomes_are_listed_and_counted_by_pending(unknown: tuple[Path, str]) -> None:
    db, request_id = unknown

    code, listed = run_cli(db, "unknown")
    assert code == 0 and request_id in listed and "1 outcome unknown" in listed
    assert "\x1b" not in listed and "\\u001b" in listed  # escaped, as every summary
    code, pending = run_cli(db, "pending")
    assert code == 0 and "0 pending" in pending and "1 approved with outcome unknown" in pending
    code, shown = run_cli(db, "show", request_id)
    assert "status    approved" in shown and "execution unknown" in shown


@pytest.mark.parametrize("flag", ["--done", "--retry"])
def test_reconcile_settles_it_once(unknown: tuple[Path, str], flag: str) -> None:
    db, request_id = unknown

    code, said = run_cli(db, "reconcile", request_id, flag)
    assert code == 0 and said.startswith(flag[2:] + ":")
    code, again = run_cli(db, "reconcile", request_id, flag)
    assert code == 1 and "nothing to reconcile" in again
    assert "0 outcome unknown" in run_cli(db, "unknown")[1]
    with SqliteLedger.from_path(db) as ledger:
        record = ledger.execution_with_entry(request_id)[0]
        assert record is not None and record.state == flag[2:] and record.reconciled_by


def test_reconcile_needs_exactly_one_of_done_and_retry(unknown: tuple[Path, str]) -> None:
    db, request_id = unknown
    with pytest.raises(SystemExit):
        run_cli(db, "reconcile", request_id)
    with pytest.raises(SystemExit):
        run_cli(db, "reconcile", request_id, "--done", "--retry")

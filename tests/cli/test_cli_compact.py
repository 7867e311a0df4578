"""``aais-langgraph compact``: old resolved requests go; ``audit verify`` names the range."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from aais_langgraph import ApprovalAuthority, SqliteLedger, build_decision
from aais_langgraph.cli import main

ACTION = {"kind": "process.exec", "name": "shell.exec", "summary": "ls", "arguments": {"n": 1}}
ACTOR = {"id": "alice", "type": "human"}


def run_cli(db: Path, *args: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(["--db", str(db), *args], stdin=io.StringIO(""), stdout=out)
    return code, out.getvalue()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """Three approved requests and one pending."""
    path = tmp_path / "ledger.db"
    with SqliteLedger.from_path(path) as ledger:
        authority = ApprovalAuthority(ledger)
        for number in range(4):
            requested = authority.request(ACTION, origin={"harness": "t", "session_id": "s-1"})
            if number < 3:
                authority.decide(build_decision(requested, decision="approve", actor=ACTOR))
    return path


def test_compact_keeps_the_last_and_verify_reports_the_compacted_range(db: Path) -> None:
    code, out = run_cli(db, "compact", "--keep-last", "1")

    assert code == 0
    assert out.startswith("compacted: 2 requests, ")
    code, out = run_cli(db, "audit", "verify")
    assert code == 0, out
    assert out.startswith("audit ok: ") and "compacted)" in out
    code, out = run_cli(db, "pending")
    assert out.splitlines()[-1] == "1 pending"


def test_compact_with_nothing_to_remove_says_so(db: Path) -> None:
    assert run_cli(db, "compact", "--keep-days", "30") == (0, "nothing to compact\n")


def test_compact_needs_a_policy(db: Path) -> None:
    assert run_cli(db, "compact") == (2, "error: compact: give --keep-days N or --keep-last N\n")


def test_compact_refuses_a_negative_count(db: Path) -> None:
    with pytest.raises(SystemExit) as exited:
        run_cli(db, "compact", "--keep-last", "-1")
    assert exited.value.code == 2


def test_a_tip_witnessed_before_a_witnessed_compaction_still_checks(
    db: Path, tmp_path: Path
) -> None:
    witness = tmp_path / "witness.jsonl"
    assert run_cli(db, "audit", "publish", "--witness", str(witness))[0] == 0
    code, out = run_cli(db, "compact", "--keep-last", "0", "--witness", str(witness))
    assert code == 0 and "published the compaction to 1 witness(es)" in out

    code, out = run_cli(db, "audit", "verify", "--witness", str(witness))

    assert code == 0, out
    assert "unchanged" in out and "compacted as witnessed" in out


def test_a_compaction_nobody_witnessed_does_not_account_for_a_witnessed_tip(
    db: Path, tmp_path: Path
) -> None:
    witness = tmp_path / "witness.jsonl"
    assert run_cli(db, "audit", "publish", "--witness", str(witness))[0] == 0
    assert run_cli(db, "compact", "--keep-last", "0")[0] == 0

    code, out = run_cli(db, "audit", "verify", "--witness", str(witness))

    assert code == 1, out
    assert "no witnessed compaction removed it" in out

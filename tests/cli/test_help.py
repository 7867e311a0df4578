"""``aais-langgraph --help`` reads as plain text and says that answering asks y/N."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from aais_langgraph import ApprovalAuthority, SqliteLedger
from aais_langgraph.cli import main


def help_text(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "aais_langgraph.cli", *args, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout


def test_the_help_has_no_markup_and_says_answers_are_confirmed() -> None:
    text = help_text()
    assert "``" not in text and ":func:" not in text
    assert "y/N" in text and "--yes" in text
    approve = " ".join(help_text("approve").split())
    assert "ask y/N" in approve and "submits nothing" in approve


@pytest.mark.parametrize("answer", ["\n", "", "no\n"])
def test_approve_without_a_yes_submits_nothing_and_the_approval_stays(
    answer: str, tmp_path: Path
) -> None:
    db = tmp_path / "app.db"
    authority = ApprovalAuthority(SqliteLedger(db))
    action = {"kind": "fs.delete", "name": "rm", "summary": "Delete", "arguments": {"p": "/x"}}
    requested = authority.request(action, origin={"harness": "tests", "session_id": "s1"})
    out = io.StringIO()
    status = main(
        ["--db", str(db), "approve", requested.request.id], stdin=io.StringIO(answer), stdout=out
    )
    assert status == 1
    assert f"approve {requested.request.id} as once? [y/N] nothing submitted" in out.getvalue()
    assert authority.get_resolution(requested.request.id) is None

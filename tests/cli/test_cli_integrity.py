"""The CLI on files that are not (or no longer) a trustworthy ledger: one clear line, non-zero.

Zero-byte, text, foreign, truncated and missing files; a tip kept elsewhere that
catches a rolled-back or emptied ledger; tampered rows named by table and id.
"""

from __future__ import annotations

import io
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from aais_langgraph import ApprovalAuthority, SqliteLedger, build_decision
from aais_langgraph.cli import main

ACTION = {
    "kind": "process.exec",
    "name": "shell.exec",
    "summary": "List files",
    "arguments": {"command": "ls"},
}
ACTOR = {"id": "alice", "type": "human"}


def run_cli(db: Path, *args: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(["--db", str(db), *args], stdin=io.StringIO(""), stdout=out)
    return code, out.getvalue()


def one_error_line(out: str) -> str:
    lines = out.splitlines()
    assert len(lines) == 1, out
    assert lines[0].startswith("error: "), out
    assert "Traceback" not in out
    return lines[0]


def history(db: Path, count: int = 3) -> list[str]:
    """A ledger with ``count`` requests, all but the last approved."""
    ids = []
    with SqliteLedger.from_path(db) as ledger:
        ledger.setup()
        authority = ApprovalAuthority(ledger)
        for i in range(count):
            requested = authority.request(
                {**ACTION, "arguments": {"command": f"ls {i}"}},
                origin={"harness": "cli-test", "session_id": "s-1"},
            )
            if i < count - 1:
                authority.decide(build_decision(requested, decision="approve", actor=ACTOR))
            ids.append(requested.request.id)
    return ids


@pytest.mark.parametrize("command", [["pending"], ["audit", "verify"], ["grants"]])
def test_a_zero_byte_file_is_not_an_empty_ledger(tmp_path: Path, command: list[str]) -> None:
    db = tmp_path / "ledger.db"
    db.write_bytes(b"")
    code, out = run_cli(db, *command)
    assert code == 2
    assert "no aais ledger" in one_error_line(out)
    assert db.read_bytes() == b""  # nothing was created in it


def test_a_text_file_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "notes.txt"
    db.write_text("these are my notes, not a database\n" * 200)
    code, out = run_cli(db, "pending")
    assert code == 2
    assert "not a SQLite database" in one_error_line(out)


def test_another_applications_sqlite_database_is_refused_and_left_alone(tmp_path: Path) -> None:
    db = tmp_path / "app.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    code, out = run_cli(db, "audit", "verify")
    assert code == 2
    assert "no aais ledger" in one_error_line(out)
    with sqlite3.connect(db) as conn:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    assert tables == {"users"}


def test_a_truncated_ledger_file_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    history(db, count=40)
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 2])
    for command in (["pending"], ["audit", "verify"]):
        code, out = run_cli(db, *command)
        assert code != 0
        one_error_line(out)


def test_a_missing_file_is_not_created_by_a_read_command(tmp_path: Path) -> None:
    db = tmp_path / "typo.db"
    code, out = run_cli(db, "pending")
    assert code == 2
    assert "init" in one_error_line(out)
    assert not db.exists()
    assert run_cli(db, "init") == (0, "ledger ready\n")
    assert run_cli(db, "pending") == (0, "0 pending\n")


def test_no_traceback_reaches_the_terminal(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    db.write_bytes(b"")
    completed = subprocess.run(
        [sys.executable, "-m", "aais_langgraph.cli", "--db", str(db), "pending"],
        capture_output=True,
        text=True,
        env={**os.environ},
        check=False,
    )
    assert completed.returncode == 2
    assert completed.stderr == ""
    one_error_line(completed.stdout)


def verified_tip(db: Path) -> str:
    code, out = run_cli(db, "audit", "verify")
    assert code == 0, out
    line = out.strip()
    assert line.startswith("audit ok: ") and " tip " in line
    return line.rsplit(" tip ", 1)[1]


def test_verify_prints_the_tip_and_accepts_it_back(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    history(db)
    tip = verified_tip(db)
    index, entry_hash = tip.split(":", 1)
    assert int(index) > 0 and entry_hash.startswith("sha256:")
    code, out = run_cli(db, "audit", "verify", "--expect-tip", tip)
    assert code == 0, out
    history(db, count=1)  # the ledger may grow past a kept tip
    assert run_cli(db, "audit", "verify", "--expect-tip", tip)[0] == 0


def test_expect_tip_catches_a_rolled_back_ledger(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    history(db)
    tip = verified_tip(db)
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT idx, entry_hash FROM aais_audit ORDER BY idx").fetchall()
        keep_index, keep_hash = rows[-3]
        conn.execute("DELETE FROM aais_audit WHERE idx > ?", (keep_index,))
        conn.execute(
            "UPDATE aais_meta SET value = ? WHERE key = 'audit_tip'",
            (json.dumps([keep_index, keep_hash]),),
        )
        # Roll the rows back too, so only the kept tip can tell.
        last = conn.execute(
            "SELECT request_id FROM aais_requests ORDER BY sequence DESC"
        ).fetchone()
        conn.execute("DELETE FROM aais_requests WHERE request_id = ?", last)
        conn.execute(
            "DELETE FROM aais_events WHERE sequence > (SELECT MAX(sequence) FROM aais_requests)"
        )
        penultimate = conn.execute(
            "SELECT request_id FROM aais_requests ORDER BY sequence DESC"
        ).fetchone()
        conn.execute("DELETE FROM aais_resolutions WHERE request_id = ?", penultimate)
        conn.execute(
            "UPDATE aais_requests SET status = 'pending' WHERE request_id = ?", penultimate
        )
    code, out = run_cli(db, "audit", "verify", "--expect-tip", tip)
    assert code == 1
    assert "truncated" in out and "aais_audit" in out


def test_expect_tip_catches_an_emptied_ledger(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    history(db)
    tip = verified_tip(db)
    with sqlite3.connect(db) as conn:
        for table in (
            "aais_audit",
            "aais_requests",
            "aais_resolutions",
            "aais_grants",
            "aais_events",
        ):
            conn.execute(f"DELETE FROM {table}")
        conn.execute("DELETE FROM aais_meta WHERE key = 'audit_tip'")
    assert run_cli(db, "audit", "verify")[0] == 0  # nothing left to contradict anything
    code, out = run_cli(db, "audit", "verify", "--expect-tip", tip)
    assert code == 1 and "FAILED" in out


def test_a_malformed_expected_tip_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "ledger.db"
    history(db)
    with pytest.raises(SystemExit) as exited:
        run_cli(db, "audit", "verify", "--expect-tip", "twelve")
    assert exited.value.code == 2
    assert "--expect-tip" in capsys.readouterr().err


def test_verify_names_a_tampered_row_by_table_and_id(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    approved, *_ = history(db)
    with sqlite3.connect(db) as conn:
        conn.execute(
            "UPDATE aais_resolutions SET envelope = replace(envelope, 'Approved.', 'Denied.') "
            "WHERE request_id = ?",
            (approved,),
        )
    code, out = run_cli(db, "audit", "verify")
    assert code == 1
    assert out.startswith(f"audit FAILED at aais_resolutions {approved}: ")


def test_show_of_a_tampered_request_is_one_integrity_line(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    *_, pending = history(db)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE aais_requests SET envelope = replace(envelope, 'ls 2', 'ls 9')")
    code, out = run_cli(db, "show", pending)
    assert code == 1
    assert "ledger integrity" in one_error_line(out)


def test_a_postgres_database_without_a_ledger_is_refused_until_init(postgres_url: str) -> None:
    out = io.StringIO()
    code = main(["--db", postgres_url, "pending"], stdin=io.StringIO(""), stdout=out)
    assert code == 2
    assert "no aais ledger" in one_error_line(out.getvalue())
    out = io.StringIO()
    assert main(["--db", postgres_url, "init"], stdin=io.StringIO(""), stdout=out) == 0
    out = io.StringIO()
    assert main(["--db", postgres_url, "pending"], stdin=io.StringIO(""), stdout=out) == 0
    assert out.getvalue() == "0 pending\n"

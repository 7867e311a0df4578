"""``aais-langgraph audit export | head``: a reader that stops early ends the command quietly."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from aais_langgraph import ApprovalAuthority, SqliteLedger


def test_export_into_a_reader_that_stops_early_ends_without_a_traceback(tmp_path: Path) -> None:
    db = tmp_path / "app.db"
    authority = ApprovalAuthority(SqliteLedger(db))
    for number in range(400):  # ~300 KB, well past a pipe buffer: the export outlives its reader
        action = {
            "kind": "fs.delete",
            "name": "rm",
            "summary": "Delete",
            "arguments": {"n": number},
        }
        authority.request(action, origin={"harness": "tests", "session_id": f"s{number}"})
    authority.ledger.close()
    command = [sys.executable, "-m", "aais_langgraph.cli", "--db", str(db), "audit", "export"]
    export = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    assert export.stdout is not None and export.stderr is not None
    first = export.stdout.readline()
    export.stdout.close()  # what head does after its lines
    errors = export.stderr.read().decode()
    status = export.wait(timeout=60)
    assert first.startswith(b'{"hash": ')
    assert errors == ""
    assert status == 141  # as a Unix tool killed by SIGPIPE reports it

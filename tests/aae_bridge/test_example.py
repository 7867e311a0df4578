"""examples/aae/write_note.py runs: it waits for a human, the CLI approves, the note is written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "aae" / "write_note.py"
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}


def test_the_example_waits_for_the_cli_and_writes_once(tmp_path: Path) -> None:
    db, note = tmp_path / "aae.db", tmp_path / "note.txt"
    example = subprocess.Popen(
        [sys.executable, str(EXAMPLE), "--db", str(db), str(note), "hi"],
        cwd=tmp_path,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert example.stdout is not None
        first = example.stdout.readline()
        assert first.startswith("waiting for approval "), (
            example.stderr.read() if example.stderr else ""
        )
        request_id = first.split()[-1]
        example.stdout.readline()  # the approve hint
        approved = subprocess.run(
            [
                sys.executable,
                "-m",
                "aais_langgraph.cli",
                "--db",
                str(db),
                "approve",
                request_id,
                "--yes",
            ],
            env=ENV,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert approved.returncode == 0, approved.stdout + approved.stderr
        out, err = example.communicate(timeout=120)
    finally:
        if example.poll() is None:
            example.kill()
    assert example.returncode == 0, err
    assert out.startswith("granted: [{'bytes': 3}]")
    assert note.read_text() == "hi\n"
    reattached = subprocess.run(
        [sys.executable, str(EXAMPLE), "--db", str(db), "--reattach", request_id],
        cwd=tmp_path,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert reattached.returncode == 1, reattached.stderr
    assert reattached.stdout == "not executed: ApprovalAlreadyUsedError\n"
    assert note.read_text() == "hi\n"

"""A hostile-input row that is not 0 fails the test run, though every test passed.

Each case runs pytest, in a process of its own, on one test that records one row
(``tests/support/hostile_row_example.py``), and reads the run's exit status: what CI
sees. Running one file is itself a partial run: only what it recorded is judged.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .report import DOUBLE_RUNS_EXPECTED

pytestmark = pytest.mark.slow  # a pytest process per case

ROOT = Path(__file__).resolve().parents[2]
(IDEMPOTENT,) = DOUBLE_RUNS_EXPECTED


def run_recording(tmp_path: Path, category: str, counts: str) -> subprocess.CompletedProcess[str]:
    """pytest on the example test, recording ``counts`` (tried, failed open, 5xx, double
    runs) into ``category``; its table's JSON goes to ``tmp_path``."""
    env = {
        **os.environ,
        "AAIS_GATE_CATEGORY": category,
        "AAIS_GATE_COUNTS": counts,
        "AAIS_HOSTILE_REPORT": str(tmp_path / "report.json"),
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",  # the example needs none: a quick start
    }
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    return subprocess.run(
        [*command, "tests/support/hostile_row_example.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_run_whose_rows_are_0_passes(tmp_path: Path) -> None:
    ran = run_recording(tmp_path, "gate", "3,0,0,0")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "| gate | 3 | 0 | 0 | 0 |" in ran.stdout
    assert (tmp_path / "report.json").exists()


@pytest.mark.parametrize(
    ("counts", "named"),
    [("3,1,0,0", "1 failed open"), ("3,0,1,0", "1 5xx"), ("3,0,0,2", "2 double runs")],
    ids=["failed-open", "5xx", "double-runs"],
)
def test_a_row_that_is_not_0_fails_the_run_that_passed(
    tmp_path: Path, counts: str, named: str
) -> None:
    ran = run_recording(tmp_path, "gate", counts)
    assert ran.returncode == pytest.ExitCode.TESTS_FAILED, ran.stdout + ran.stderr
    assert "1 passed" in ran.stdout
    assert f"FAILED hostile-input row: gate: {named}" in ran.stdout


def test_the_opt_in_idempotent_retry_may_run_twice(tmp_path: Path) -> None:
    ran = run_recording(tmp_path, IDEMPOTENT, "2,0,0,2")
    assert ran.returncode == 0, ran.stdout + ran.stderr


def test_the_opt_in_idempotent_retry_may_not_fail_open(tmp_path: Path) -> None:
    ran = run_recording(tmp_path, IDEMPOTENT, "2,1,0,2")
    assert ran.returncode == pytest.ExitCode.TESTS_FAILED, ran.stdout + ran.stderr
    assert f"FAILED hostile-input row: {IDEMPOTENT}: 1 failed open" in ran.stdout

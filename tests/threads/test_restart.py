"""Resume after a restart: a new process finds the pending approval and runs the action once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from aais_langgraph.protocol import ApprovalRequested
from gate.support import decide

ROOT = Path(__file__).resolve().parents[2]


def run_worker(job: dict[str, Any]) -> Any:
    done = subprocess.run(
        [sys.executable, "-m", "tests.gate.worker"],
        input=json.dumps(job) + "\n",
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=True,
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert "ok" in result, result
    return result["ok"]


def effect_lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def test_a_fresh_process_resumes_the_run_and_the_action_runs_exactly_once(
    tmp_path: Path,
) -> None:
    job = {"db": str(tmp_path / "run.db"), "effects": str(tmp_path / "effects.txt")}
    job["thread"] = "t-restart"

    # Process 1 starts the run and exits at the interrupt.
    [started] = run_worker({**job, "mode": "start", "command": "ls -la"})
    requested = ApprovalRequested.from_data(started["value"])
    assert effect_lines(tmp_path / "effects.txt") == []

    # Process 2 builds the graph again, finds the approval, and resumes with a decision.
    assert run_worker({**job, "mode": "list"}) == [requested.request.id]
    decided = decide(requested).to_json()
    assert run_worker({**job, "mode": "resume", "decisions": [decided]}) == ["approved"]
    assert effect_lines(tmp_path / "effects.txt") == ["ls -la"]

    # Process 3 resuming again changes nothing.
    denied = decide(requested, "deny").to_json()
    outcomes = run_worker({**job, "mode": "resume", "decisions": [decided, denied]})
    assert outcomes == ["approved", "conflict"]
    assert run_worker(
        {**job, "mode": "raw", "interrupt_id": started["interrupt_id"], "answer": decided}
    ) == {"outcome": "approved", "paused": False}
    assert run_worker({**job, "mode": "list"}) == []
    assert effect_lines(tmp_path / "effects.txt") == ["ls -la"]

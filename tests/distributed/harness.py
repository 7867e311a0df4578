"""Worker processes, crash markers and ledger/effect read-outs for tests/distributed.

Every wait is bounded; every process started here is killed (SIGKILL) when the
test ends, whatever happened.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aais_langgraph import ApprovalRequested, build_decision
from aais_langgraph.protocol import ApprovalDecided

from . import worker

ROOT = Path(__file__).resolve().parents[2]
MARKER_TIMEOUT = 30.0


@dataclass
class Scene:
    """One backend (SQLite file or Postgres schema) and the files one scenario writes."""

    db: str
    folder: Path
    thread: str = "t-1"
    options: dict[str, Any] = field(default_factory=dict)
    """Job fields every worker and replica of this scene shares (e.g. ``node``)."""
    processes: list[subprocess.Popen[str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        for name in ("keyed", "markers"):
            (self.folder / name).mkdir(exist_ok=True)

    @property
    def kind(self) -> str:
        return "postgres" if worker.is_postgres(self.db) else "sqlite"

    def job(self, **fields: Any) -> dict[str, Any]:
        return {
            "db": self.db,
            "effects": str(self.folder / "effects.log"),
            "keyed": str(self.folder / "keyed"),
            "markers": str(self.folder / "markers"),
            "thread": self.thread,
            "command": "deploy",
            **self.options,
            **fields,
        }

    # -- processes ---------------------------------------------------------------------

    def spawn(self, **fields: Any) -> subprocess.Popen[str]:
        """A worker process with its job written to stdin; killed at the end of the test."""
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.distributed.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        self.processes.append(process)
        assert process.stdin is not None
        process.stdin.write(json.dumps(self.job(**fields)) + "\n")
        process.stdin.flush()
        return process

    def wait_marker(self, point: str, process: subprocess.Popen[str]) -> float:
        """Wait until the worker reached its crash point; the time it wrote there."""
        marker = self.folder / "markers" / point
        deadline = time.monotonic() + MARKER_TIMEOUT
        while not marker.exists() or not marker.read_text():
            if process.poll() is not None:
                raise AssertionError(f"worker exited before {point}: {finish(process)}")
            if time.monotonic() > deadline:
                raise AssertionError(f"worker did not reach {point} in {MARKER_TIMEOUT} s")
            time.sleep(0.01)
        return float(marker.read_text())

    def crash(self, point: str, **fields: Any) -> float:
        """Start a worker that stops at ``point``, kill -9 it there; the kill's wall time."""
        process = self.spawn(crash_at=point, **fields)
        self.wait_marker(point, process)
        kill9(process)
        return time.time()

    def kill_all(self) -> None:
        for process in self.processes:
            kill9(process)

    # -- this process as a replica -------------------------------------------------------

    @contextmanager
    def replica(self, *, setup: bool = False) -> Iterator[tuple[Any, worker.Backend]]:
        """The same graph served from this process (a restarted or surviving replica)."""
        with worker.open_backend(self.db, setup=setup) as backend:
            yield worker.build(self.job(), backend), backend

    def start_paused(self) -> tuple[str, ApprovalRequested]:
        """Run the graph to its interrupt here; the interrupt id and the request."""
        with self.replica(setup=True) as (graph, backend):
            [started] = worker.act(self.job(mode="start"), graph, backend)
        return started["interrupt_id"], ApprovalRequested.from_data(started["value"])

    # -- read-outs -------------------------------------------------------------------

    def effects(self) -> list[str]:
        """Lines the non-idempotent effect wrote (one per execution of the action)."""
        path = self.folder / "effects.log"
        return path.read_text(encoding="utf-8").splitlines() if path.exists() else []

    def keyed(self) -> list[str]:
        """Idempotency keys the idempotent effect applied (one per request, at most)."""
        return sorted(os.listdir(self.folder / "keyed"))

    def resolutions(self, request_id: str) -> list[dict[str, Any]]:
        """Every ``approval.resolved`` the ledger recorded for ``request_id``."""
        with self.replica() as (_, backend):
            events = backend.authority.events_after(0).events
        return [
            event
            for event in events
            if event["type"] == "approval.resolved"
            and event["resolution"]["request_id"] == request_id
        ]


def decide(requested: ApprovalRequested, kind: str = "approve") -> ApprovalDecided:
    return build_decision(requested, decision=kind, scope="once", actor=worker.HUMAN)  # type: ignore[arg-type]


def kill9(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        os.kill(process.pid, signal.SIGKILL)
    with suppress(subprocess.TimeoutExpired, ValueError):
        process.communicate(timeout=10)


def finish(process: subprocess.Popen[str], timeout: float = 60.0) -> Any:
    """Wait for a worker's one-line JSON result (stderr in the assertion when it fails)."""
    out, err = process.communicate(timeout=timeout)
    lines = [line for line in out.splitlines() if line.strip() and line.strip() != "ready"]
    assert process.returncode == 0 and lines, f"worker failed ({process.returncode}):\n{err}"
    return json.loads(lines[-1])


def release(processes: list[subprocess.Popen[str]], timeout: float = 60.0) -> None:
    """Wait until every worker printed ``ready``, then send all of them ``go``."""
    deadline = time.monotonic() + timeout
    for process in processes:
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        assert line == "ready", (line, process.stderr.read() if process.stderr else "")
        assert time.monotonic() < deadline
    for process in processes:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()

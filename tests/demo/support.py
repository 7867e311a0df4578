"""Run ``aais-agui`` and ``aais-langgraph`` as real processes; talk to the server over HTTP."""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
JSON_HEADERS = {"content-type": "application/json"}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Server:
    """One ``aais-agui`` process; ``url`` is read from the line it prints once listening."""

    def __init__(
        self,
        args: list[str],
        *,
        cwd: Path,
        command: list[str] | None = None,
        env: dict[str, str] | None = None,
        timeout: float = 60.0,
    ) -> None:
        self.args = args
        program = command or [sys.executable, "-m", "aais_agui.cli"]
        self.process = subprocess.Popen(
            [*program, *args],
            cwd=cwd,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.output: list[str] = []
        self.errors: list[str] = []
        lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, args=(self.process.stdout, lines), daemon=True).start()
        threading.Thread(target=self._drain, args=(self.process.stderr,), daemon=True).start()
        deadline = time.monotonic() + timeout
        self.url = ""
        while not self.url:
            try:
                line = lines.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                line = None
            if line is None:
                self.stop()
                raise RuntimeError(f"aais-agui did not start:\n{self.log()}")
            if "serving on " in line:
                self.url = line.split("serving on ", 1)[1].strip()

    def _pump(self, stream: Any, lines: queue.Queue[str | None]) -> None:
        for line in stream:
            self.output.append(line)
            lines.put(line)
        lines.put(None)

    def _drain(self, stream: Any) -> None:
        for line in stream:
            self.errors.append(line)

    def log(self) -> str:
        return "".join(self.output) + "".join(self.errors)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)


@contextmanager
def running(args: list[str], *, cwd: Path = ROOT, **options: Any) -> Iterator[Server]:
    """An ``aais-agui`` process for the block (see :class:`Server`)."""
    server = Server(args, cwd=cwd, **options)
    try:
        yield server
    finally:
        server.stop()


def agui_run(client: httpx.Client, body: dict[str, Any]) -> list[dict[str, Any]]:
    """POST one AG-UI run to ``/agent``; returns its events."""
    events = []
    with client.stream("POST", "/agent", json=body, headers=JSON_HEADERS) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if line.startswith("data:"):
                events.append(json.loads(line[5:]))
    return events


def interrupts_of(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The interrupts of the run's ``RUN_FINISHED`` outcome (empty when it finished)."""
    finished = [event for event in events if event["type"] == "RUN_FINISHED"]
    assert finished, f"the run did not finish: {[event['type'] for event in events]}"
    outcome = finished[-1].get("outcome") or {}
    return list(outcome.get("interrupts") or []) if outcome.get("type") == "interrupt" else []


def wait_for(
    probe: Callable[[], Any], *, timeout: float = 30.0, interval: float = 0.2, what: str = ""
) -> Any:
    """Poll ``probe`` until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or probe}")
        time.sleep(interval)


def thread_view(client: httpx.Client, thread_id: str) -> dict[str, Any]:
    """The inbox's view of a thread: messages, open interrupts, settled."""
    response = client.get(f"/inbox/threads/{thread_id}")
    response.raise_for_status()
    view: dict[str, Any] = response.json()
    return view


def finished(client: httpx.Client, thread_id: str) -> dict[str, Any] | None:
    """The thread's view once its run finished with no approval left open, else None."""
    view = thread_view(client, thread_id)
    return view if view["settled"] and not view["interrupts"] else None


def ledger_cli(db: Path | str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``aais-langgraph --db DB ...`` in its own process."""
    return subprocess.run(
        [sys.executable, "-m", "aais_langgraph.cli", "--db", str(db), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def executed(workspace: Path) -> list[dict[str, Any]]:
    """What the demo tools actually executed, from the workspace's ``actions.jsonl``."""
    log = workspace / "actions.jsonl"
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]

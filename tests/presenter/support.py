"""The stdio presenter as a subprocess: NDJSON lines in and out through pipes, bounded waits."""

from __future__ import annotations

import getpass
import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import aais

from aais_langgraph.authority import DEFAULT_STREAM
from aais_langgraph.protocol import id_for

WAIT = 30.0
OS_USER = id_for(getpass.getuser() or "unknown")
ERROR_KEYS = {"code", "pointer", "message", "line"}


class PresenterProcess:
    """``aais-langgraph --db DB presenter`` with a reader thread on its stdout."""

    def __init__(self, db: str | Path, *extra: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "aais_langgraph.cli", "--db", str(db), "presenter", *extra],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        self._diagnostics: list[bytes] = []
        threading.Thread(target=self._pump, daemon=True).start()
        self._stderr_pump = threading.Thread(target=self._pump_stderr, daemon=True)
        self._stderr_pump.start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(b"")

    def _pump_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self._diagnostics.append(line)

    def read(self, timeout: float = WAIT) -> dict[str, Any]:
        """The next stdout line: a valid AAIS envelope or a well-formed error object."""
        raw = self.lines.get(timeout=timeout)
        assert raw.endswith(b"\n") and raw.isascii(), raw[:200]
        document: dict[str, Any] = json.loads(raw)
        check_line(document)
        self.seen.append(document)
        return document

    def read_until(self, wanted: Any, timeout: float = WAIT) -> dict[str, Any]:
        """Read lines until one satisfies ``wanted(document)``."""
        while True:
            document = self.read(timeout)
            if wanted(document):
                return document

    def send(self, line: bytes | str | dict[str, Any]) -> None:
        """Write one line (a dict is encoded as JSON) and flush."""
        assert self.process.stdin is not None
        if isinstance(line, dict):
            line = json.dumps(line)
        data = line.encode("utf-8", "surrogatepass") if isinstance(line, str) else line
        self.process.stdin.write(data + b"\n")
        self.process.stdin.flush()

    def close(self, timeout: float = WAIT) -> int:
        """Close stdin, read what is left, and return the exit status."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        code = self.process.wait(timeout=timeout)
        while True:
            raw = self.lines.get(timeout=timeout)
            if raw == b"":
                return code
            document = json.loads(raw)
            check_line(document)
            self.seen.append(document)

    def stderr(self) -> str:
        """Everything written to stderr, once the process has ended."""
        self.process.wait(timeout=WAIT)
        self._stderr_pump.join(timeout=WAIT)
        return b"".join(self._diagnostics).decode()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=WAIT)


def check_line(document: dict[str, Any]) -> None:
    """Every line is an AAIS envelope the reference library accepts, or an error object."""
    if "error" in document:
        assert set(document) == {"error"} and set(document["error"]) == ERROR_KEYS, document
        return
    aais.validate(document)
    assert isinstance(document.get("stream"), str), document


@contextmanager
def presenter(db: str | Path, *extra: str) -> Iterator[PresenterProcess]:
    """A presenter whose first line (the snapshot) has been read; killed if a test fails."""
    running = PresenterProcess(db, *extra)
    try:
        first = running.read()
        assert first["type"] == "approval.snapshot" and first["stream"] == DEFAULT_STREAM
        yield running
    finally:
        running.kill()


def is_reply(document: dict[str, Any]) -> bool:
    """A line answering a decision: an error object or a resolution on the reply stream."""
    return "error" in document or document.get("stream", DEFAULT_STREAM) != DEFAULT_STREAM

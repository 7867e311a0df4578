"""docs/serving.md as a newcomer follows it: its ``app.py`` served by uvicorn, its ``curl``
commands run by bash, with a restart of the server between asking and approving.

The page is the test's input: the first ``python`` block is written to ``app.py``,
the ``bash`` block holding ``uvicorn app:app`` starts the server (on a free port
instead of 8000), and the ``bash`` blocks of the section "Drive it over HTTP" run
in order (the port replaced the same way).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

PAGE = Path(__file__).resolve().parents[2] / "docs" / "serving.md"
FENCE = re.compile(r"^```(\w*)\s*$")
BIN = str(Path(sys.executable).parent)


def page_blocks() -> list[tuple[str, str, str]]:
    """(section heading, language, code) of every fenced block of the page, in order."""
    found: list[tuple[str, str, str]] = []
    section, language, code = "", None, []
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        fence = FENCE.match(line)
        if language is None:
            if line.startswith("## "):
                section = line[3:].strip()
            elif fence:
                language, code = fence.group(1), []
        elif line.startswith("```"):
            found.append((section, language, "\n".join(code) + "\n"))
            language = None
        else:
            code.append(line)
    return found


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def on_port(text: str, port: int) -> str:
    return text.replace("127.0.0.1:8000", f"127.0.0.1:{port}").replace(
        "--port 8000", f"--port {port}"
    )


ENV = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


@contextmanager
def serving(command: str, cwd: Path, port: int, log: Path) -> Iterator[None]:
    """The page's uvicorn command, until it answers ``/agent/health``; stopped with ^C."""
    with log.open("a") as output:
        process = subprocess.Popen(
            ["bash", "-c", f"exec {command}"], cwd=cwd, env=ENV, stdout=output, stderr=output
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/agent/health", timeout=2).is_success:
                    break
            except httpx.TransportError:
                pass
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, f"uvicorn did not start:\n{log.read_text()}"
            time.sleep(0.1)
        yield
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def run_bash(script: str, cwd: Path) -> str:
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=cwd,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"{script}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
    return done.stdout


def test_a_newcomer_serves_the_pages_graph_and_approves_over_http_across_a_restart(
    tmp_path: Path,
) -> None:
    blocks = page_blocks()
    app = next(code for _, language, code in blocks if language == "python")
    (tmp_path / "app.py").write_text(app, encoding="utf-8")
    [command] = [
        line.strip()
        for _, language, code in blocks
        if language == "bash"
        for line in code.splitlines()
        if line.startswith("uvicorn app:app")
    ]
    steps = [
        code
        for section, language, code in blocks
        if section == "Drive it over HTTP" and language == "bash"
    ]
    assert len(steps) == 4, "start a run, the snapshot, the decision, the ledger's view"
    port = free_port()
    command = on_port(command, port)
    log = tmp_path / "server.log"

    with serving(command, tmp_path, port, log):
        asked = run_bash(on_port("\n".join(steps[:2]), port), tmp_path)
    assert '"type":"interrupt"' in asked and '"aais:approval"' in asked
    assert '"approval.snapshot"' in asked
    assert (tmp_path / "report.txt").exists(), "nothing runs before the approval"

    # A new process: the paused run and its request come back from the two SQLite files.
    with serving(command, tmp_path, port, log):
        answered = run_bash(on_port("\n".join(steps[2:]), port), tmp_path)
        assert '"outcome":"approved"' in answered
        deadline = time.monotonic() + 30
        while (tmp_path / "report.txt").exists():
            assert time.monotonic() < deadline, f"the run did not resume:\n{log.read_text()}"
            time.sleep(0.1)
        snapshot = httpx.get(
            f"http://127.0.0.1:{port}/approvals/snapshot",
            headers={"Authorization": "Bearer s3cret-token"},
        ).json()
    assert "status    approved" in answered
    assert snapshot["snapshot"]["pending"] == []
    assert "Traceback" not in log.read_text(), log.read_text()
    assert {"app.db", "app.checkpoints.db"} <= {path.name for path in tmp_path.iterdir()}

"""Playwright drives Debian chromium against ``aais-agui demo``, across a server restart.

Needs ``npm ci --prefix tests/demo/browser`` and ``/usr/bin/chromium`` (Debian's
``chromium`` package). Screenshots go to ``artifacts/browser/``.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from aais_agui import run_agent_input

from .support import (
    ROOT,
    Server,
    agui_run,
    executed,
    free_port,
    interrupts_of,
    ledger_cli,
    running,
)

BROWSER_PROJECT = Path(__file__).resolve().parent / "browser"
CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = ROOT / "artifacts" / "browser"


def _require_tools() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not installed; the browser test needs Node.js >= 20")
    if not (BROWSER_PROJECT / "node_modules" / "playwright-core").is_dir():
        pytest.fail(
            "tests/demo/browser/node_modules is missing: run `npm ci --prefix tests/demo/browser`"
        )
    if not CHROMIUM.exists():
        pytest.fail("/usr/bin/chromium is missing: run `apt-get install -y chromium` (Debian)")
    return node


def test_inbox_page_approves_across_a_restart(tmp_path: Path) -> None:
    node = _require_tools()
    shutil.rmtree(SCREENSHOTS, ignore_errors=True)
    workspace = tmp_path / "workspace"
    db = tmp_path / "demo.db"
    args = ["demo", "--db", str(db), "--port", str(free_port()), "--workspace", str(workspace)]
    server = Server(args, cwd=tmp_path)
    driver = subprocess.Popen(
        [node, "inbox.mjs", server.url, str(SCREENSHOTS), str(tmp_path / "chromium-profile")],
        cwd=BROWSER_PROJECT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert driver.stdin is not None and driver.stdout is not None
    steps: list[str] = []
    try:
        for line in driver.stdout:
            steps.append(line.strip())
            if line.startswith("STEP pending-before-restart"):
                server.stop()
                server = Server(args, cwd=tmp_path)
                driver.stdin.write("restarted\n")
                driver.stdin.flush()
            elif line.startswith("STEP approve-elsewhere"):
                request_id = line.split()[2]
                approved = ledger_cli(db, "approve", request_id, "--yes")
                assert approved.returncode == 0, approved.stdout + approved.stderr
                driver.stdin.write("approved\n")
                driver.stdin.flush()
        driver.wait(timeout=120)
    finally:
        if driver.poll() is None:
            driver.kill()
        server.stop()
    stderr = driver.stderr.read() if driver.stderr else ""
    assert driver.returncode == 0, (
        f"browser scenario failed after {steps}:\n{stderr}\n{server.log()}"
    )
    assert steps[-1] == "STEP done"
    ran = [(entry["tool"], entry["arguments"]) for entry in executed(workspace)]
    assert ran == [
        ("run_shell", {"command": "pytest -q"}),
        ("send_email", {"to": "alice@example.com", "subject": "Status update from the demo agent"}),
        ("write_file", {"path": "notes.md", "bytes": 13}),
        ("run_shell", {"command": "ls -la"}),
    ]
    assert (workspace / "notes.md").read_text() == "ship the demo"


def test_inbox_shows_the_end_of_a_long_argument(tmp_path: Path) -> None:
    """A 5 KB argument once hid `; TAIL-rm -rf ~` below its scroll box."""
    node = _require_tools()
    here = Path(__file__).resolve().parent
    args = ["serve", "long_value_graph:builder", "--local-dev-login", "--port", "0"]
    args += ["--db", str(tmp_path / "long.db")]
    with running(args, cwd=here) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        events = agui_run(client, run_agent_input("long-1", text="go"))
        assert len(interrupts_of(events)) == 1
        driver = subprocess.run(
            [node, "long_value.mjs", server.url, str(SCREENSHOTS / "long-value")],
            cwd=BROWSER_PROJECT,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert driver.returncode == 0 and driver.stdout.strip() == "OK", driver.stdout + driver.stderr

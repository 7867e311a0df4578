"""Two Chromium tabs of the inbox follow the authority over the WebSocket profile.

Runs paused over AG-UI appear live in both tabs; a decision made elsewhere (the
CLI) and one made in the first tab (a frame on its WebSocket) leave both tabs
with the same state, and each approved action runs once.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx

from aais_agui import run_agent_input

from .support import Server, agui_run, executed, free_port, interrupts_of, ledger_cli, wait_for
from .test_browser import BROWSER_PROJECT, SCREENSHOTS, _require_tools


def test_two_tabs_follow_the_authority_over_the_websocket(tmp_path: Path) -> None:
    node = _require_tools()
    workspace = tmp_path / "workspace"
    db = tmp_path / "demo.db"
    args = ["demo", "--db", str(db), "--port", str(free_port()), "--workspace", str(workspace)]
    server = Server(args, cwd=tmp_path)
    driver = subprocess.Popen(
        [node, "websocket.mjs", server.url, str(SCREENSHOTS), str(tmp_path / "chromium-profile")],
        cwd=BROWSER_PROJECT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert driver.stdin is not None and driver.stdout is not None
    steps: list[str] = []
    request_ids: list[str] = []
    try:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            for line in driver.stdout:
                steps.append(line.strip())
                if line.startswith("STEP ready"):
                    for thread in ("ws-one", "ws-two"):
                        events = agui_run(client, run_agent_input(thread, text="run the tests"))
                        [interrupt] = interrupts_of(events)
                        request_ids.append(interrupt["metadata"]["aais"]["request"]["id"])
                    driver.stdin.write(f"paused {' '.join(request_ids)}\n")
                    driver.stdin.flush()
                elif line.startswith("STEP cards-live"):
                    approved = ledger_cli(db, "approve", request_ids[0], "--yes")
                    assert approved.returncode == 0, approved.stdout + approved.stderr
                    driver.stdin.write("approved\n")
                    driver.stdin.flush()
        driver.wait(timeout=120)
        ran = wait_for(lambda: len(executed(workspace)) >= 2 and executed(workspace), what="runs")
    finally:
        if driver.poll() is None:
            driver.kill()
        server.stop()
    stderr = driver.stderr.read() if driver.stderr else ""
    assert driver.returncode == 0, (
        f"browser scenario failed after {steps}:\n{stderr}\n{server.log()}"
    )
    assert steps[-1] == "STEP done"
    assert [entry["tool"] for entry in ran] == ["run_shell", "run_shell"]

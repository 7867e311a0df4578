"""In Chromium: revoke a session grant in the inbox; the next matching action asks."""

from __future__ import annotations

import subprocess
from pathlib import Path

from .support import executed, free_port, running
from .test_browser import BROWSER_PROJECT, SCREENSHOTS, _require_tools


def test_revoking_a_session_grant_in_the_page_makes_the_next_action_ask(tmp_path: Path) -> None:
    node = _require_tools()
    workspace = tmp_path / "workspace"
    args = ["demo", "--db", str(tmp_path / "demo.db"), "--port", str(free_port())]
    args += ["--workspace", str(workspace)]
    with running(args, cwd=tmp_path) as server:
        driver = subprocess.run(
            [node, "standing.mjs", server.url, str(SCREENSHOTS / "standing"), str(tmp_path / "p")],
            cwd=BROWSER_PROJECT,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        log = server.log()
    assert driver.returncode == 0 and driver.stdout.strip().endswith("STEP done"), (
        driver.stdout + driver.stderr + log
    )
    # Approved once for the session, run again under the grant; denied after the revoke.
    assert [entry["arguments"] for entry in executed(workspace)] == [
        {"command": "ls -la"},
        {"command": "ls -la"},
    ]

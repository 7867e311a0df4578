"""The inbox page in Chromium asks for nothing the server does not have (its icon included)
and logs no console error."""

from __future__ import annotations

import subprocess
from pathlib import Path

from demo.support import running
from demo.test_browser import BROWSER_PROJECT, _require_tools


def test_the_inbox_page_loads_without_a_failed_request_or_a_console_error(
    tmp_path: Path,
) -> None:
    node = _require_tools()
    args = ["demo", "--port", "0", "--db", str(tmp_path / "demo.db")]
    with running([*args, "--workspace", str(tmp_path / "ws")], cwd=tmp_path) as server:
        driver = subprocess.run(
            [node, "page_requests.mjs", server.url, str(tmp_path / "chromium-profile")],
            cwd=BROWSER_PROJECT,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        served = server.log()
    assert driver.returncode == 0, driver.stdout + driver.stderr
    assert driver.stdout.splitlines() == ["DONE"], driver.stdout
    assert "Traceback" not in served

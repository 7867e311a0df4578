"""docs/serving.md's own ``app.py``: an approval it ran to the end is ``executed``, never
an unknown outcome, as the command line reports it once the server has stopped.

The page's gate is a bare ``request_approval`` in a node; the served run that resumes
it finishes the node, and the claim on the approval ends with it.
"""

from __future__ import annotations

import time
from pathlib import Path

from .test_serving_page import free_port, on_port, page_blocks, run_bash, serving

REQUEST_ID = (
    "python3 -c 'import json; "
    'print(json.load(open("snapshot.json"))["snapshot"]["pending"][0]["id"])\''
)


def test_the_pages_approved_and_finished_run_is_executed_not_unknown(tmp_path: Path) -> None:
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
    port = free_port()
    log = tmp_path / "server.log"

    with serving(on_port(command, port), tmp_path, port, log):
        answered = run_bash(on_port("\n".join(steps[:3]), port), tmp_path)
        assert '"outcome":"approved"' in answered
        deadline = time.monotonic() + 30
        while (tmp_path / "report.txt").exists():
            assert time.monotonic() < deadline, f"the run did not resume:\n{log.read_text()}"
            time.sleep(0.1)
        request_id = run_bash(REQUEST_ID, tmp_path).strip()
        show = f"aais-langgraph --db app.db show {request_id}"
        deadline = time.monotonic() + 10  # the run's last writes, after the file is gone
        while "execution executed" not in run_bash(show, tmp_path):
            if time.monotonic() > deadline:
                break
            time.sleep(0.2)
    # The server stopped: no run of it holds a claim, so a live one would read unknown now.
    shown = run_bash(show, tmp_path)
    unknown = run_bash("aais-langgraph --db app.db unknown", tmp_path)

    assert "status    approved" in shown
    assert "execution executed" in shown, shown
    assert unknown.strip().splitlines()[-1] == "0 outcome unknown", unknown

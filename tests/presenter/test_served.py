"""A decision through the stdio presenter resumes a served run: the demo's watcher on loopback."""

from __future__ import annotations

from pathlib import Path

import httpx

from aais_agui import run_agent_input
from aais_langgraph import build_decision
from demo.support import agui_run, executed, finished, interrupts_of, running, wait_for

from .support import is_reply, presenter


def test_a_stdio_approval_resumes_the_served_run_once(tmp_path: Path) -> None:
    db, workspace = tmp_path / "demo.db", tmp_path / "ws"
    args = ["demo", "--port", "0", "--db", str(db), "--workspace", str(workspace)]
    with running(args, cwd=tmp_path) as server:
        client = httpx.Client(base_url=server.url, timeout=30)
        body = run_agent_input("t-stdio", text="run the tests")
        [interrupt] = interrupts_of(agui_run(client, body))
        requested = interrupt["metadata"]["aais"]
        with presenter(db) as stdio:
            [pending] = stdio.seen[0]["snapshot"]["pending"]
            assert pending["id"] == requested["request"]["id"]
            actor = {"id": "somebody", "type": "human"}
            stdio.send(build_decision(requested, decision="approve", actor=actor).to_json())
            assert stdio.read_until(is_reply)["resolution"]["outcome"] == "approved"
            assert stdio.close() == 0
        view = wait_for(lambda: finished(client, "t-stdio"), what="the watcher to resume")
        assert view["messages"][-1]["content"] == "Done: run_shell finished."
    ran = [(entry["tool"], entry["arguments"]) for entry in executed(workspace)]
    assert ran == [("run_shell", {"command": "pytest -q"})]

"""Chromium denies a tool call with a note in the inbox; the model reads the note."""

from __future__ import annotations

import sqlite3
import subprocess
from contextlib import closing
from pathlib import Path

import httpx
from langchain_core.messages import ToolMessage
from langgraph.checkpoint.sqlite import SqliteSaver

from aais_agui import run_agent_input
from aais_agui.cli import checkpoints_path
from aais_langgraph import ApprovalAuthority, SqliteLedger
from aais_langgraph.protocol import note_of

from .note_graph import agent
from .support import agui_run, interrupts_of, running, wait_for
from .test_browser import BROWSER_PROJECT, SCREENSHOTS, _require_tools

NOTE = "Keep the report until Friday."


def test_a_note_typed_in_the_inbox_is_recorded_and_reaches_the_model(tmp_path: Path) -> None:
    node = _require_tools()
    here = Path(__file__).resolve().parent
    db = tmp_path / "note.db"
    args = ["serve", "note_graph:agent", "--local-dev-login", "--port", "0", "--db", str(db)]
    with running(args, cwd=here) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        [interrupt] = interrupts_of(agui_run(client, run_agent_input("note-1", text="go")))
        request_id = interrupt["metadata"]["aais"]["request"]["id"]
        driver = subprocess.run(
            [node, "note.mjs", server.url, str(SCREENSHOTS / "note"), NOTE],
            cwd=BROWSER_PROJECT,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert driver.returncode == 0 and driver.stdout.strip() == "OK", (
            driver.stdout + driver.stderr + server.log()
        )
        with SqliteLedger.from_path(db) as ledger:
            authority = ApprovalAuthority(ledger)
            resolved = wait_for(lambda: authority.get_resolution(request_id), what="resolution")
            assert resolved.resolution.outcome == "denied" and note_of(resolved) == NOTE

        def denial() -> ToolMessage | None:
            path = checkpoints_path(str(db))
            with closing(sqlite3.connect(path, check_same_thread=False)) as conn:
                state = agent(SqliteSaver(conn)).get_state(
                    {"configurable": {"thread_id": "note-1"}}
                )
            found = [m for m in state.values.get("messages", []) if isinstance(m, ToolMessage)]
            return found[0] if found else None

        message = wait_for(denial, what="the denial ToolMessage")
        assert (
            message.content == f"User rejected the tool call for `delete_file` with reason: {NOTE}"
        )

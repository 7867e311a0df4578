"""Chromium on the inbox of a graph with no chat: the approvals alone, and the requester
withdraws their request with the card's Cancel button."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx

from aais_agui import run_agent_input
from aais_langgraph import ApprovalAuthority, SqliteLedger

from .support import agui_run, interrupts_of, running, wait_for
from .test_browser import BROWSER_PROJECT, SCREENSHOTS, _require_tools


def test_the_requester_cancels_from_an_inbox_without_a_chat(tmp_path: Path) -> None:
    node = _require_tools()
    here = Path(__file__).resolve().parent
    db = tmp_path / "cancel.db"
    args = ["serve", "no_chat_graph:builder", "--local-dev-login", "--port", "0", "--db", str(db)]
    with running(args, cwd=here) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        config = client.get("/inbox/config").json()
        assert config["chat"] is False
        [interrupt] = interrupts_of(agui_run(client, run_agent_input("no-chat-1")))
        request_id = interrupt["metadata"]["aais"]["request"]["id"]
        driver = subprocess.run(
            [node, "cancel.mjs", server.url, str(SCREENSHOTS / "cancel")],
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
            assert resolved.resolution.outcome == "cancelled"
            by = (resolved.resolution.extensions or {})["aais-langgraph.org/resolved_by"]
            assert by["id"] == "local-developer"

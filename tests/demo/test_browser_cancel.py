"""Chromium on the inbox of a graph with no chat: the approvals alone; the requester
withdraws their request with the card's Cancel button where the policy lets them, and gets
no Cancel button where it does not."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx

from aais_agui import run_agent_input
from aais_langgraph import ApprovalAuthority, SqliteLedger

from .support import agui_run, interrupts_of, running, wait_for
from .test_browser import BROWSER_PROJECT, SCREENSHOTS, _require_tools

HERE = Path(__file__).resolve().parent
#: The requester sees their own requests but may neither decide nor cancel them.
NO_CANCEL_POLICY = """
default_approvers = ["sre"]

[requesters]
view_own = true
cancel_own = false
"""


def drive(db: Path, mode: str, *extra: str) -> str:
    """Serve the graph, pause one run as the local developer, drive the page; the request id."""
    node = _require_tools()
    args = ["serve", "no_chat_graph:builder", "--local-dev-login", "--port", "0", "--db", str(db)]
    with (
        running([*args, *extra], cwd=HERE) as server,
        httpx.Client(base_url=server.url, timeout=30) as client,
    ):
        assert client.get("/inbox/config").json()["chat"] is False
        [interrupt] = interrupts_of(agui_run(client, run_agent_input("no-chat-1")))
        driver = subprocess.run(
            [node, "cancel.mjs", server.url, str(SCREENSHOTS / "cancel"), mode],
            cwd=BROWSER_PROJECT,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert driver.returncode == 0 and driver.stdout.strip() == "OK", (
            driver.stdout + driver.stderr + server.log()
        )
    return str(interrupt["metadata"]["aais"]["request"]["id"])


def test_the_requester_cancels_from_an_inbox_without_a_chat(tmp_path: Path) -> None:
    db = tmp_path / "cancel.db"
    request_id = drive(db, "allowed")
    with SqliteLedger.from_path(db) as ledger:
        authority = ApprovalAuthority(ledger)
        resolved = wait_for(lambda: authority.get_resolution(request_id), what="resolution")
        assert resolved.resolution.outcome == "cancelled"
        by = (resolved.resolution.extensions or {})["aais-langgraph.org/resolved_by"]
        assert by["id"] == "local-developer"


def test_a_requester_who_may_not_cancel_gets_no_cancel_button(tmp_path: Path) -> None:
    policy = tmp_path / "access.toml"
    policy.write_text(NO_CANCEL_POLICY, encoding="utf-8")
    db = tmp_path / "refused.db"
    request_id = drive(db, "refused", "--access-policy", str(policy))
    with SqliteLedger.from_path(db) as ledger:
        assert ApprovalAuthority(ledger).get_resolution(request_id) is None

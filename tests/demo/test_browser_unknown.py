"""Chromium shows an approved action of unknown outcome in the inbox, apart from the cards."""

from __future__ import annotations

import subprocess
from pathlib import Path

from aais_langgraph import ApprovalAuthority, SqliteLedger, build_decision
from aais_langgraph.ledger.executions import claim_change

from .support import Server, free_port
from .test_browser import BROWSER_PROJECT, SCREENSHOTS, _require_tools

HUMAN = {"id": "alice", "type": "human"}
SUMMARY = "Deploy the release"


def seed_unknown(db: Path) -> str:
    """An approved request whose executing run died and whose re-run reported it unknown."""
    with SqliteLedger.from_path(db) as ledger:
        ledger.setup()
        authority = ApprovalAuthority(ledger)
        requested = authority.request(
            {"kind": "process.exec", "name": "deploy", "summary": SUMMARY, "arguments": {}},
            origin={"harness": "aais-langgraph", "session_id": "s1"},
            thread_id="t-gone",
        )
        request_id = requested.request.id
        authority.decide(build_decision(requested, decision="approve", actor=HUMAN), actor=HUMAN)
        for holder, now in (("dead_run", 0.0), ("recovery", 100.0)):
            ledger.update_execution(
                request_id,
                claim_change(request_id, holder, thread_id="t-gone", ttl=1, now=now, retry=False),
            )
    return request_id


def test_the_inbox_lists_unknown_outcomes_with_the_reconcile_command(tmp_path: Path) -> None:
    node = _require_tools()
    db = tmp_path / "demo.db"
    request_id = seed_unknown(db)
    args = ["demo", "--db", str(db), "--port", str(free_port()), "--workspace", str(tmp_path)]
    server = Server(args, cwd=tmp_path)
    try:
        driver = subprocess.run(
            [
                node,
                "unknown.mjs",
                server.url,
                str(SCREENSHOTS),
                str(tmp_path / "profile"),
                request_id,
                SUMMARY,
            ],
            cwd=BROWSER_PROJECT,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        server.stop()
    assert driver.returncode == 0 and "STEP done" in driver.stdout, (
        f"{driver.stdout}\n{driver.stderr}\n{server.log()}"
    )

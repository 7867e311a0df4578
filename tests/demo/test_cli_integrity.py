"""``aais-agui serve`` on a ledger that lost a paused run's request says so when it starts."""

from __future__ import annotations

from pathlib import Path

import httpx

from aais_agui import run_agent_input

from .support import agui_run, interrupts_of, running

HERE = Path(__file__).resolve().parent


def test_serve_reports_runs_paused_on_requests_an_emptied_ledger_lost(tmp_path: Path) -> None:
    db = tmp_path / "app.db"
    args = ["serve", "tiny_graph:builder", "--port", "0", "--db", str(db), "--local-dev-login"]
    env = {"TINY_GRAPH_LOG": str(tmp_path / "deleted.log")}
    with (
        running(args, cwd=HERE, env=env) as server,
        httpx.Client(base_url=server.url, timeout=30) as client,
    ):
        [interrupt] = interrupts_of(agui_run(client, run_agent_input("t1", text="delete it")))
    request_id = interrupt["metadata"]["aais"]["request"]["id"]
    assert "INTEGRITY" not in server.log()
    for leftover in tmp_path.glob("app.db*"):
        leftover.write_bytes(b"")  # the ledger file (and its WAL) emptied

    with running(args, cwd=HERE, env=env) as restarted:
        pass
    assert f"INTEGRITY t1 {request_id}: paused on a request the ledger does not hold" in (
        restarted.log()
    )

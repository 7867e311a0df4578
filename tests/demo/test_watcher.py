"""Decisions recorded by another process resume the run: live, and after a restart."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph.checkpoint.memory import InMemorySaver

from aais_agui import ApprovalService, ServiceSettings, run_agent_input
from aais_agui.demo import DemoWorkspace, build_demo_agent
from aais_langgraph import ApprovalAuthority, build_decision
from aais_langgraph.gate import AUTHORITY_KEY

from .support import (
    agui_run,
    executed,
    finished,
    interrupts_of,
    ledger_cli,
    running,
    wait_for,
)


def _demo(tmp_path: Path) -> list[str]:
    db, workspace = tmp_path / "demo.db", tmp_path / "ws"
    return ["demo", "--port", "0", "--db", str(db), "--workspace", str(workspace)]


def _ask(client: httpx.Client, thread_id: str, text: str) -> str:
    [interrupt] = interrupts_of(agui_run(client, run_agent_input(thread_id, text=text)))
    request_id: str = interrupt["metadata"]["aais"]["request"]["id"]
    return request_id


def test_cli_decision_resumes_the_run_while_the_server_runs(tmp_path: Path) -> None:
    with running(_demo(tmp_path), cwd=tmp_path) as server:
        client = httpx.Client(base_url=server.url, timeout=30)
        request_id = _ask(client, "t-live", "run the tests")
        approved = ledger_cli(tmp_path / "demo.db", "approve", request_id, "--yes")
        assert approved.returncode == 0, approved.stdout + approved.stderr
        view = wait_for(lambda: finished(client, "t-live"), what="the watcher to resume")
        assert view["messages"][-1]["content"] == "Done: run_shell finished."
    ran = [(entry["tool"], entry["arguments"]) for entry in executed(tmp_path / "ws")]
    assert ran == [("run_shell", {"command": "pytest -q"})]


def test_decision_recorded_while_the_server_is_down_is_applied_at_start(tmp_path: Path) -> None:
    with running(_demo(tmp_path), cwd=tmp_path) as server:
        request_id = _ask(httpx.Client(base_url=server.url, timeout=30), "t-down", "run `ls`")
    denied = ledger_cli(tmp_path / "demo.db", "deny", request_id, "--yes")
    assert denied.returncode == 0, denied.stdout + denied.stderr
    with running(_demo(tmp_path), cwd=tmp_path) as server:
        client = httpx.Client(base_url=server.url, timeout=30)
        view = wait_for(lambda: finished(client, "t-down"), what="the startup catch-up")
        assert view["messages"][-1]["content"].startswith("run_shell was not run.")
    assert executed(tmp_path / "ws") == []


@pytest.fixture
def paused(tmp_path: Path) -> tuple[Any, ApprovalAuthority, DemoWorkspace, str]:
    """The demo agent paused on one ``run_shell`` approval (in memory)."""
    workspace = DemoWorkspace(tmp_path / "ws")
    graph = build_demo_agent(workspace, checkpointer=InMemorySaver())
    authority = ApprovalAuthority()
    config = {"configurable": {"thread_id": "t1", AUTHORITY_KEY: authority}}
    graph.invoke({"messages": [{"role": "user", "content": "run the tests"}]}, config)
    [pending] = graph.get_state(config).interrupts
    return graph, authority, workspace, pending.value


async def test_watcher_resumes_a_decided_thread_once(
    paused: tuple[Any, ApprovalAuthority, DemoWorkspace, Any],
) -> None:
    graph, authority, workspace, requested = paused
    watcher = ApprovalService(graph, authority).watcher
    assert await watcher.catch_up() == set()
    alice = {"id": "alice", "type": "human"}
    authority.decide(build_decision(requested, decision="approve", actor=alice), actor=alice)
    assert await watcher.catch_up() == {"t1"}
    assert await watcher.settle("t1") == [requested["request"]["id"]]
    assert await watcher.settle("t1") == []
    assert [entry["tool"] for entry in workspace.executed()] == ["run_shell"]


async def test_watcher_leaves_undecided_threads_paused(
    paused: tuple[Any, ApprovalAuthority, DemoWorkspace, Any],
) -> None:
    graph, authority, workspace, _ = paused
    service = ApprovalService(graph, authority, settings=ServiceSettings(resume_due_every=0.05))
    watcher = service.watcher
    async with service.lifespan():
        await asyncio.sleep(0.3)
        await watcher.idle()
    assert watcher.after > 0
    assert watcher.resumed == []
    assert graph.get_state({"configurable": {"thread_id": "t1"}}).interrupts
    assert workspace.executed() == []


def test_postgres_demo_applies_a_cli_decision(tmp_path: Path, postgres_url: str) -> None:
    args = ["demo", "--port", "0", "--db", postgres_url, "--workspace", str(tmp_path / "ws")]
    with running(args, cwd=tmp_path) as server:
        client = httpx.Client(base_url=server.url, timeout=30)
        request_id = _ask(client, "t-pg", "write pg.txt: stored in Postgres")
        approved = ledger_cli(postgres_url, "approve", request_id, "--yes")
        assert approved.returncode == 0, approved.stdout + approved.stderr
        view = wait_for(lambda: finished(client, "t-pg"), what="the watcher to resume")
        assert view["messages"][-1]["content"] == "Done: write_file finished."
    assert (tmp_path / "ws" / "pg.txt").read_text() == "stored in Postgres"

"""The decision watcher applies the ledger's durable resume work, even past a held lease."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from aais_agui import ApprovalService, ServiceSettings
from aais_agui.demo import DemoWorkspace, build_demo_agent
from aais_langgraph import ApprovalAuthority, build_decision
from aais_langgraph.gate import AUTHORITY_KEY
from aais_langgraph.ledger import RESUME, SqliteLedger

ALICE = {"id": "alice", "type": "human"}
REMOTE_HOLDER = "holder_remote"  # no origin: presumed alive, only its expiry frees the lease


@pytest.fixture
def paused(tmp_path: Path) -> tuple[Any, ApprovalAuthority, DemoWorkspace, Any]:
    """The demo agent paused on one ``run_shell`` approval (thread ``t1``, SQLite ledger)."""
    workspace = DemoWorkspace(tmp_path / "ws")
    graph = build_demo_agent(workspace, checkpointer=InMemorySaver())
    ledger = SqliteLedger(tmp_path / "ledger.db")
    ledger.setup()
    authority = ApprovalAuthority(ledger)
    config = {"configurable": {"thread_id": "t1", AUTHORITY_KEY: authority}}
    graph.invoke({"messages": [{"role": "user", "content": "run the tests"}]}, config)
    [pending] = graph.get_state(config).interrupts
    return graph, authority, workspace, pending.value


def approve(authority: ApprovalAuthority, requested: Any) -> str:
    decided = build_decision(requested, decision="approve", actor=ALICE)
    assert authority.decide(decided, actor=ALICE).resolution.outcome == "approved"
    return str(requested["request"]["id"])


def still_paused(graph: Any) -> bool:
    return bool(graph.get_state({"configurable": {"thread_id": "t1"}}).interrupts)


async def test_due_defers_an_approval_while_a_remote_holder_holds_the_lease_then_resumes_it(
    paused: tuple[Any, ApprovalAuthority, DemoWorkspace, Any],
) -> None:
    graph, authority, workspace, requested = paused
    ledger = authority.ledger
    lease = ledger.acquire_lease("t1", REMOTE_HOLDER, ttl=1.0, now=time.time())
    assert lease is not None
    request_id = approve(authority, requested)
    watcher = ApprovalService(graph, authority).watcher

    assert await watcher.due() == []
    work = ledger.get_work(RESUME, request_id)
    assert work is not None and work.state == "due" and work.attempts == 1
    assert "lease" in (work.last_error or "")
    assert still_paused(graph) and workspace.executed() == []

    await asyncio.sleep(max(lease.expires_at - time.time(), 0.0) + 0.05)  # at most ~1 s
    assert await watcher.due() == [request_id]

    assert ledger.get_work(RESUME, request_id).state == "done"
    assert not still_paused(graph)
    assert [entry["tool"] for entry in workspace.executed()] == ["run_shell"]
    assert await watcher.due() == []
    assert len(workspace.executed()) == 1


async def test_a_watcher_running_in_the_background_resumes_an_approval_recorded_elsewhere(
    paused: tuple[Any, ApprovalAuthority, DemoWorkspace, Any],
) -> None:
    graph, authority, workspace, requested = paused
    service = ApprovalService(graph, authority, settings=ServiceSettings(resume_due_every=0.05))
    watcher = service.watcher
    async with service.lifespan():
        request_id = approve(authority, requested)
        deadline = time.monotonic() + 10
        while authority.ledger.get_work(RESUME, request_id).state != "done":
            assert time.monotonic() < deadline, "the watcher did not resume the thread in 10 s"
            await asyncio.sleep(0.05)
        await watcher.idle()
    assert watcher.resumed == [request_id]
    assert not still_paused(graph)
    assert [entry["tool"] for entry in workspace.executed()] == ["run_shell"]

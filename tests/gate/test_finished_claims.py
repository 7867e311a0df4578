"""A bare ``request_approval`` in a node: its claim ends when the node's writes are stored.

The gate cannot see its node return, so whoever reads the checkpoint first (the driver
after the resume, a sweep, a listing) records ``executed``; a node that did not finish
keeps its claim, whose outcome is unknown once no run holds it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.types import Command

from aais_langgraph import ThreadDriver, request_approval, resume_with_decisions
from aais_langgraph.gate import unknown_executions

from .support import (
    HUMAN,
    Backend,
    Effects,
    State,
    config,
    decide,
    gated_graph,
    paused,
    requested_of,
    shell_action,
)

LATER = time.time() + 3600  # past every claim's lifetime: what a listing sees then


def _asked(graph: Any, thread_id: str = "t-1") -> Any:
    (pending,) = paused(graph.invoke({"command": "ls -la"}, config(thread_id)))
    return pending, requested_of(pending)


def test_a_bare_gate_whose_node_finished_is_executed_after_the_drivers_resume(
    backend: Backend, effects: Effects
) -> None:
    graph = gated_graph(backend, effects)
    _, requested = _asked(graph)

    resume_with_decisions(
        graph, config("t-1"), decide(requested), authority=backend.authority, actor=HUMAN
    )

    assert effects.ran == ["ls -la"]
    record = backend.authority.execution(requested.request.id)
    assert record is not None and record.state == "executed"
    assert unknown_executions(backend.authority, now=LATER) == []


def test_a_claim_whose_node_finished_outside_the_driver_is_settled_by_a_listing(
    backend: Backend, effects: Effects
) -> None:
    graph = gated_graph(backend, effects)
    pending, requested = _asked(graph)
    resolved = backend.authority.decide(decide(requested), actor=HUMAN)
    graph.invoke(Command(resume={pending.id: resolved.to_json()}), config("t-1"))
    assert [r.request_id for r in unknown_executions(backend.authority, now=LATER)] == [
        requested.request.id
    ], "nothing outside the run has looked at the checkpoint yet"

    ThreadDriver(graph, backend.authority).pending_approvals()

    record = backend.authority.execution(requested.request.id)
    assert record is not None and record.state == "executed"
    assert unknown_executions(backend.authority, now=LATER) == []


def test_a_node_that_fails_after_its_gate_keeps_its_claim_unknown(backend: Backend) -> None:
    def act(state: State) -> dict[str, Any]:
        resolved = request_approval(shell_action(state["command"]), authority=backend.authority)
        if resolved.approved:
            raise RuntimeError("the action broke half way")
        return {}

    builder = StateGraph(State)
    builder.add_node("act", act)
    builder.add_edge(START, "act")
    builder.add_edge("act", END)
    graph = builder.compile(checkpointer=backend.saver)
    _, requested = _asked(graph)

    driver = ThreadDriver(graph, backend.authority)
    with contextlib.suppress(RuntimeError):
        driver.resume_with_decisions(config("t-1"), decide(requested), actor=HUMAN)
    driver.settle_claims()

    record = backend.authority.execution(requested.request.id)
    assert record is not None and record.state == "executing"
    assert [r.request_id for r in unknown_executions(backend.authority, now=LATER)] == [
        requested.request.id
    ]


def test_the_async_driver_and_listing_settle_a_finished_nodes_claim(
    memory_backend: Backend, effects: Effects
) -> None:
    backend = memory_backend
    graph = gated_graph(backend, effects)
    driver = ThreadDriver(graph, backend.authority)
    _, first = _asked(graph, "t-1")
    pending, second = _asked(graph, "t-2")

    asyncio.run(driver.aresume_with_decisions(config("t-1"), decide(first), actor=HUMAN))
    resolved = backend.authority.decide(decide(second), actor=HUMAN)
    asyncio.run(graph.ainvoke(Command(resume={pending.id: resolved.to_json()}), config("t-2")))
    asyncio.run(driver.apending_approvals())

    for requested in (first, second):
        record = backend.authority.execution(requested.request.id)
        assert record is not None and record.state == "executed"
    assert effects.ran == ["ls -la", "ls -la"]
    assert unknown_executions(backend.authority, now=LATER) == []

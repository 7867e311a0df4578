"""``risk="high"``: every gate and builder takes the level alone, as ``interrupt_on`` does."""

from __future__ import annotations

import asyncio
from typing import Any, TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph

from aais_langgraph import (
    AAISValidationError,
    ApprovalAuthority,
    arequest_approval,
    request_approval,
)
from aais_langgraph.protocol import build_request

ACTION = {"kind": "fs.delete", "name": "rm", "summary": "Delete", "arguments": {"path": "/x"}}
ORIGIN = {"harness": "tests", "session_id": "s1"}


class State(TypedDict, total=False):
    result: str


def paused_request(gate: Any, risk: Any) -> dict[str, Any]:
    """The request a one-node graph pauses on when its node calls ``gate(risk=risk)``."""
    authority = ApprovalAuthority()

    if asyncio.iscoroutinefunction(gate):

        async def node(state: State) -> State:
            await gate(ACTION, authority=authority, risk=risk)
            return {"result": "done"}

    else:

        def node(state: State) -> State:
            gate(ACTION, authority=authority, risk=risk)
            return {"result": "done"}

    builder = StateGraph(State)
    builder.add_node("gate", node)
    builder.add_edge(START, "gate")
    graph = builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t1"}}
    if asyncio.iscoroutinefunction(gate):
        asyncio.run(graph.ainvoke({}, config))
    else:
        graph.invoke({}, config)
    [interrupt] = graph.get_state(config).interrupts
    request: dict[str, Any] = interrupt.value["request"]
    [stored] = authority.snapshot().snapshot.pending
    assert stored.risk.level == request["risk"]["level"]
    return request


@pytest.mark.parametrize("gate", [request_approval, arequest_approval])
@pytest.mark.parametrize("level", ["low", "high", "critical"])
def test_a_gate_takes_the_risk_level_alone(gate: Any, level: str) -> None:
    risk = paused_request(gate, level)["risk"]
    assert risk["level"] == level
    assert len(risk["reasons"]) == 1 and level in risk["reasons"][0]


@pytest.mark.parametrize("gate", [request_approval, arequest_approval])
def test_a_gate_still_takes_a_risk_object(gate: Any) -> None:
    risk = {"level": "high", "reasons": ["Deletes production data"]}
    assert paused_request(gate, risk)["risk"] == risk


def test_build_request_takes_the_risk_level_alone() -> None:
    requested = build_request(ACTION, origin=ORIGIN, risk="critical")
    assert requested.request.risk.level == "critical"


@pytest.mark.parametrize("risk", ["severe", "HIGH", "urgent"])
def test_an_unknown_level_names_the_field_and_the_levels_without_echoing_it(risk: str) -> None:
    with pytest.raises(AAISValidationError) as refused:
        build_request(ACTION, origin=ORIGIN, risk=risk)
    assert refused.value.pointer == "/request/risk"
    assert "low, medium, high, critical" in refused.value.reason
    assert risk not in str(refused.value)


def test_a_gate_refuses_an_unknown_level_before_it_asks_anyone() -> None:
    authority = ApprovalAuthority()

    def node(state: State) -> State:
        request_approval(ACTION, authority=authority, risk="severe")
        return {"result": "done"}

    builder = StateGraph(State)
    builder.add_node("gate", node)
    builder.add_edge(START, "gate")
    graph = builder.compile(checkpointer=InMemorySaver())
    with pytest.raises(AAISValidationError) as refused:
        graph.invoke({}, {"configurable": {"thread_id": "t1"}})
    assert refused.value.pointer == "/risk"
    assert "severe" not in str(refused.value)
    assert authority.snapshot().snapshot.pending == []

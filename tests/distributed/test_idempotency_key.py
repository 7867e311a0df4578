"""The idempotency key an approved action gets: the same on every re-execution of its node.

A body declared idempotent that fails half-way (as one whose replica died would)
runs again when the thread is resumed; ``approval_key()`` hands it the same key
both times, so an effect keyed by it is applied once. A body not declared
idempotent is not run again: its outcome is unknown. (The crash tests show the same across
processes with a real kill -9.)
"""

from __future__ import annotations

import time
from typing import Any, TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from aais_langgraph import (
    ApprovalAuthority,
    ApprovalRequested,
    InMemoryLedger,
    ThreadDriver,
    build_decision,
    resume_with_decisions,
)
from aais_langgraph.gate import approval_key, requires_approval

HUMAN = {"id": "user_alex", "type": "human"}
CLAIM_TTL = 0.3


class State(TypedDict, total=False):
    command: str
    done: bool


def test_a_re_executed_body_gets_the_same_key_and_applies_its_effect_once() -> None:
    # The gate's execution claim on the approval outlives the failed run by the
    # lease TTL of the resume that drove it: keep it short, then wait it out.
    authority = ApprovalAuthority(InMemoryLedger())
    keys: list[str] = []
    applied: dict[str, str] = {}  # the external system: effects by idempotency key
    crashes = [True]

    @requires_approval(
        lambda s: {
            "kind": "process.exec",
            "name": "shell.exec",
            "summary": "Deploy",
            "arguments": {"command": s["command"]},
        },
        authority=authority,
        idempotent=True,
    )
    def deploy(state: State) -> dict[str, Any]:
        key = approval_key()
        keys.append(key)
        applied.setdefault(key, state["command"])  # idempotent by key
        if crashes and crashes.pop():
            raise RuntimeError("the replica died here")
        return {"done": True}

    builder = StateGraph(State)
    builder.add_node("deploy", deploy)
    builder.add_edge(START, "deploy")
    builder.add_edge("deploy", END)
    graph = builder.compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t-key"}}

    [pending] = graph.invoke({"command": "deploy v2"}, config)["__interrupt__"]
    requested = ApprovalRequested.from_data(pending.value)
    decided = build_decision(requested, decision="approve", scope="once", actor=HUMAN)
    with pytest.raises(RuntimeError, match="died"):
        resume_with_decisions(
            graph, config, [decided], actor=HUMAN, authority=authority, lease_ttl=CLAIM_TTL
        )

    time.sleep(CLAIM_TTL + 0.1)
    [resolved] = ThreadDriver(graph, authority, lease_ttl=CLAIM_TTL).resume_resolved("t-key")

    assert graph.get_state(config).values["done"] is True
    assert keys == [requested.request.id] * 2  # ran twice, one key
    assert applied == {requested.request.id: "deploy v2"}
    assert resolved.resolution.request_id == requested.request.id


def test_approval_key_outside_a_gated_body_raises() -> None:
    with pytest.raises(RuntimeError, match="requires_approval"):
        approval_key()

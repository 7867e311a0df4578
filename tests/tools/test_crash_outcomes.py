"""A gated tool whose run died mid-call: the model is told the outcome is unknown, not re-run.

A tool that raises once stands in for a replica killed while the tool ran (the
kill -9 versions are in tests/distributed). Tools declared ``idempotent`` in
``interrupt_on`` are run again with the same :func:`approval_key`.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool

from aais_langgraph import ThreadDriver, build_decision, resume_with_decisions
from aais_langgraph.gate import approval_key, unknown_executions

from .helpers import ALICE, call, pending, script, thread, tool_graph, tool_messages, turn

LEASE_TTL = 0.3


def flaky_tools(keys: list[str]) -> list[Any]:
    @tool
    def transfer(amount: int) -> str:
        """Transfer money."""
        keys.append(approval_key())
        if len(keys) == 1:
            raise RuntimeError("the replica died here")
        return "transferred"

    return [transfer]


def crash_once(graph: Any, authority: Any) -> str:
    graph.invoke({"messages": [HumanMessage("pay")]}, thread())
    requested = pending(graph, thread())["c1"]
    decided = build_decision(requested, decision="approve", actor=ALICE)
    with pytest.raises(RuntimeError, match="died"):
        resume_with_decisions(
            graph, thread(), [decided], actor=ALICE, authority=authority, lease_ttl=LEASE_TTL
        )
    time.sleep(LEASE_TTL)
    return str(requested["request"]["id"])


def agent(kind: str, keys: list[str], saver: Any, authority: Any, **entry: Any) -> Any:
    """The same scripted agent as a hand-built graph or through ``create_agent``."""
    model = script(turn(call("transfer", "c1", amount=100)))
    interrupt_on = {"transfer": entry or True}
    if kind == "tool_node":
        return tool_graph(
            model, flaky_tools(keys), saver, authority=authority, interrupt_on=interrupt_on
        )
    from langchain.agents import create_agent

    from aais_langgraph.tools import ApprovalMiddleware

    return create_agent(
        model,
        tools=flaky_tools(keys),
        middleware=[ApprovalMiddleware(interrupt_on, authority=authority)],
        checkpointer=saver,
    )


@pytest.mark.parametrize("kind", ["tool_node", "middleware"])
def test_the_model_is_told_the_outcome_is_unknown_and_the_tool_is_not_re_run(
    saver: Any, authority: Any, kind: str
) -> None:
    keys: list[str] = []
    graph = agent(kind, keys, saver, authority)
    request_id = crash_once(graph, authority)

    ThreadDriver(graph, authority, lease_ttl=LEASE_TTL).resume_resolved("t1")

    message = tool_messages(graph, thread())["c1"]
    assert message.status == "error" and "unknown" in str(message.content)
    # No argument value is echoed (the request id, hex, may contain "100" by chance).
    assert request_id in str(message.content)
    assert "100" not in str(message.content).replace(request_id, "")
    assert keys == [request_id]  # ran once
    assert [e.request_id for e in unknown_executions(authority)] == [request_id]
    assert graph.get_state(thread()).next == ()


@pytest.mark.parametrize("kind", ["tool_node", "middleware"])
def test_a_tool_declared_idempotent_is_run_again_with_the_same_key(
    saver: Any, authority: Any, kind: str
) -> None:
    keys: list[str] = []
    graph = agent(kind, keys, saver, authority, idempotent=True)
    request_id = crash_once(graph, authority)

    ThreadDriver(graph, authority, lease_ttl=LEASE_TTL).resume_resolved("t1")

    message = tool_messages(graph, thread())["c1"]
    assert message.status != "error" and message.content == "transferred"
    assert keys == [request_id, request_id]
    assert unknown_executions(authority) == []
    record = authority.ledger.execution_with_entry(request_id)[0]
    assert record is not None and record.state == "executed"


def test_idempotent_must_be_a_boolean() -> None:
    from aais_langgraph.tools.config import rule_for

    with pytest.raises(ValueError, match="idempotent"):
        rule_for("transfer", {"idempotent": "yes"})
    rule = rule_for("transfer", {"idempotent": True})
    assert rule is not None and rule.idempotent

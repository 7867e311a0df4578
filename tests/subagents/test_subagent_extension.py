"""The ``aais-langgraph.org/subagent`` extension: which subgraph invocation raised a request.

A plain LangGraph subgraph stands in for a subagent here (``test_deep_agent.py`` has the
deep agent): a gated node inside it, called twice from two parent nodes, and a gated
node at the top level.
"""

from __future__ import annotations

from typing import Any, TypedDict

import aais
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from aais_langgraph import ApprovalAuthority, InMemoryLedger, request_approval
from aais_langgraph.gate.run_context import subagent_run_id
from aais_langgraph.protocol import id_for
from aais_langgraph.protocol.extensions import SUBAGENT_EXTENSION

ACTION = {
    "kind": "process.exec",
    "name": "shell.exec",
    "summary": "List files",
    "arguments": {"command": "ls"},
}


class State(TypedDict, total=False):
    done: list[str]


def gated(authority: ApprovalAuthority) -> Any:
    def node(state: State) -> State:
        request_approval(ACTION, authority=authority)
        return {}

    return node


def paused_requests(top_level: bool) -> tuple[list[dict[str, Any]], ApprovalAuthority]:
    authority = ApprovalAuthority(InMemoryLedger())
    inner = StateGraph(State)
    inner.add_node("act", gated(authority))
    inner.add_edge(START, "act")
    inner.add_edge("act", END)
    subgraph = inner.compile()
    outer = StateGraph(State)
    if top_level:
        outer.add_node("act", gated(authority))
        outer.add_edge(START, "act")
    else:
        outer.add_node("first", subgraph)
        outer.add_node("second", subgraph)
        outer.add_edge(START, "first")
        outer.add_edge(START, "second")
    graph = outer.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    graph.invoke({}, config)
    values = [dict(interrupt.value) for interrupt in graph.get_state(config).interrupts]
    return values, authority


def test_a_request_raised_in_a_subgraph_names_its_invocation() -> None:
    values, authority = paused_requests(top_level=False)

    assert len(values) == 2
    for value in values:
        request = value["request"]
        stored = authority.get_stored_request(request["id"])
        assert stored is not None
        parent = str(stored.context["checkpoint_ns"]).rpartition("|")[0]
        assert request["extensions"][SUBAGENT_EXTENSION] == {"run_id": id_for(parent)}


def test_a_request_with_the_extension_is_a_valid_aais_envelope() -> None:
    values, _ = paused_requests(top_level=False)

    for value in values:
        aais.validate(value)


def test_two_invocations_of_one_subgraph_get_two_run_ids() -> None:
    values, _ = paused_requests(top_level=False)

    run_ids = {value["request"]["extensions"][SUBAGENT_EXTENSION]["run_id"] for value in values}
    assert len(run_ids) == 2


def test_a_top_level_request_has_no_subagent_extension() -> None:
    [value], _ = paused_requests(top_level=True)

    assert SUBAGENT_EXTENSION not in (value["request"].get("extensions") or {})


def test_the_run_id_is_the_parent_namespace_and_none_at_the_top() -> None:
    assert subagent_run_id("tools:abc|tools:def") == id_for("tools:abc")
    assert subagent_run_id("a:1|b:2|c:3") == id_for("a:1|b:2")
    assert subagent_run_id("tools:abc") is None
    assert subagent_run_id("") is None

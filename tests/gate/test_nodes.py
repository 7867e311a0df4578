"""The ready-made gates: ``approval_node`` with a conditional edge, and ``requires_approval``."""

from __future__ import annotations

from typing import Any, TypedDict

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from aais_langgraph import (
    approval_node,
    aresume_with_decisions,
    requires_approval,
    resume_with_decisions,
)
from aais_langgraph.protocol import ApprovalResolved

from .support import (
    HUMAN,
    Backend,
    Effects,
    State,
    config,
    decide,
    paused,
    requested_of,
    shell_action,
)

THREAD = "t-nodes"


class Routed(TypedDict, total=False):
    action: dict[str, Any]
    approval: dict[str, Any]
    result: str


def routed_graph(backend: Backend, effects: Effects) -> Any:
    def run(state: Routed) -> dict[str, Any]:
        effects.run(state["action"]["arguments"]["command"])
        return {"result": "ran"}

    def skip(state: Routed) -> dict[str, Any]:
        return {"result": "skipped: " + state["approval"]["resolution"]["outcome"]}

    def route(state: Routed) -> str:
        return "run" if state["approval"]["resolution"]["outcome"] == "approved" else "skip"

    builder = StateGraph(Routed)
    builder.add_node("gate", approval_node("action", authority=backend.authority))
    builder.add_node("run", run)
    builder.add_node("skip", skip)
    builder.add_edge(START, "gate")
    builder.add_conditional_edges("gate", route, ["run", "skip"])
    builder.add_edge("run", END)
    builder.add_edge("skip", END)
    return builder.compile(checkpointer=backend.saver)


@pytest.mark.parametrize(
    ("kind", "result", "ran"),
    [
        ("approve", "ran", ["ls -la"]),
        ("deny", "skipped: denied", []),
    ],
)
def test_approval_node_routes_on_the_resolution(
    backend: Backend, effects: Effects, kind: str, result: str, ran: list[str]
) -> None:
    graph = routed_graph(backend, effects)
    [pending] = paused(graph.invoke({"action": shell_action("ls -la")}, config(THREAD)))
    assert effects.ran == []

    resume_with_decisions(
        graph,
        config(THREAD),
        decide(requested_of(pending), kind),
        actor=HUMAN,
        authority=backend.authority,
    )

    values = graph.get_state(config(THREAD)).values
    assert values["result"] == result
    assert effects.ran == ran
    approval = ApprovalResolved.from_data(values["approval"])
    assert approval.resolution.request_id == requested_of(pending).request.id


def test_approval_node_with_an_action_function_and_result_key(
    memory_backend: Backend, effects: Effects
) -> None:
    gate = approval_node(
        lambda state: shell_action(state["command"]),
        result_key="verdict",
        authority=memory_backend.authority,
    )

    class Verdict(TypedDict, total=False):
        command: str
        verdict: dict[str, Any]

    builder = StateGraph(Verdict)
    builder.add_node("gate", gate)
    builder.add_edge(START, "gate")
    builder.add_edge("gate", END)
    graph = builder.compile(checkpointer=memory_backend.saver)
    [pending] = paused(graph.invoke({"command": "ls x"}, config(THREAD)))
    assert requested_of(pending).request.action.arguments == {"command": "ls x"}

    resume_with_decisions(
        graph,
        config(THREAD),
        decide(requested_of(pending), "deny"),
        actor=HUMAN,
        authority=memory_backend.authority,
    )

    verdict = graph.get_state(config(THREAD)).values["verdict"]
    assert verdict["type"] == "approval.resolved"
    assert verdict["resolution"]["outcome"] == "denied"


def decorated_graph(backend: Backend, node: Any, checkpointer: Any = None) -> Any:
    builder = StateGraph(State)
    builder.add_node("act", node)
    builder.add_edge(START, "act")
    builder.add_edge("act", END)
    return builder.compile(checkpointer=checkpointer or backend.saver)


@pytest.mark.parametrize("kind", ["approve", "deny"])
def test_requires_approval_with_an_on_reject_update(
    backend: Backend, effects: Effects, kind: str
) -> None:
    @requires_approval(
        lambda state: shell_action(state["command"]),
        authority=backend.authority,
        on_reject={"outcome": "refused"},
    )
    def act(state: State) -> dict[str, Any]:
        effects.run(state["command"])
        return {"outcome": "done"}

    graph = decorated_graph(backend, act)
    [pending] = paused(graph.invoke({"command": "ls -la"}, config(THREAD)))
    assert effects.ran == []
    resume_with_decisions(
        graph,
        config(THREAD),
        decide(requested_of(pending), kind),
        actor=HUMAN,
        authority=backend.authority,
    )

    outcome = graph.get_state(config(THREAD)).values["outcome"]
    assert (outcome, effects.ran) == (
        ("done", ["ls -la"]) if kind == "approve" else ("refused", [])
    )


def test_requires_approval_with_an_on_reject_function(
    memory_backend: Backend, effects: Effects
) -> None:
    seen: list[ApprovalResolved] = []

    def refused(state: State, resolved: ApprovalResolved) -> dict[str, Any]:
        seen.append(resolved)
        return {"outcome": f"not run: {resolved.resolution.outcome} ({state['command']})"}

    @requires_approval(
        lambda state: shell_action(state["command"]),
        authority=memory_backend.authority,
        on_reject=refused,
    )
    def act(state: State) -> dict[str, Any]:
        effects.run(state["command"])
        return {"outcome": "done"}

    graph = decorated_graph(memory_backend, act)
    [pending] = paused(graph.invoke({"command": "rm x"}, config(THREAD)))
    resume_with_decisions(
        graph,
        config(THREAD),
        decide(requested_of(pending), "deny"),
        actor=HUMAN,
        authority=memory_backend.authority,
    )

    assert graph.get_state(config(THREAD)).values["outcome"] == "not run: denied (rm x)"
    assert [r.resolution.request_id for r in seen] == [requested_of(pending).request.id]
    assert effects.ran == []


def test_requires_approval_keeps_the_node_signature(
    memory_backend: Backend, effects: Effects
) -> None:
    @requires_approval(
        lambda state: shell_action(state["command"]), authority=memory_backend.authority
    )
    def act(state: State, config: RunnableConfig) -> dict[str, Any]:
        effects.run(config["configurable"]["thread_id"])
        return {"outcome": "done"}

    graph = decorated_graph(memory_backend, act)
    [pending] = paused(graph.invoke({"command": "ls"}, config(THREAD)))
    resume_with_decisions(
        graph,
        config(THREAD),
        decide(requested_of(pending)),
        actor=HUMAN,
        authority=memory_backend.authority,
    )

    assert effects.ran == [THREAD]


async def test_requires_approval_on_an_async_node(
    memory_backend: Backend, effects: Effects
) -> None:
    @requires_approval(
        lambda state: shell_action(state["command"]),
        authority=memory_backend.authority,
        on_reject=lambda state, resolved: {"outcome": resolved.resolution.outcome},
    )
    async def act(state: State) -> dict[str, Any]:
        effects.run(state["command"])
        return {"outcome": "done"}

    graph = decorated_graph(memory_backend, act, InMemorySaver())
    for thread, kind, outcome in (("a", "approve", "done"), ("b", "deny", "denied")):
        result = await graph.ainvoke({"command": f"ls {thread}"}, config(thread))
        [pending] = paused(result)
        await aresume_with_decisions(
            graph,
            config(thread),
            decide(requested_of(pending), kind),
            actor=HUMAN,
            authority=memory_backend.authority,
        )
        state = await graph.aget_state(config(thread))
        assert state.values["outcome"] == outcome
    assert effects.ran == ["ls a"]

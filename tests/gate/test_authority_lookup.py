"""Where a gate finds its authority: runtime context, ``configurable``, or nowhere (an error)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from langgraph.graph import END, START, StateGraph

from aais_langgraph import ApprovalAuthority, ThreadDriver, request_approval, resume_with_decisions
from aais_langgraph.gate import AUTHORITY_KEY

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


@dataclass
class Context:
    user: str
    authority: ApprovalAuthority | None = None


def graph_without_authority(backend: Backend, effects: Effects, **options: Any) -> Any:
    def act(state: State) -> dict[str, Any]:
        resolved = request_approval(shell_action(state["command"]))  # no authority=...
        if resolved.approved:
            effects.run(state["command"])
        return {"outcome": resolved.resolution.outcome}

    builder = StateGraph(State, **options)
    builder.add_node("act", act)
    builder.add_edge(START, "act")
    builder.add_edge("act", END)
    return builder.compile(checkpointer=backend.saver)


def test_authority_from_the_runtime_context(backend: Backend, effects: Effects) -> None:
    graph = graph_without_authority(backend, effects, context_schema=Context)
    context = Context("alex", backend.authority)
    [pending] = paused(graph.invoke({"command": "ls"}, config("t-ctx"), context=context))

    # The context is not persisted: pass it again on resume (no authority= either).
    [resolved] = resume_with_decisions(
        graph, config("t-ctx"), decide(requested_of(pending)), actor=HUMAN, context=context
    )

    assert resolved.approved
    assert effects.ran == ["ls"]


def test_authority_from_configurable(backend: Backend, effects: Effects) -> None:
    graph = graph_without_authority(backend, effects)
    carrying = {"configurable": {"thread_id": "t-conf", AUTHORITY_KEY: backend.authority}}
    [pending] = paused(graph.invoke({"command": "ls"}, carrying))

    [resolved] = resume_with_decisions(graph, carrying, decide(requested_of(pending)), actor=HUMAN)

    assert resolved.approved
    assert effects.ran == ["ls"]


def test_resume_hands_an_explicit_authority_to_gates_that_look_in_configurable(
    backend: Backend, effects: Effects
) -> None:
    graph = graph_without_authority(backend, effects)
    carrying = {"configurable": {"thread_id": "t-conf", AUTHORITY_KEY: backend.authority}}
    [pending] = paused(graph.invoke({"command": "ls"}, carrying))

    resume_with_decisions(
        graph,
        config("t-conf"),  # the presenter's config carries only the thread
        decide(requested_of(pending), "deny"),
        actor=HUMAN,
        authority=backend.authority,
    )

    assert graph.get_state(config("t-conf")).values["outcome"] == "denied"


def test_sweep_resumes_gates_that_look_in_configurable(backend: Backend, effects: Effects) -> None:
    graph = graph_without_authority(backend, effects)
    carrying = {"configurable": {"thread_id": "t-conf", AUTHORITY_KEY: backend.authority}}
    paused(graph.invoke({"command": "ls"}, carrying))
    backend.clock.advance(3600)

    [expired] = ThreadDriver(graph, backend.authority).sweep_expired()

    assert expired.resolution.outcome == "expired"
    assert graph.get_state(config("t-conf")).values["outcome"] == "expired"


def test_a_missing_authority_is_a_clear_error(backend: Backend, effects: Effects) -> None:
    graph = graph_without_authority(backend, effects, context_schema=Context)

    with pytest.raises(RuntimeError, match=r"authority.*context.*configurable"):
        graph.invoke({"command": "ls"}, config("t-none"), context=Context("alex"))
    with pytest.raises(ValueError, match="authority"):
        resume_with_decisions(graph, config("t-none"), [], actor=HUMAN)
    assert effects.ran == []

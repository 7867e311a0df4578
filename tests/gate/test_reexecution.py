"""A node re-runs from its start on resume: request ids stay put, and time of use is checked."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command
from pydantic import ValidationError

from aais_langgraph import request_approval, resume_with_decisions

from .support import (
    HUMAN,
    Backend,
    Effects,
    State,
    config,
    decide,
    paused,
    pending_ids,
    requested_of,
    shell_action,
    tampered,
)

THREAD = "t-rerun"


def compile_node(backend: Backend, node: Any) -> Any:
    builder = StateGraph(State)
    builder.add_node("act", node)
    builder.add_edge(START, "act")
    builder.add_edge("act", END)
    return builder.compile(checkpointer=backend.saver)


def test_code_before_the_gate_runs_again_and_the_request_id_stays(
    backend: Backend, effects: Effects
) -> None:
    entries: list[str] = []

    def act(state: State) -> dict[str, Any]:
        entries.append("entered")  # runs on every (re-)execution of the node
        resolved = request_approval(shell_action("ls -la"), authority=backend.authority)
        if resolved.approved:
            effects.run("ls -la")
        return {"request_ids": [resolved.resolution.request_id]}

    graph = compile_node(backend, act)
    [first] = paused(graph.invoke({}, config(THREAD)))
    request_id = requested_of(first).request.id
    requested = requested_of(first)

    with pytest.raises(ValidationError):  # a refused answer re-runs the node too
        graph.invoke(Command(resume={first.id: tampered(decide(requested))}), config(THREAD))
    assert pending_ids(graph, THREAD) == [first.id]
    [resolved] = resume_with_decisions(
        graph, config(THREAD), decide(requested), actor=HUMAN, authority=backend.authority
    )

    assert entries == ["entered"] * 3
    assert resolved.resolution.request_id == request_id
    assert graph.get_state(config(THREAD)).values["request_ids"] == [request_id]
    assert effects.ran == ["ls -la"]
    requested_events = [
        event
        for event in backend.authority.ledger.events_after(0)
        if event["type"] == "approval.requested"
    ]
    assert [event["request"]["id"] for event in requested_events] == [request_id]
    assert requested_events[0]["request"]["created_at"] == requested.request.created_at


def test_two_gates_in_one_node_keep_their_own_ids(backend: Backend, effects: Effects) -> None:
    def act(state: State) -> dict[str, Any]:
        first = request_approval(shell_action("ls one"), authority=backend.authority)
        second = request_approval(shell_action("ls two"), authority=backend.authority)
        for resolved in (first, second):
            if resolved.approved:
                effects.run(resolved.resolution.request_id)
        return {"request_ids": [first.resolution.request_id, second.resolution.request_id]}

    graph = compile_node(backend, act)
    [one] = paused(graph.invoke({}, config(THREAD)))
    requested_one = requested_of(one)
    [two] = paused(
        graph.invoke(Command(resume={one.id: decide(requested_one).to_json()}), config(THREAD))
    )
    requested_two = requested_of(two)
    assert requested_two.request.id != requested_one.request.id
    assert requested_two.request.action.arguments["command"] == "ls two"

    graph.invoke(Command(resume={two.id: decide(requested_two, "deny").to_json()}), config(THREAD))

    ids = [requested_one.request.id, requested_two.request.id]
    assert graph.get_state(config(THREAD)).values["request_ids"] == ids
    assert effects.ran == [requested_one.request.id]


def test_an_action_that_changed_outside_the_state_is_stale_at_time_of_use(
    backend: Backend, effects: Effects
) -> None:
    """The node builds its action from data outside the graph state, which changes while
    the human looks at the request: the approval must not run the changed action."""
    outside = {"command": "ls -la"}

    def act(state: State) -> dict[str, Any]:
        resolved = request_approval(shell_action(outside["command"]), authority=backend.authority)
        if resolved.approved:
            effects.run(outside["command"])
        return {"outcome": resolved.resolution.outcome}

    graph = compile_node(backend, act)
    [pending] = paused(graph.invoke({}, config(THREAD)))
    requested = requested_of(pending)
    outside["command"] = "rm -rf /"

    [recorded] = resume_with_decisions(
        graph, config(THREAD), decide(requested), actor=HUMAN, authority=backend.authority
    )

    assert recorded.approved  # the human did approve what they saw ...
    assert effects.ran == []  # ... but that is not what would run now
    assert graph.get_state(config(THREAD)).values["outcome"] == "stale"


def test_time_of_use_on_the_raw_path(backend: Backend, effects: Effects) -> None:
    outside = {"command": "ls -la"}

    def act(state: State) -> dict[str, Any]:
        resolved = request_approval(shell_action(outside["command"]), authority=backend.authority)
        if resolved.approved:
            effects.run(outside["command"])
        return {"outcome": resolved.resolution.outcome}

    graph = compile_node(backend, act)
    [pending] = paused(graph.invoke({}, config(THREAD)))
    requested = requested_of(pending)
    outside["command"] = "rm -rf /"

    result = graph.invoke(Command(resume={pending.id: decide(requested).to_json()}), config(THREAD))

    assert result["outcome"] == "stale"
    assert effects.ran == []
    recorded = backend.authority.get_resolution(requested.request.id)
    assert recorded is not None and recorded.resolution.outcome == "stale"

"""Answers that must change nothing: unknown ids, another thread's request, a held lease."""

from __future__ import annotations

import time
from typing import Any

import pytest

from aais_langgraph import (
    AAISValidationError,
    LeaseHeldError,
    UnknownRequestError,
    resume_with_decisions,
)
from hostile.report import refused

from .support import (
    HUMAN,
    Backend,
    Effects,
    config,
    decide,
    gated_graph,
    opened,
    paused,
    pending_ids,
    requested_of,
)

THREAD = "t-err"


def start(backend: Backend, effects: Effects, thread: str = THREAD) -> tuple[Any, Any, Any]:
    graph = gated_graph(backend, effects)
    [pending] = paused(graph.invoke({"command": "ls"}, config(thread)))
    return graph, pending, requested_of(pending)


def unchanged(backend: Backend, graph: Any, pending: Any, effects: Effects, sequence: int) -> None:
    assert backend.authority.ledger.last_sequence() == sequence
    assert backend.authority.get_resolution(requested_of(pending).request.id) is None
    assert pending_ids(graph, THREAD) == [pending.id]
    assert effects.ran == []


def test_an_unknown_request_id_raises_and_changes_nothing(
    backend: Backend, effects: Effects
) -> None:
    graph, pending, requested = start(backend, effects)
    unknown = decide(requested).to_json()
    unknown["decision"]["request_id"] = "apr_does_not_exist"
    sequence = backend.authority.ledger.last_sequence()
    observe = opened(backend, effects, requested)

    with refused("library", UnknownRequestError, opened=observe):
        resume_with_decisions(
            graph, config(THREAD), unknown, actor=HUMAN, authority=backend.authority
        )
    # Not even the valid decision next to it is recorded.
    with refused("library", UnknownRequestError, opened=observe):
        resume_with_decisions(
            graph,
            config(THREAD),
            [decide(requested), unknown],
            actor=HUMAN,
            authority=backend.authority,
        )

    unchanged(backend, graph, pending, effects, sequence)


def test_a_decision_for_another_threads_request_is_refused(
    backend: Backend, effects: Effects
) -> None:
    graph, pending, requested = start(backend, effects)
    sequence = backend.authority.ledger.last_sequence()

    with refused(
        "library", AAISValidationError, opened=opened(backend, effects, requested)
    ) as caught:
        resume_with_decisions(
            graph,
            config("t-someone-else"),
            decide(requested),
            actor=HUMAN,
            authority=backend.authority,
        )
    caught.match("another thread")

    unchanged(backend, graph, pending, effects, sequence)


def test_a_held_lease_refuses_a_second_presenter(backend: Backend, effects: Effects) -> None:
    graph, pending, requested = start(backend, effects)
    ledger = backend.authority.ledger
    assert ledger.acquire_lease(THREAD, "presenter-1", ttl=60, now=time.time()) is not None
    sequence = ledger.last_sequence()

    with refused("library", LeaseHeldError, opened=opened(backend, effects, requested)):
        resume_with_decisions(
            graph,
            config(THREAD),
            decide(requested),
            actor=HUMAN,
            authority=backend.authority,
            lease_wait=0,
        )

    unchanged(backend, graph, pending, effects, sequence)
    assert ledger.release_lease(THREAD, "presenter-1")
    [resolved] = resume_with_decisions(
        graph,
        config(THREAD),
        decide(requested),
        actor=HUMAN,
        authority=backend.authority,
        lease_wait=0,
    )
    assert resolved.approved
    assert effects.ran == ["ls"]


def test_the_lease_is_released_when_the_resumed_run_fails(
    backend: Backend, effects: Effects
) -> None:
    from langgraph.graph import END, START, StateGraph

    from aais_langgraph import request_approval

    from .support import State, shell_action

    def act(state: State) -> dict[str, Any]:
        resolved = request_approval(shell_action("boom"), authority=backend.authority)
        if resolved.approved:
            raise OSError("the action failed")
        return {}

    builder = StateGraph(State)
    builder.add_node("act", act)
    builder.add_edge(START, "act")
    builder.add_edge("act", END)
    graph = builder.compile(checkpointer=backend.saver)
    [pending] = paused(graph.invoke({}, config(THREAD)))

    with pytest.raises(OSError):
        resume_with_decisions(
            graph,
            config(THREAD),
            decide(requested_of(pending)),
            actor=HUMAN,
            authority=backend.authority,
        )

    lease = backend.authority.ledger.acquire_lease(THREAD, "next", ttl=60, now=time.time())
    assert lease is not None

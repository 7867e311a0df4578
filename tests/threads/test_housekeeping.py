"""Unsticking runs: ``sweep_expired``, ``cancel_thread`` and ``Cancellation``."""

from __future__ import annotations

from typing import Any

from aais_langgraph import Cancellation, ThreadDriver, pending_approvals, resume_with_decisions
from gate.support import (
    HUMAN,
    Backend,
    Effects,
    by_command,
    config,
    decide,
    fan_out_graph,
    gated_graph,
    paused,
    requested_of,
)


def start(graph: Any, thread: str, command: str = "ls") -> Any:
    [pending] = paused(graph.invoke({"command": command}, config(thread)))
    return requested_of(pending)


def test_sweep_expired_resolves_overdue_requests_and_resumes_their_runs(
    backend: Backend, effects: Effects
) -> None:
    graph = gated_graph(backend, effects)
    first, second = start(graph, "t-1"), start(graph, "t-2")
    backend.clock.advance(10 * 60)
    later = start(graph, "t-3")  # expires 15 minutes from now
    backend.clock.advance(6 * 60)

    expired = ThreadDriver(graph, backend.authority).sweep_expired()

    assert sorted(r.resolution.request_id for r in expired) == sorted(
        [first.request.id, second.request.id]
    )
    assert {r.resolution.outcome for r in expired} == {"expired"}
    for thread in ("t-1", "t-2"):
        state = graph.get_state(config(thread))
        assert state.next == ()
        assert state.values["outcome"] == "expired"  # the node saw the expiry
    assert [r.id for r in pending_approvals(backend.authority, graph).snapshot.pending] == [
        later.request.id
    ]
    assert ThreadDriver(graph, backend.authority).sweep_expired() == []
    assert effects.ran == []


def test_cancel_thread_cancels_every_pending_request_of_the_thread(
    backend: Backend, effects: Effects
) -> None:
    graph = fan_out_graph(backend, effects)
    paused(graph.invoke({"commands": ["ls a", "ls b", "ls c"]}, config("t-fan")))
    other = start(gated_graph(backend, effects), "t-other")

    cancelled = ThreadDriver(graph, backend.authority).cancel_thread("t-fan")

    assert len(cancelled) == 3
    assert {r.resolution.outcome for r in cancelled} == {"cancelled"}
    state = graph.get_state(config("t-fan"))
    assert state.next == ()
    assert sorted(state.values["outcomes"]) == [
        "ls a=cancelled",
        "ls b=cancelled",
        "ls c=cancelled",
    ]
    assert effects.ran == []
    still = pending_approvals(backend.authority).snapshot.pending
    assert [r.id for r in still] == [other.request.id]


def test_a_cancellation_through_resume_with_decisions(backend: Backend, effects: Effects) -> None:
    graph = fan_out_graph(backend, effects)
    pending = by_command(paused(graph.invoke({"commands": ["ls a", "ls b"]}, config("t-c"))))

    results = resume_with_decisions(
        graph,
        config("t-c"),
        [
            Cancellation(pending["ls a"][1].request.id, reason="Not needed any more."),
            decide(pending["ls b"][1]),
        ],
        actor=HUMAN,
        authority=backend.authority,
    )

    assert [r.resolution.outcome for r in results] == ["cancelled", "approved"]
    assert results[0].resolution.message == "Not needed any more."
    assert effects.ran == ["ls b"]
    assert sorted(graph.get_state(config("t-c")).values["outcomes"]) == [
        "ls a=cancelled",
        "ls b=approved",
    ]

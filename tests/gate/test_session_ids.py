"""Session ids derived from client-chosen thread ids never let one thread's grant reach another."""

from __future__ import annotations

from typing import Any

import pytest

from aais_langgraph import resume_with_decisions

from .support import (
    HUMAN,
    SESSION_CHOICES,
    Backend,
    Effects,
    config,
    decide,
    gated_graph,
    paused,
    requested_of,
)

# Pairs of thread ids that a lossy sanitiser (replace, cut at 200, prefix "x") made one session.
COLLIDING_THREADS = [
    ("alice/work", "alice work"),
    ("bobé", "bob_"),
    ("_abc", "x_abc"),
    ("p" * 200 + "-alice", "p" * 200 + "-mallory"),
]


def _approve_session(graph: Any, backend: Backend, thread: str) -> str:
    [pending] = paused(graph.invoke({"command": "ls -la"}, config(thread)))
    requested = requested_of(pending)
    [resolved] = resume_with_decisions(
        graph,
        config(thread),
        decide(requested, scope="session"),
        actor=HUMAN,
        authority=backend.authority,
    )
    assert resolved.approved
    return requested.request.origin.session_id


@pytest.mark.parametrize(
    ("granted", "other"), COLLIDING_THREADS, ids=["slash", "accent", "prefix", "cut"]
)
def test_a_session_grant_does_not_reach_a_thread_whose_id_sanitises_alike(
    backend: Backend, effects: Effects, granted: str, other: str
) -> None:
    graph = gated_graph(backend, effects, choices=SESSION_CHOICES)
    session = _approve_session(graph, backend, granted)

    result = graph.invoke({"command": "ls /tmp"}, config(other))

    [asked] = paused(result)
    assert requested_of(asked).request.origin.session_id != session
    assert effects.ran == ["ls -la"]


def test_the_session_grant_still_covers_its_own_thread(backend: Backend, effects: Effects) -> None:
    graph = gated_graph(backend, effects, choices=SESSION_CHOICES)
    _approve_session(graph, backend, "alice/work")

    assert not paused(graph.invoke({"command": "ls /tmp"}, config("alice/work")))
    assert effects.ran == ["ls -la", "ls /tmp"]


def test_a_valid_thread_id_is_its_own_session_id(backend: Backend, effects: Effects) -> None:
    graph = gated_graph(backend, effects, choices=SESSION_CHOICES)

    assert _approve_session(graph, backend, "thread-1.a:b_c") == "thread-1.a:b_c"

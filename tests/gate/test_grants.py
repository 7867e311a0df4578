"""Standing approvals: a ``session`` grant covers its thread, a ``persistent`` one every thread."""

from __future__ import annotations

from typing import Any

from aais_langgraph import pending_approvals, resume_with_decisions

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


def approve_first(backend: Backend, effects: Effects, scope: str) -> Any:
    graph = gated_graph(backend, effects, choices=SESSION_CHOICES)
    [pending] = paused(graph.invoke({"command": "ls -la"}, config("t-a")))
    [resolved] = resume_with_decisions(
        graph,
        config("t-a"),
        decide(requested_of(pending), scope=scope),
        actor=HUMAN,
        authority=backend.authority,
    )
    assert resolved.approved
    assert resolved.resolution.effective_scope == scope
    assert effects.ran == ["ls -la"]
    return graph


def runs_without_asking(graph: Any, command: str, thread: str) -> bool:
    result = graph.invoke({"command": command}, config(thread))
    if paused(result):
        return False
    assert result["outcome"] == "approved"
    return True


def test_session_grant_covers_the_next_matching_action_in_the_same_thread(
    backend: Backend, effects: Effects
) -> None:
    graph = approve_first(backend, effects, "session")

    assert runs_without_asking(graph, "ls /tmp", "t-a")
    assert effects.ran == ["ls -la", "ls /tmp"]
    assert pending_approvals(backend.authority, graph).snapshot.pending == []


def test_session_grant_does_not_reach_another_thread(backend: Backend, effects: Effects) -> None:
    graph = approve_first(backend, effects, "session")

    assert not runs_without_asking(graph, "ls /tmp", "t-b")
    assert effects.ran == ["ls -la"]


def test_an_action_outside_the_constraints_still_asks(backend: Backend, effects: Effects) -> None:
    graph = approve_first(backend, effects, "session")

    assert not runs_without_asking(graph, "rm -rf /tmp", "t-a")
    assert not runs_without_asking(graph, "cat /etc/passwd", "t-a2")
    assert effects.ran == ["ls -la"]


def test_persistent_grant_works_across_threads_until_revoked(
    backend: Backend, effects: Effects
) -> None:
    graph = approve_first(backend, effects, "persistent")

    assert runs_without_asking(graph, "ls /srv", "t-b")
    assert runs_without_asking(graph, "ls /opt", "t-c")
    assert not runs_without_asking(graph, "rm -rf /srv", "t-d")
    assert effects.ran == ["ls -la", "ls /srv", "ls /opt"]

    [grant] = backend.authority.list_grants()
    assert grant.scope == "persistent"
    assert backend.authority.revoke_grant(grant.grant_id)

    assert not runs_without_asking(graph, "ls /srv", "t-e")
    assert effects.ran == ["ls -la", "ls /srv", "ls /opt"]


def test_approve_once_grants_nothing(backend: Backend, effects: Effects) -> None:
    graph = approve_first(backend, effects, "once")

    assert not runs_without_asking(graph, "ls /tmp", "t-a")
    assert backend.authority.list_grants() == []

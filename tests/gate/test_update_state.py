"""The action changes while it waits: a decision about what was shown never runs what was not."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.types import Command
from pydantic import ValidationError

from aais_langgraph import pending_approvals, resume_with_decisions

from .support import HUMAN, Backend, Effects, config, decide, gated_graph, paused, requested_of

THREAD = "t-edit"


def start_and_edit(backend: Backend, effects: Effects) -> tuple[Any, Any, Any]:
    graph = gated_graph(backend, effects)
    [pending] = paused(graph.invoke({"command": "ls -la"}, config(THREAD)))
    requested = requested_of(pending)
    # Someone edits the paused run's state: the gated action would now be different.
    graph.update_state(config(THREAD), {"command": "rm -rf /"})
    return graph, pending, requested


def test_the_old_decision_is_stale_and_nothing_runs(backend: Backend, effects: Effects) -> None:
    # For comparison: HumanInTheLoopMiddleware (per_call) binds an answer to the
    # interrupt, not to the arguments. After this update_state a plain
    # Command(resume={"type": "approve"}) answers the re-raised interrupt and the
    # edited arguments execute although no human saw them. Here a decision names
    # the request id and the digest of the action the human saw.
    graph, _, requested = start_and_edit(backend, effects)

    [resolved] = resume_with_decisions(
        graph, config(THREAD), decide(requested), actor=HUMAN, authority=backend.authority
    )

    assert resolved.resolution.outcome == "stale"
    assert effects.ran == []
    recorded = backend.authority.get_resolution(requested.request.id)
    assert recorded is not None and recorded.resolution.outcome == "stale"
    assert pending_approvals(backend.authority, graph).snapshot.pending == []

    # Running on asks about the action as it is now: a new request, a new digest.
    [pending] = paused(graph.invoke(None, config(THREAD)))
    fresh = requested_of(pending).request
    assert fresh.action.arguments["command"] == "rm -rf /"
    assert fresh.id != requested.request.id
    assert fresh.action_digest != requested.request.action_digest
    assert effects.ran == []


def test_the_old_interrupt_id_is_ignored_by_the_raw_path(
    backend: Backend, effects: Effects
) -> None:
    graph, old_pending, requested = start_and_edit(backend, effects)

    result = graph.invoke(
        Command(resume={old_pending.id: decide(requested).to_json()}), config(THREAD)
    )

    assert effects.ran == []
    [pending] = paused(result)
    assert requested_of(pending).request.action.arguments["command"] == "rm -rf /"


def test_a_plain_resume_cannot_carry_the_old_decision_to_the_new_action(
    backend: Backend, effects: Effects
) -> None:
    graph, _, requested = start_and_edit(backend, effects)

    with pytest.raises(ValidationError):
        graph.invoke(Command(resume=decide(requested).to_json()), config(THREAD))

    assert effects.ran == []
    assert backend.authority.get_resolution(requested.request.id) is None

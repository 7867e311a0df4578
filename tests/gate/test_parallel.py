"""Several approvals pending at once: each decision lands on its own action, in any order."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.types import Command
from pydantic import ValidationError

from aais_langgraph import pending_approvals, resume_with_decisions

from .support import (
    HUMAN,
    Backend,
    Effects,
    by_command,
    config,
    decide,
    fan_out_graph,
    paused,
    pending_ids,
    two_branch_graph,
)

THREAD = "t-par"
FAN = ["ls a", "ls b", "ls c"]


def answer(backend: Backend, graph: Any, decisions: Any) -> Any:
    return resume_with_decisions(
        graph, config(THREAD), decisions, actor=HUMAN, authority=backend.authority
    )


def start_branches(backend: Backend, effects: Effects) -> tuple[Any, dict[str, Any]]:
    graph = two_branch_graph(backend, effects)
    pending = by_command(paused(graph.invoke({}, config(THREAD))))
    assert set(pending) == {"ls left", "ls right"}
    return graph, pending


def start_fan(backend: Backend, effects: Effects) -> tuple[Any, dict[str, Any]]:
    graph = fan_out_graph(backend, effects)
    pending = by_command(paused(graph.invoke({"commands": FAN}, config(THREAD))))
    assert set(pending) == set(FAN)
    assert len({requested.request.id for _, requested in pending.values()}) == 3
    return graph, pending


def outcomes(graph: Any) -> list[str]:
    return sorted(graph.get_state(config(THREAD)).values.get("outcomes", []))


def test_two_branches_answered_together_in_reversed_order(
    backend: Backend, effects: Effects
) -> None:
    graph, pending = start_branches(backend, effects)
    decisions = [decide(pending["ls right"][1], "deny"), decide(pending["ls left"][1])]

    results = answer(backend, graph, decisions)

    assert [r.resolution.outcome for r in results] == ["denied", "approved"]
    assert effects.ran == ["ls left"]
    assert outcomes(graph) == ["ls left=approved", "ls right=denied"]


def test_two_branches_answered_one_at_a_time(backend: Backend, effects: Effects) -> None:
    graph, pending = start_branches(backend, effects)

    [first] = answer(backend, graph, decide(pending["ls right"][1]))
    assert first.approved
    assert effects.ran == ["ls right"]
    still = pending_approvals(backend.authority, graph).snapshot.pending
    assert [request.id for request in still] == [pending["ls left"][1].request.id]
    assert pending_ids(graph, THREAD) == [pending["ls left"][0].id]

    [second] = answer(backend, graph, decide(pending["ls left"][1], "deny"))
    assert second.resolution.outcome == "denied"
    assert effects.ran == ["ls right"]
    assert outcomes(graph) == ["ls left=denied", "ls right=approved"]
    assert graph.get_state(config(THREAD)).next == ()


def test_raw_resume_map_in_reversed_order(backend: Backend, effects: Effects) -> None:
    graph, pending = start_branches(backend, effects)
    left, right = pending["ls left"], pending["ls right"]

    graph.invoke(
        Command(
            resume={
                right[0].id: decide(right[1]).to_json(),
                left[0].id: decide(left[1], "deny").to_json(),
            }
        ),
        config(THREAD),
    )

    assert effects.ran == ["ls right"]
    assert outcomes(graph) == ["ls left=denied", "ls right=approved"]


def test_decisions_swapped_between_interrupts_are_refused(
    backend: Backend, effects: Effects
) -> None:
    graph, pending = start_branches(backend, effects)
    left, right = pending["ls left"], pending["ls right"]

    with pytest.raises(ValidationError):
        graph.invoke(
            Command(
                resume={
                    left[0].id: decide(right[1]).to_json(),
                    right[0].id: decide(left[1]).to_json(),
                }
            ),
            config(THREAD),
        )

    assert effects.ran == []
    assert sorted(pending_ids(graph, THREAD)) == sorted([left[0].id, right[0].id])


def test_send_fan_out_answered_in_one_call_in_reversed_order(
    backend: Backend, effects: Effects
) -> None:
    graph, pending = start_fan(backend, effects)
    kinds = {"ls a": "deny", "ls b": "approve", "ls c": "deny"}
    decisions = [decide(pending[command][1], kinds[command]) for command in reversed(FAN)]

    results = answer(backend, graph, decisions)

    assert [r.resolution.outcome for r in results] == ["denied", "approved", "denied"]
    assert effects.ran == ["ls b"]
    assert outcomes(graph) == ["ls a=denied", "ls b=approved", "ls c=denied"]


def test_send_fan_out_answered_one_at_a_time(backend: Backend, effects: Effects) -> None:
    graph, pending = start_fan(backend, effects)

    for command, kind in (("ls c", "approve"), ("ls a", "deny"), ("ls b", "approve")):
        [resolved] = answer(backend, graph, decide(pending[command][1], kind))
        assert resolved.resolution.request_id == pending[command][1].request.id

    assert sorted(effects.ran) == ["ls b", "ls c"]
    assert len(effects.ran) == 2
    assert outcomes(graph) == ["ls a=denied", "ls b=approved", "ls c=approved"]
    assert pending_approvals(backend.authority, graph).snapshot.pending == []

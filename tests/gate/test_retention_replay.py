"""A run replayed after retention removed its request executes nothing."""

from __future__ import annotations

import time
from typing import Any

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command

from aais_langgraph import requires_approval
from aais_langgraph.ledger.retention import CompactedRequestError, RetentionPolicy

from .support import Backend, Effects, State, config, decide, paused, requested_of, shell_action

THREAD = "t-retention"


def _graph(backend: Backend, effects: Effects) -> Any:
    @requires_approval(lambda state: shell_action(state["command"]), authority=backend.authority)
    def act(state: State) -> dict[str, Any]:
        effects.run(state["command"])
        return {"outcome": "approved"}

    builder = StateGraph(State)
    builder.add_node("act", act)
    builder.add_edge(START, "act")
    builder.add_edge("act", END)
    return builder.compile(checkpointer=backend.saver)


def test_a_decision_replayed_into_a_run_after_compaction_runs_nothing(
    backend: Backend, effects: Effects
) -> None:
    graph = _graph(backend, effects)
    [first] = paused(graph.invoke({"command": "ls -la"}, config(THREAD)))
    decided = decide(requested_of(first)).to_json()
    graph.invoke(Command(resume={first.id: decided}), config(THREAD))
    assert effects.ran == ["ls -la"]
    paused_at = next(s for s in graph.get_state_history(config(THREAD)) if s.interrupts)

    ledger = backend.authority.ledger
    report = ledger.compact_history(RetentionPolicy(keep_last=0), now=time.time())
    assert report.requests_removed == 1

    # Time travel to the paused checkpoint with the old answer: the gate re-runs, finds its
    # request gone, and may not store it again; nothing runs.
    with pytest.raises(CompactedRequestError):
        graph.invoke(Command(resume={first.id: decided}), paused_at.config)
    assert effects.ran == ["ls -la"]
    assert backend.authority.verify_audit().ok

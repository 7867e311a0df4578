"""An answer that arrives with the resume is recorded by the run's gate, in one ledger write.

The planner authorizes it first and hands it to the run unrecorded; the gate records
the resolution, the execution claim and the resume work in one transaction
(``Ledger.record_resolution_claiming``), and the lease's release marks the work done.
No client input can pose as a handed answer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command

from aais_langgraph import RejectedResumeError, request_approval
from aais_langgraph.authority import AskEveryTime
from aais_langgraph.gate import AUTHORIZED_ANSWERS_KEY, AuthorizedAnswer, AuthorizedAnswers
from aais_langgraph.gate.answer_sources import RECORDED_ONLY, AnswerSource
from aais_langgraph.gate.response import RefusalCarrier
from aais_langgraph.ledger import RESUME
from aais_langgraph.protocol import build_decision
from aais_langgraph.threads import ThreadDriver, waiting_resumes
from gate.support import (
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

THREAD = "t-1"


class Writes:
    """Counts the ledger's resolution and execution writes (wrapping the real ones)."""

    def __init__(self, backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[str] = []
        ledger = backend.authority.ledger
        for name in ("record_resolution", "record_resolution_claiming", "update_execution"):
            monkeypatch.setattr(ledger, name, self._counted(name, getattr(ledger, name)))

    def _counted(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            return method(*args, **kwargs)

        return counted


def _graph(backend: Backend, effects: Effects, *, idempotent: bool = False) -> Any:
    """START -> act -> END; ``act`` asks for approval of ``state["command"]``, then runs it."""

    def act(state: State) -> dict[str, Any]:
        action = shell_action(state["command"])
        resolved = request_approval(action, authority=backend.authority, idempotent=idempotent)
        if resolved.approved:
            effects.run(state["command"])
        return {"outcome": resolved.resolution.outcome}

    builder = StateGraph(State)
    builder.add_node("act", act)
    builder.add_edge(START, "act")
    builder.add_edge("act", END)
    return builder.compile(checkpointer=backend.saver)


def _paused(backend: Backend, effects: Effects, *, idempotent: bool = False) -> tuple[Any, Any]:
    graph = _graph(backend, effects, idempotent=idempotent)
    (pending,) = paused(graph.invoke({"command": "ls -la"}, config(THREAD)))
    return graph, requested_of(pending)


@pytest.mark.parametrize("served", [False, True])
def test_the_gate_records_the_approval_with_its_claim_in_one_write(
    backend: Backend, effects: Effects, monkeypatch: pytest.MonkeyPatch, served: bool
) -> None:
    graph, requested = _paused(backend, effects)
    request_id = requested.request.id
    writes = Writes(backend, monkeypatch)

    driver = ThreadDriver(graph, backend.authority, served=served)
    [resolved] = driver.resume_with_decisions(config(THREAD), decide(requested), actor=HUMAN)

    assert resolved.approved and effects.ran == ["ls -la"]
    # The one write (resolution + claim + resume work); then the claim settled executed.
    assert writes.calls[0] == "record_resolution_claiming"
    assert "record_resolution" not in writes.calls
    recorded = backend.authority.get_resolution(request_id)
    assert recorded is not None and recorded.resolution.id == resolved.resolution.id
    assert recorded.resolution.outcome == "approved"
    execution = backend.authority.execution(request_id)
    assert execution is not None and execution.state == "executed"
    work = backend.authority.ledger.get_work(RESUME, request_id)
    assert work is not None and work.state == "done"
    assert waiting_resumes(backend.authority) == []
    assert graph.get_state(config(THREAD)).next == ()


def test_the_recorded_actor_is_the_authenticated_one(backend: Backend, effects: Effects) -> None:
    graph, requested = _paused(backend, effects)
    forged = build_decision(
        requested, decision="approve", actor={"id": "user_mallory", "type": "human"}
    )

    ThreadDriver(graph, backend.authority, served=True).resume_with_decisions(
        config(THREAD), forged, actor=HUMAN
    )

    recorded = backend.authority.get_resolution(requested.request.id)
    assert recorded is not None and backend.authority.decided_by(recorded) == HUMAN["id"]


def test_an_idempotent_action_takes_no_execution_claim(
    backend: Backend, effects: Effects, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph, requested = _paused(backend, effects, idempotent=True)
    writes = Writes(backend, monkeypatch)

    [resolved] = ThreadDriver(graph, backend.authority).resume_with_decisions(
        config(THREAD), decide(requested), actor=HUMAN
    )

    assert resolved.approved and effects.ran == ["ls -la"]
    assert writes.calls == ["record_resolution"]  # no claim, in the write or after it
    assert backend.authority.execution(requested.request.id) is None


@pytest.mark.parametrize("kind", ["deny", "approve"])
def test_a_decision_the_gate_cannot_take_is_recorded_by_the_planner(
    backend: Backend, effects: Effects, kind: str
) -> None:
    """A late decision is recorded ``expired`` by the gate; a digest that does not bind is
    answered ``stale`` by the planner, nothing recorded, the run not resumed."""
    graph, requested = _paused(backend, effects)
    decided = decide(requested, kind)
    wrong = decided.model_copy(
        update={
            "decision": decided.decision.model_copy(update={"action_digest": "sha256:" + "0" * 64})
        }
    )

    [stale] = ThreadDriver(graph, backend.authority).resume_with_decisions(
        config(THREAD), wrong, actor=HUMAN
    )

    assert stale.resolution.outcome == "stale" and effects.ran == []
    assert backend.authority.get_resolution(requested.request.id) is None
    assert len(graph.get_state(config(THREAD)).interrupts) == 1

    backend.clock.advance(10 * 24 * 3600)  # past every default expiry
    [late] = ThreadDriver(graph, backend.authority).resume_with_decisions(
        config(THREAD), decided, actor=HUMAN
    )
    assert late.resolution.outcome == "expired" and effects.ran == []
    assert graph.get_state(config(THREAD)).next == ()


@pytest.mark.parametrize("posing", ["json", "other decision", "none"])
def test_no_client_input_poses_as_a_handed_answer(
    backend: Backend, effects: Effects, posing: str
) -> None:
    """A served run refuses a raw decision unless the planner handed that very decision:
    a JSON look-alike of the handoff, or a handoff of another decision, is no handoff."""
    graph = _graph(backend, effects)
    (pending,) = paused(graph.invoke({"command": "ls -la"}, config(THREAD)))
    requested = requested_of(pending)
    decided = decide(requested)
    driver = ThreadDriver(graph, backend.authority, served=True)
    run = driver.run_config(config(THREAD))
    configurable = dict(run["configurable"])
    if posing == "json":
        configurable[AUTHORIZED_ANSWERS_KEY] = {requested.request.id: decided.to_json()}
    elif posing == "other decision":
        handed = AuthorizedAnswers()
        stored = backend.authority.get_stored_request(requested.request.id)
        assert stored is not None
        handed.add(AuthorizedAnswer(decide(requested, "deny"), HUMAN, stored))
        configurable[AUTHORIZED_ANSWERS_KEY] = handed

    with pytest.raises(RejectedResumeError):
        graph.invoke(
            Command(resume={pending.id: decided.to_json()}),
            {**run, "configurable": configurable},
        )

    assert effects.ran == [] and backend.authority.get_resolution(requested.request.id) is None
    assert len(graph.get_state(config(THREAD)).interrupts) == 1


def test_a_replayed_decision_is_worth_its_recorded_resolution(
    backend: Backend, effects: Effects
) -> None:
    """LangGraph hands a task the answer it consumed before it failed: a raw decision the
    gate recorded is that resolution's notice; any other raw decision stays refused."""
    graph, requested = _paused(backend, effects)
    decided = decide(requested)
    [resolved] = ThreadDriver(graph, backend.authority).resume_with_decisions(
        config(THREAD), decided, actor=HUMAN
    )
    source = AnswerSource(refusal=RECORDED_ONLY)

    assert source.admit(decided, resolved) == resolved
    for answer, recorded in ((decide(requested, "deny"), resolved), (decided, None)):
        with pytest.raises(RefusalCarrier) as refused:
            source.admit(answer, recorded)
        assert str(refused.value) == f"/decision: {RECORDED_ONLY}"


class OnlyAlexApproves(AskEveryTime):
    """A policy that objects to every decision but Alex's (it reads the recorded actor)."""

    def on_decision(self, request: Any, decision: Any) -> str | None:
        return None if decision.actor.id == HUMAN["id"] else "Only Alex may decide."


def test_the_policy_judges_the_authenticated_actor_before_anything_is_handed(
    backend: Backend, effects: Effects
) -> None:
    """The body names Alex, the channel authenticated Mallory: the policy's objection is
    the answer (``invalid``), nothing is recorded and the run is not resumed."""
    graph, requested = _paused(backend, effects)
    backend.authority.policy = OnlyAlexApproves()
    mallory = {"id": "user_mallory", "type": "human"}

    [refused] = ThreadDriver(graph, backend.authority).resume_with_decisions(
        config(THREAD), decide(requested), actor=mallory
    )

    assert refused.resolution.outcome == "invalid" and effects.ran == []
    assert backend.authority.get_resolution(requested.request.id) is None
    assert len(graph.get_state(config(THREAD)).interrupts) == 1
    [approved] = ThreadDriver(graph, backend.authority).resume_with_decisions(
        config(THREAD), decide(requested), actor=HUMAN
    )
    assert approved.approved and effects.ran == ["ls -la"]

"""The execution claim: an approved action runs at most once per approval, without
getting in the way of nodes that ask more than once or of answers replayed by LangGraph."""

from __future__ import annotations

import threading
from typing import Any, TypedDict

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.types import Command

from aais_langgraph import ApprovalAuthority, ApprovalRequested, build_decision, request_approval

HUMAN = {"id": "alice", "type": "human"}


class State(TypedDict, total=False):
    done: list[str]


def action(name: str) -> dict[str, Any]:
    return {"kind": "test.step", "name": name, "summary": f"Run {name}", "arguments": {}}


def test_a_node_with_two_gates_is_answered_one_after_the_other() -> None:
    """The second resume replays the first gate's saved answer: no claim, no refusal."""
    authority = ApprovalAuthority()
    runs: list[str] = []

    def two_steps(state: State) -> State:
        first = request_approval(action("first"), authority=authority)
        second = request_approval(action("second"), authority=authority)
        if first.approved and second.approved:
            runs.append("both")
        return {"done": [first.resolution.outcome, second.resolution.outcome]}

    builder = StateGraph(State)
    builder.add_node("two_steps", two_steps)
    builder.add_edge(START, "two_steps")
    graph = builder.compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "two-gates"}}

    graph.invoke({}, config)
    for _ in range(2):
        [pending] = graph.get_state(config).interrupts
        requested = ApprovalRequested.from_data(pending.value)
        decided = build_decision(requested, decision="approve", actor=HUMAN)
        graph.invoke(Command(resume={pending.id: decided.to_json()}), config)

    assert graph.get_state(config).values["done"] == ["approved", "approved"]
    assert runs == ["both"]


def test_two_threads_resuming_the_same_interrupt_at_once_execute_once() -> None:
    """Raw ``Command(resume=...)`` from two threads of one process: one claim wins."""
    authority = ApprovalAuthority()
    runs: list[str] = []
    barrier = threading.Barrier(2)

    def gated(state: State) -> State:
        resolution = request_approval(action("deploy"), authority=authority)
        if resolution.approved:
            runs.append("deploy")
        return {"done": [resolution.resolution.outcome]}

    builder = StateGraph(State)
    builder.add_node("gated", gated)
    builder.add_edge(START, "gated")
    graph = builder.compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "race"}}
    [pending] = graph.invoke({}, config)["__interrupt__"]
    decided = build_decision(pending.value, decision="approve", actor=HUMAN).to_json()
    errors: list[str] = []

    def resume() -> None:
        barrier.wait()
        try:
            graph.invoke(Command(resume={pending.id: decided}), config)
        except Exception as error:  # the loser is refused; the test checks which error
            errors.append(type(error).__name__)

    racers = [threading.Thread(target=resume) for _ in range(2)]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join(timeout=30)

    assert runs == ["deploy"]
    assert errors in ([], ["RejectedResumeError"])


def test_a_refusal_says_why_with_a_code_not_its_message() -> None:
    """Code that reacts to a refusal reads ``code``; the message is for people."""
    import time

    from aais_langgraph.gate.execution import CLAIMED, Claim, ExecutionUnknownError, settle
    from aais_langgraph.gate.response import RefusalCarrier, RejectedResumeError
    from aais_langgraph.ledger.executions import claim_change
    from aais_langgraph.protocol import build_request

    authority = ApprovalAuthority()
    requested = authority.add(
        build_request(action("step"), origin={"harness": "test", "session_id": "s1"}), thread_id="t"
    )
    resolved = authority.decide(
        build_decision(requested, decision="approve", scope="once", actor=HUMAN), actor=HUMAN
    )
    request_id = requested.request.id
    authority.ledger.update_execution(
        request_id,
        claim_change(request_id, "other-run", thread_id="t", ttl=60, now=time.time(), retry=False),
    )
    try:
        settle(authority, requested.request, resolved, Claim(ttl=30, thread_id="t"))
    except RefusalCarrier as refusal:
        assert isinstance(refusal.error, RejectedResumeError)
        assert refusal.error.code == CLAIMED
    else:  # pragma: no cover
        raise AssertionError("a live claim of another run was not refused")
    assert ExecutionUnknownError(request_id).code == "execution_unknown"
    assert RejectedResumeError("/decision", "Refused by policy.").code == "refused"

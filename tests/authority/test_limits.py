"""Bounds on pending approvals per session and per requester, and on the request rate.

A request over a bound raises ``RequestLimitError`` naming the bound (never a value),
stores nothing, and frees up as requests resolve; a graph run that hits one stops
before the gated step, so nothing recorded is lost and a later run asks again.
"""

from __future__ import annotations

from typing import Any, TypedDict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from aais_langgraph import ApprovalRequested, build_decision
from aais_langgraph.authority import ApprovalAuthority, RequestLimitError, RequestLimits
from aais_langgraph.authority.limits import Bounds
from aais_langgraph.gate import REQUESTER_KEY, request_approval
from aais_langgraph.ledger import InMemoryLedger, Ledger
from hostile.report import record

from .support import action, decision, origin


def ask(authority: ApprovalAuthority, session: str = "s-1", **context: Any) -> ApprovalRequested:
    return authority.request(action(), origin=origin(session), context=context or None)


def test_a_session_over_its_bound_is_refused_and_nothing_is_stored(ledger: Ledger) -> None:
    authority = ApprovalAuthority(ledger, limits=RequestLimits(pending_per_session=2))
    first, _ = ask(authority), ask(authority)

    with pytest.raises(RequestLimitError) as refused:
        ask(authority)

    assert refused.value.pointer == "/request/origin/session_id"
    assert refused.value.code == "aais.limit_exceeded" and "s-1" not in str(refused.value)
    assert len(ledger.list_pending()) == 2
    ask(authority, "s-2")  # another session is not held back
    authority.decide(decision(first))
    ask(authority)  # a resolved request frees its place
    record("limits", 1)


def test_a_requester_is_bounded_over_all_their_sessions(ledger: Ledger) -> None:
    authority = ApprovalAuthority(ledger, limits=RequestLimits(pending_per_requester=2))
    ask(authority, "s-1", requester="mallory")
    ask(authority, "s-2", requester="mallory")

    with pytest.raises(RequestLimitError) as refused:
        ask(authority, "s-3", requester="mallory")

    assert refused.value.pointer == "/requester" and "mallory" not in str(refused.value)
    ask(authority, "s-3", requester="alice")
    ask(authority, "s-4")  # in-process code without a requester: only the session bound
    assert ledger.count_pending(requester="mallory", limit=10) == 2
    record("limits", 1)


def test_a_retried_add_of_a_stored_request_is_not_refused(ledger: Ledger) -> None:
    authority = ApprovalAuthority(ledger, limits=RequestLimits(pending_per_session=1))
    stored = ask(authority)

    again = authority.add(stored.to_json())

    assert again.request.id == stored.request.id


def test_the_rate_bound_counts_a_sliding_minute_per_requester(ledger: Ledger) -> None:
    now = [1000.0]
    limits = RequestLimits(requests_per_minute=3)
    authority = ApprovalAuthority(ledger, limits=limits)
    authority.bounds = Bounds(limits, ledger, clock=lambda: now[0])
    for session in ("s-1", "s-2", "s-3"):
        ask(authority, session, requester="bob")
        now[0] += 10

    with pytest.raises(RequestLimitError) as refused:
        ask(authority, "s-4", requester="bob")

    assert refused.value.retry_after == pytest.approx(30.0)
    ask(authority, "s-4", requester="carol")
    now[0] += 30.0
    ask(authority, "s-4", requester="bob")  # the first one left the window
    record("limits", 1)


def test_unbounded_turns_every_bound_off() -> None:
    authority = ApprovalAuthority(InMemoryLedger(), limits=RequestLimits.unbounded())
    for _ in range(3):
        ask(authority, requester="bob")
    with pytest.raises(ValueError, match="pending_per_session"):
        RequestLimits(pending_per_session=0)


@settings(max_examples=60, deadline=None)
@given(
    limit=st.integers(1, 5),
    gaps=st.lists(st.floats(0.0, 40.0, allow_nan=False), min_size=1, max_size=30),
)
def test_no_minute_ever_holds_more_than_the_rate(limit: int, gaps: list[float]) -> None:
    now = [0.0]
    bounds = Bounds(RequestLimits(None, None, limit), InMemoryLedger(), clock=lambda: now[0])
    allowed: list[float] = []
    for gap in gaps:
        now[0] += gap
        try:
            bounds.check("s", "bob")
        except RequestLimitError as refused:
            in_window = [t for t in allowed if t > now[0] - 60.0]
            assert len(in_window) == limit  # refused only when the minute is full
            assert refused.retry_after is not None and 0 <= refused.retry_after <= 60
        else:
            allowed.append(now[0])
        assert len([t for t in allowed if t > now[0] - 60.0]) <= limit


HUMAN = {"id": "alice", "type": "human"}


class State(TypedDict, total=False):
    command: str
    outcome: str


def gated_graph(authority: ApprovalAuthority) -> Any:
    def deploy(state: State) -> dict[str, Any]:
        resolved = request_approval(
            {
                "kind": "process.exec",
                "name": "deploy",
                "summary": "Deploy",
                "arguments": {"command": state["command"]},
            },
            authority=authority,
        )
        return {"outcome": resolved.resolution.outcome}

    builder = StateGraph(State)
    builder.add_node("deploy", deploy)
    builder.add_edge(START, "deploy")
    builder.add_edge("deploy", END)
    return builder.compile(checkpointer=InMemorySaver())


def test_a_run_over_the_bound_stops_before_the_gate_and_asks_again_later() -> None:
    authority = ApprovalAuthority(InMemoryLedger(), limits=RequestLimits(pending_per_requester=1))
    graph = gated_graph(authority)

    def config(thread: str) -> Any:
        return {"configurable": {"thread_id": thread, REQUESTER_KEY: "mallory"}}

    [first] = graph.invoke({"command": "deploy 1"}, config("t-1"))["__interrupt__"]
    with pytest.raises(RequestLimitError):
        graph.invoke({"command": "deploy 2"}, config("t-2"))

    requested = ApprovalRequested.from_data(first.value)
    stored = authority.get_stored_request(requested.request.id)
    assert stored is not None and stored.context["requester"] == "mallory"
    assert [row.request_id for row in authority.ledger.list_pending()] == [requested.request.id]
    authority.decide(build_decision(requested, decision="deny", actor=HUMAN))

    [second] = graph.invoke(None, config("t-2"))["__interrupt__"]  # the failed step again
    assert ApprovalRequested.from_data(second.value).request.action.arguments == {
        "command": "deploy 2"
    }
    record("limits", 1)


@given(st.text(max_size=210))
def test_a_requester_is_an_id_or_refused_naming_the_field(text: str) -> None:
    from aais_langgraph.authority.limits import checked_requester

    try:
        accepted = checked_requester(text, "configurable.aais_requester")
    except ValueError as error:
        assert str(error) == (  # the same words whatever the value: it is never echoed
            "configurable.aais_requester: must be an id of 1 to 200 characters, "
            "no control characters"
        )
    else:
        assert accepted == text and 0 < len(text) <= 200
        assert all(ord(char) >= 0x20 and ord(char) != 0x7F for char in text)

"""Quorum: an action the access policy says needs two distinct approvers runs once, after both.

SPEC §10: one AAIS request per approval needed, each bound to the same action digest
and resolved on its own; the runtime runs the action only when enough distinct,
authorized people approved it, and one refusal ends it.
"""

from __future__ import annotations

from typing import Any, TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from aais_langgraph import ApprovalRequested, build_decision
from aais_langgraph.authority import (
    AccessPolicy,
    ApprovalAuthority,
    ForbiddenError,
    Principal,
)
from aais_langgraph.gate import REQUESTER_KEY, requires_approval
from aais_langgraph.ledger import InMemoryLedger
from aais_langgraph.protocol import Actor
from aais_langgraph.protocol.extensions import QUORUM_EXTENSION
from aais_langgraph.threads import resume_with_decisions
from hostile.report import record

POLICY = {
    "default_approvers": ["dev"],
    "approvers": [
        {"kinds": ["payments.transfer"], "risk": ["critical"], "groups": ["finance"], "quorum": 2}
    ],
}


def person(name: str, *groups: str) -> Principal:
    return Principal(Actor(id=name, type="human"), frozenset(groups))


ALICE = person("alice", "sre")
BOB = person("bob", "dev")
CAROL = person("carol", "finance")
DAVE = person("dave", "finance")


class State(TypedDict, total=False):
    amount: int
    outcome: str


def transfer_action(state: State) -> dict[str, Any]:
    return {
        "kind": "payments.transfer",
        "name": "transfer",
        "summary": "Transfer funds",
        "arguments": {"amount": state["amount"]},
    }


def quorum_graph(authority: ApprovalAuthority, runs: list[int]) -> Any:
    @requires_approval(
        transfer_action,
        authority=authority,
        risk={"level": "critical", "reasons": ["moves money"]},
        on_reject=lambda state, resolved: {"outcome": resolved.resolution.outcome},
    )
    def transfer(state: State) -> dict[str, Any]:
        runs.append(state["amount"])
        return {"outcome": "transferred"}

    builder = StateGraph(State)
    builder.add_node("transfer", transfer)
    builder.add_edge(START, "transfer")
    builder.add_edge("transfer", END)
    return builder.compile(checkpointer=InMemorySaver())


@pytest.fixture
def setup() -> tuple[ApprovalAuthority, Any, list[int], Any]:
    authority = ApprovalAuthority(InMemoryLedger(), authorizer=AccessPolicy.from_mapping(POLICY))
    runs: list[int] = []
    graph = quorum_graph(authority, runs)
    config = {"configurable": {"thread_id": "t-pay", REQUESTER_KEY: "bob"}}
    return authority, graph, runs, config


def waiting(graph: Any, config: Any) -> ApprovalRequested:
    [interrupt] = graph.get_state(config).interrupts
    return ApprovalRequested.from_data(interrupt.value)


def answer(
    graph: Any, authority: ApprovalAuthority, config: Any, who: Principal, kind: str = "approve"
) -> Any:
    requested = waiting(graph, config)
    decided = build_decision(requested, decision=kind, actor=who.actor)
    return resume_with_decisions(graph, config, [decided], actor=who, authority=authority)


def test_two_distinct_finance_approvals_run_the_action_once(setup: Any) -> None:
    authority, graph, runs, config = setup
    graph.invoke({"amount": 500}, config)
    first = waiting(graph, config)
    assert first.request.extensions[QUORUM_EXTENSION]["index"] == 1
    assert first.request.extensions[QUORUM_EXTENSION]["of"] == 2
    assert {c.scope for c in first.request.choices} == {"once"}  # no grant from one person

    answer(graph, authority, config, CAROL)
    assert runs == []  # one approval of two: nothing runs
    second = waiting(graph, config)
    place = second.request.extensions[QUORUM_EXTENSION]
    assert (place["index"], place["of"], place["approved_by"]) == (2, 2, ["carol"])
    assert place["first_request_id"] == first.request.id
    assert second.request.action_digest == first.request.action_digest

    for who in (CAROL, BOB):  # carol approved already; bob is not in finance
        before = authority.ledger.audit_tip()
        with pytest.raises(ForbiddenError):
            answer(graph, authority, config, who)
        record("quorum", 1, failed_open=int(authority.ledger.audit_tip() != before))
        assert authority.get_resolution(second.request.id) is None
    assert runs == []

    answer(graph, authority, config, DAVE)
    assert runs == [500]
    assert graph.get_state(config).values["outcome"] == "transferred"
    approvals = [
        e.payload["request_id"]
        for e in authority.ledger.audit_entries()
        if e.kind == "resolved" and e.payload["outcome"] == "approved"
    ]
    assert approvals == [first.request.id, second.request.id]  # the audit shows each one
    assert authority.verify_audit().ok


def test_one_denial_ends_the_quorum_and_nothing_runs(setup: Any) -> None:
    authority, graph, runs, config = setup
    graph.invoke({"amount": 900}, config)
    answer(graph, authority, config, CAROL)

    answer(graph, authority, config, DAVE, kind="deny")

    assert runs == []
    state = graph.get_state(config)
    assert state.next == () and state.values["outcome"] == "denied"
    record("quorum", 1, failed_open=int(runs != []))


def test_the_requester_may_not_fill_the_quorum_either(setup: Any) -> None:
    authority, graph, runs, _ = setup
    config = {"configurable": {"thread_id": "t-own", REQUESTER_KEY: "carol"}}
    policy = {**POLICY, "separation_of_duties": {"from_risk": "high"}}
    authority.authorizer = AccessPolicy.from_mapping(policy)
    graph.invoke({"amount": 10}, config)

    with pytest.raises(ForbiddenError, match="separation of duties"):
        answer(graph, authority, config, CAROL)
    answer(graph, authority, config, DAVE)
    assert runs == []
    record("quorum", 1, failed_open=int(runs != []))


def test_a_quorum_rule_is_validated() -> None:
    bad = {"approvers": [{"groups": ["finance"], "quorum": 0}]}
    with pytest.raises(ValueError, match=r"^approvers\[0\]\.quorum:"):
        AccessPolicy.from_mapping(bad)


async def test_the_async_gate_asks_for_the_quorum_too() -> None:
    from aais_langgraph.gate import arequest_approval
    from aais_langgraph.threads import aresume_with_decisions

    authority = ApprovalAuthority(InMemoryLedger(), authorizer=AccessPolicy.from_mapping(POLICY))
    runs: list[int] = []

    async def transfer(state: State) -> dict[str, Any]:
        resolved = await arequest_approval(
            transfer_action(state),
            authority=authority,
            risk={"level": "critical", "reasons": ["moves money"]},
        )
        if resolved.approved:
            runs.append(state["amount"])
        return {"outcome": resolved.resolution.outcome}

    builder = StateGraph(State)
    builder.add_node("transfer", transfer)
    builder.add_edge(START, "transfer")
    builder.add_edge("transfer", END)
    graph = builder.compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t-async", REQUESTER_KEY: "bob"}}
    await graph.ainvoke({"amount": 7}, config)

    for who in (CAROL, DAVE):
        [interrupt] = (await graph.aget_state(config)).interrupts
        decided = build_decision(interrupt.value, decision="approve", actor=who.actor)
        await aresume_with_decisions(graph, config, [decided], actor=who, authority=authority)

    assert runs == [7]
    assert (await graph.aget_state(config)).values["outcome"] == "approved"

"""At most once across a dead run: the re-run does not execute the approved body again.

A body that raises stands in for a replica killed mid-action (the kill -9 versions
are in tests/distributed): its execution claim stays, unfinished, and expires
with the short lease TTL of the resume that drove it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, TypedDict

import aais
import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from aais_langgraph import (
    ApprovalAuthority,
    ApprovalRequested,
    ExecutionUnknownError,
    InMemoryLedger,
    ThreadDriver,
    build_decision,
    resume_with_decisions,
)
from aais_langgraph.gate import (
    approval_key,
    approval_node,
    execution_state,
    reconcile_execution,
    requires_approval,
    unknown_executions,
)
from aais_langgraph.threads import pending_approvals

HUMAN = {"id": "alice", "type": "human"}
LEASE_TTL = 0.3  # the claim lives half of it


class State(TypedDict, total=False):
    command: str
    done: bool
    outcome: str
    action: dict[str, Any]
    approval: dict[str, Any]


def deploy_action(state: State) -> dict[str, Any]:
    return {
        "kind": "process.exec",
        "name": "deploy",
        "summary": "Deploy",
        "arguments": {"command": state["command"]},
    }


def gated_graph(authority: ApprovalAuthority, runs: list[str], *, crashes: int = 1, **options: Any):
    """One ``requires_approval`` node whose body "dies" (raises) the first ``crashes`` times."""
    left = [crashes]

    @requires_approval(
        deploy_action,
        authority=authority,
        on_reject=lambda state, resolved: {"outcome": resolved.resolution.outcome},
        **options,
    )
    def deploy(state: State) -> dict[str, Any]:
        runs.append(approval_key())
        if left[0]:
            left[0] -= 1
            raise RuntimeError("the replica died here")
        return {"done": True, "outcome": "approved"}

    builder = StateGraph(State)
    builder.add_node("deploy", deploy)
    builder.add_edge(START, "deploy")
    builder.add_edge("deploy", END)
    return builder.compile(checkpointer=InMemorySaver())


def approve_and_crash(graph: Any, authority: ApprovalAuthority, config: Any) -> ApprovalRequested:
    [pending] = graph.invoke({"command": "deploy v2"}, config)["__interrupt__"]
    requested = ApprovalRequested.from_data(pending.value)
    decided = build_decision(requested, decision="approve", actor=HUMAN)
    with pytest.raises(RuntimeError, match="died"):
        resume_with_decisions(
            graph, config, [decided], actor=HUMAN, authority=authority, lease_ttl=LEASE_TTL
        )
    time.sleep(LEASE_TTL)  # the dead run's claim and lease lapse
    return requested


def test_a_re_run_after_a_dead_run_raises_unknown_and_keeps_the_interrupt() -> None:
    authority = ApprovalAuthority(InMemoryLedger())
    runs: list[str] = []
    graph = gated_graph(authority, runs)
    config: Any = {"configurable": {"thread_id": "t-unknown"}}
    requested = approve_and_crash(graph, authority, config)

    with pytest.raises(ExecutionUnknownError) as raised:
        ThreadDriver(graph, authority, lease_ttl=LEASE_TTL).resume_resolved("t-unknown")

    request_id = requested.request.id
    assert raised.value.request_id == request_id and "deploy v2" not in str(raised.value)
    assert runs == [request_id]  # the body ran once, not again
    assert len(graph.get_state(config).interrupts) == 1
    assert authority.get_resolution(request_id).approved  # the AAIS resolution is untouched
    [unknown] = unknown_executions(authority)
    assert (unknown.request_id, unknown.thread_id) == (request_id, "t-unknown")
    snapshot = pending_approvals(authority, graph).to_json()
    assert snapshot["snapshot"]["pending"] == []
    [listed] = snapshot["extensions"]["aais-langgraph.org/unknown_executions"]
    assert (listed["request_id"], listed["summary"]) == (request_id, "Deploy")
    aais.validate(snapshot)  # still a valid AAIS snapshot (the reference validator)


def test_reconciled_done_continues_without_running_and_is_not_approved() -> None:
    authority = ApprovalAuthority(InMemoryLedger())
    runs: list[str] = []
    graph = gated_graph(authority, runs)
    config: Any = {"configurable": {"thread_id": "t-done"}}
    requested = approve_and_crash(graph, authority, config)

    assert reconcile_execution(authority, requested.request.id, "done", actor="ops")
    [resumed] = ThreadDriver(graph, authority, lease_ttl=LEASE_TTL).resume_resolved("t-done")

    assert resumed.approved  # what the driver replayed: the recorded resolution
    final = graph.get_state(config)
    assert final.next == () and final.values["outcome"] == "conflict"
    assert "done" not in final.values
    assert runs == [requested.request.id]
    assert unknown_executions(authority) == []


def test_reconciled_retry_asks_again_with_a_fresh_request_and_runs_once() -> None:
    authority = ApprovalAuthority(InMemoryLedger())
    runs: list[str] = []
    graph = gated_graph(authority, runs)
    config: Any = {"configurable": {"thread_id": "t-retry"}}
    requested = approve_and_crash(graph, authority, config)

    assert reconcile_execution(authority, requested.request.id, "retry", actor="ops")
    ThreadDriver(graph, authority, lease_ttl=LEASE_TTL).resume_resolved("t-retry")
    [interrupt] = graph.get_state(config).interrupts
    fresh = ApprovalRequested.from_data(interrupt.value)
    assert fresh.request.id != requested.request.id
    assert fresh.request.action_digest == requested.request.action_digest
    assert [r.id for r in pending_approvals(authority, graph).snapshot.pending] == [
        fresh.request.id
    ]

    decided = build_decision(fresh, decision="approve", actor=HUMAN)
    [resolved] = resume_with_decisions(graph, config, [decided], actor=HUMAN, authority=authority)

    assert resolved.approved and graph.get_state(config).values["done"] is True
    assert runs == [requested.request.id, fresh.request.id]  # a new approval, a new key


def test_an_idempotent_node_is_run_again_with_the_same_key() -> None:
    authority = ApprovalAuthority(InMemoryLedger())
    runs: list[str] = []
    graph = gated_graph(authority, runs, idempotent=True)
    config: Any = {"configurable": {"thread_id": "t-idem"}}
    requested = approve_and_crash(graph, authority, config)

    [resolved] = ThreadDriver(graph, authority, lease_ttl=LEASE_TTL).resume_resolved("t-idem")

    assert resolved.approved and graph.get_state(config).values["done"] is True
    assert runs == [requested.request.id] * 2
    assert unknown_executions(authority) == []


def test_a_finished_body_is_recorded_executed() -> None:
    authority = ApprovalAuthority(InMemoryLedger())
    runs: list[str] = []
    graph = gated_graph(authority, runs, crashes=0)
    config: Any = {"configurable": {"thread_id": "t-ok"}}
    [pending] = graph.invoke({"command": "deploy v2"}, config)["__interrupt__"]
    decided = build_decision(pending.value, decision="approve", actor=HUMAN)

    resume_with_decisions(graph, config, [decided], actor=HUMAN, authority=authority)

    record = authority.ledger.execution_with_entry(decided.decision.request_id)[0]
    assert record is not None and record.state == "executed"


def test_the_not_run_result_cannot_be_mistaken_for_an_approval() -> None:
    """``approval_node`` writes the gate's result to state: a route on the outcome
    (as the docs show) does not see ``approved`` for a reconciled unknown."""
    authority = ApprovalAuthority(InMemoryLedger())
    builder = StateGraph(State)
    builder.add_node("gate", approval_node(authority=authority))
    builder.add_edge(START, "gate")
    builder.add_edge("gate", END)
    graph = builder.compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t-node"}}
    [pending] = graph.invoke({"action": deploy_action({"command": "x"})}, config)["__interrupt__"]
    request_id = pending.value["request"]["id"]
    decided = build_decision(pending.value, decision="approve", actor=HUMAN)
    authority.decide(decided, actor=HUMAN)
    # A run that claimed the execution and died (its claim already dead).
    from aais_langgraph.ledger.executions import claim_change

    authority.ledger.update_execution(
        request_id,
        claim_change(request_id, "dead", thread_id="t-node", ttl=1, now=0.0, retry=False),
    )
    reconcile_execution(authority, request_id, "done", actor="ops")

    ThreadDriver(graph, authority).resume_resolved("t-node")

    approval = graph.get_state(config).values["approval"]
    aais.validate(approval)
    assert approval["resolution"]["outcome"] != "approved"
    assert approval["resolution"]["extensions"]["aais-langgraph.org/execution"] == {
        "state": "done",
        "request_id": request_id,
    }
    from aais_langgraph.protocol import ApprovalResolved

    assert execution_state(ApprovalResolved.from_data(approval)) == "done"


def test_the_async_gate_raises_unknown_too() -> None:
    authority = ApprovalAuthority(InMemoryLedger())
    runs: list[str] = []

    @requires_approval(deploy_action, authority=authority)
    async def deploy(state: State) -> dict[str, Any]:
        runs.append(approval_key())
        if len(runs) == 1:
            raise RuntimeError("the replica died here")
        return {"done": True}

    builder = StateGraph(State)
    builder.add_node("deploy", deploy)
    builder.add_edge(START, "deploy")
    builder.add_edge("deploy", END)
    graph = builder.compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t-async"}}

    async def scenario() -> None:
        [pending] = (await graph.ainvoke({"command": "v3"}, config))["__interrupt__"]
        decided = build_decision(pending.value, decision="approve", actor=HUMAN)
        from aais_langgraph import aresume_with_decisions

        with pytest.raises(RuntimeError, match="died"):
            await aresume_with_decisions(
                graph, config, [decided], actor=HUMAN, authority=authority, lease_ttl=LEASE_TTL
            )
        await asyncio.sleep(LEASE_TTL)
        with pytest.raises(ExecutionUnknownError):
            await aresume_with_decisions(
                graph, config, [decided], actor=HUMAN, authority=authority, lease_ttl=LEASE_TTL
            )

    asyncio.run(scenario())
    assert len(runs) == 1

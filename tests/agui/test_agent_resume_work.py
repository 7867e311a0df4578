"""A reconnect to a thread answered elsewhere resumes it with the recorded answer.

An answer recorded outside a run (``authority.decide``, ``authority.cancel``: the CLI,
another replica) leaves durable resume work in the ledger; a run of the agent with
no ``resume`` entries applies it instead of offering the answered interrupt again.
"""

from __future__ import annotations

from typing import Any

from ag_ui.core import BaseEvent, EventType, Interrupt

from aais_agui.agent import AAISLangGraphAgent
from aais_agui.mapping import resume_entry_for
from aais_langgraph import ApprovalAuthority, build_decision
from aais_langgraph.ledger import RESUME

from .conftest import ALICE
from .demo_graph import EffectLog
from .test_agent import interrupts_of, paused, request_id, run, terminal


def offered_request_ids(events: list[BaseEvent]) -> set[str]:
    """The AAIS request ids any RUN_FINISHED of ``events`` offers as interrupts."""
    offered: set[str] = set()
    for event in events:
        outcome = getattr(event, "outcome", None) if event.type == EventType.RUN_FINISHED else None
        if outcome is not None and outcome.type == "interrupt":
            offered |= {request_id(item) for item in outcome.interrupts if item.metadata}
    return offered


def approve_elsewhere(authority: ApprovalAuthority, item: Interrupt) -> None:
    decided = build_decision(item.metadata["aais"], decision="approve", actor=ALICE)
    resolved = authority.decide(decided, actor=ALICE)
    assert resolved.resolution.outcome == "approved"


async def state_of(graph: Any, thread_id: str) -> Any:
    return await graph.aget_state({"configurable": {"thread_id": thread_id}})


async def test_recording_an_answer_outside_a_run_leaves_due_resume_work(
    agent: AAISLangGraphAgent, authority: ApprovalAuthority
) -> None:
    thread_id, [item] = await paused(agent)
    assert authority.ledger.get_work(RESUME, request_id(item)) is None
    approve_elsewhere(authority, item)
    work = authority.ledger.get_work(RESUME, request_id(item))
    assert work is not None
    assert (work.state, work.thread_id, work.attempts) == ("due", thread_id, 0)


async def test_reconnect_after_an_approval_elsewhere_runs_the_action_once(
    agent: AAISLangGraphAgent, authority: ApprovalAuthority, effects: EffectLog, graph: Any
) -> None:
    thread_id, [item] = await paused(agent)
    approve_elsewhere(authority, item)
    assert effects.list() == []

    events = await run(agent, thread_id)

    types = [event.type for event in events]
    assert types[0] == EventType.RUN_STARTED and EventType.RUN_FINISHED in types
    finished = terminal(events)
    assert finished.type == EventType.RUN_FINISHED and finished.outcome is None
    assert request_id(item) not in offered_request_ids(events)
    assert effects.list() == [(thread_id, "delete_file", "/srv/report.txt")]
    assert authority.ledger.get_work(RESUME, request_id(item)).state == "done"
    state = await state_of(graph, thread_id)
    assert state.interrupts == () and state.values["result"] == "deleted"


async def test_a_second_reconnect_after_an_approval_elsewhere_runs_nothing_more(
    agent: AAISLangGraphAgent, authority: ApprovalAuthority, effects: EffectLog
) -> None:
    thread_id, [item] = await paused(agent)
    approve_elsewhere(authority, item)
    await run(agent, thread_id)

    events = await run(agent, thread_id)

    finished = terminal(events)
    assert finished.type == EventType.RUN_FINISHED and finished.outcome is None
    assert request_id(item) not in offered_request_ids(events)
    assert effects.list() == [(thread_id, "delete_file", "/srv/report.txt")]
    assert authority.ledger.get_work(RESUME, request_id(item)).state == "done"


async def test_reconnect_after_a_cancel_elsewhere_continues_past_it_without_the_action(
    agent: AAISLangGraphAgent, authority: ApprovalAuthority, effects: EffectLog, graph: Any
) -> None:
    thread_id, [item] = await paused(agent)
    authority.cancel(request_id(item))
    assert authority.ledger.get_work(RESUME, request_id(item)).state == "due"

    events = await run(agent, thread_id)

    finished = terminal(events)
    assert finished.type == EventType.RUN_FINISHED and finished.outcome is None
    assert request_id(item) not in offered_request_ids(events)
    assert effects.list() == []
    assert authority.ledger.get_work(RESUME, request_id(item)).state == "done"
    state = await state_of(graph, thread_id)
    # The gate's on_reject ran: the thread went on past the cancelled request.
    assert state.interrupts == () and state.values["result"] == "cancelled"
    assert state.values["messages"][-1].content == "Not deleted (cancelled)."


async def test_reconnect_after_one_of_two_approvals_elsewhere_offers_only_the_other(
    agent: AAISLangGraphAgent, authority: ApprovalAuthority, effects: EffectLog
) -> None:
    thread_id, interrupts = await paused(agent, "email ann@example.com,bob@example.com")
    by_target = {i.metadata["aais"]["request"]["action"]["arguments"]["to"]: i for i in interrupts}
    approve_elsewhere(authority, by_target["ann@example.com"])

    events = await run(agent, thread_id)

    assert [request_id(i) for i in interrupts_of(events)] == [
        request_id(by_target["bob@example.com"])
    ]
    assert [target for _, _, target in effects.list()] == ["ann@example.com"]
    assert authority.ledger.get_work(RESUME, request_id(by_target["ann@example.com"])).state == (
        "done"
    )


async def test_reconnect_to_a_thread_paused_on_an_unanswered_request_still_offers_it(
    agent: AAISLangGraphAgent, authority: ApprovalAuthority, effects: EffectLog
) -> None:
    thread_id, [item] = await paused(agent)

    again = interrupts_of(await run(agent, thread_id))

    assert [(i.id, request_id(i)) for i in again] == [(item.id, request_id(item))]
    assert again[0].metadata == item.metadata
    assert authority.get_resolution(request_id(item)) is None
    assert authority.ledger.get_work(RESUME, request_id(item)) is None
    assert effects.list() == []


async def test_an_answer_in_resume_is_recorded_by_the_gate_in_one_write(
    agent: AAISLangGraphAgent,
    authority: ApprovalAuthority,
    effects: EffectLog,
    monkeypatch: Any,
) -> None:
    """The planner authorizes the ``resume[]`` decision and hands it to the run; the gate
    records the resolution, its execution claim and its resume work in one ledger write
    (no separate record before the run), under the authenticated actor."""
    thread_id, [item] = await paused(agent)
    calls: list[str] = []
    ledger = authority.ledger
    for name in ("record_resolution", "record_resolution_claiming"):
        original = getattr(ledger, name)

        def counted(*args: Any, _name: str = name, _original: Any = original, **kw: Any) -> Any:
            calls.append(_name)
            return _original(*args, **kw)

        monkeypatch.setattr(ledger, name, counted)
    decided = build_decision(item.metadata["aais"], decision="approve", actor=ALICE)

    events = await run(agent, thread_id, resume=[resume_entry_for(decided, interrupt_id=item.id)])

    assert terminal(events).type == EventType.RUN_FINISHED
    assert calls == ["record_resolution_claiming"]
    assert effects.list() == [(thread_id, "delete_file", "/srv/report.txt")]
    recorded = authority.get_resolution(request_id(item))
    assert recorded is not None and recorded.approved
    assert authority.decided_by(recorded) == ALICE["id"]
    assert authority.ledger.get_work(RESUME, request_id(item)).state == "done"

"""AAISLangGraphAgent: AAIS approvals as AG-UI interrupts, resumed by id through the authority."""

from __future__ import annotations

import asyncio
import operator
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Annotated, Any

import aais
import jsonschema
from ag_ui.core import (
    BaseEvent,
    EventType,
    Interrupt,
    ResumeEntry,
    RunAgentInput,
    UserMessage,
)
from ag_ui_validate.pytest_plugin import validate_agui
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.types import Send
from langgraph.types import interrupt as lg_interrupt
from typing_extensions import TypedDict

from aais_agui.agent import AAISLangGraphAgent
from aais_agui.mapping import resume_entry_for
from aais_agui.service import ServiceSettings
from aais_langgraph import ApprovalAuthority, build_decision
from aais_langgraph.authority import new_holder
from aais_langgraph.ledger import RESUME

from .conftest import ALICE, Clock
from .demo_graph import EffectLog

MALLORY = {"id": "mallory", "type": "human"}


class PlainState(TypedDict, total=False):
    answers: Annotated[list[str], operator.add]


async def run(
    agent: AAISLangGraphAgent,
    thread_id: str,
    *,
    text: str | None = None,
    resume: list[ResumeEntry] | None = None,
    actor: Any = ALICE,
    protocol_version: str | None = None,
) -> list[BaseEvent]:
    messages = (
        [] if text is None else [UserMessage(id=f"u_{uuid.uuid4().hex}", role="user", content=text)]
    )
    run_agent_input = RunAgentInput(
        thread_id=thread_id,
        run_id=f"run_{uuid.uuid4().hex}",
        messages=messages,
        state={},
        tools=[],
        context=[],
        forwarded_props={},
        resume=resume,
        protocol_version=protocol_version,
    )
    return [event async for event in agent.with_actor(actor).run(run_agent_input)]


def terminal(events: list[BaseEvent]) -> Any:
    """The event that ends the (first) run; a refusal may be followed by a re-offer run."""
    assert events[0].type == EventType.RUN_STARTED
    ends = [
        i for i, e in enumerate(events) if e.type in (EventType.RUN_FINISHED, EventType.RUN_ERROR)
    ]
    first = events[ends[0]]
    rest = events[ends[0] + 1 :]
    if first.type == EventType.RUN_FINISHED or not rest:
        assert rest == []
    else:
        reoffered(events)
    return first


def reoffered(events: list[BaseEvent]) -> list[Interrupt]:
    """The interrupts offered again after a refusal (a second run: started, finished)."""
    ends = [
        i for i, e in enumerate(events) if e.type in (EventType.RUN_FINISHED, EventType.RUN_ERROR)
    ]
    assert events[ends[0]].type == EventType.RUN_ERROR
    rest = events[ends[0] + 1 :]
    if not rest:
        return []
    assert [e.type for e in rest] == [EventType.RUN_STARTED, EventType.RUN_FINISHED]
    assert rest[0].run_id == rest[1].run_id != events[0].run_id
    return interrupts_of(rest)


def interrupts_of(events: list[BaseEvent]) -> list[Interrupt]:
    finished = terminal(events)
    assert finished.type == EventType.RUN_FINISHED, getattr(finished, "message", "")
    assert finished.outcome is not None and finished.outcome.type == "interrupt"
    return list(finished.outcome.interrupts)


def answer(
    interrupt: Interrupt, decision: str = "approve", *, body_actor: Any = MALLORY, **kw: Any
) -> ResumeEntry:
    decided = build_decision(interrupt.metadata["aais"], decision=decision, actor=body_actor, **kw)
    return resume_entry_for(decided, interrupt_id=interrupt.id)


def request_id(interrupt: Interrupt) -> str:
    return str(interrupt.metadata["aais"]["request"]["id"])


async def paused(
    agent: AAISLangGraphAgent, text: str = "delete /srv/report.txt"
) -> tuple[str, list[Interrupt]]:
    thread_id = f"thread_{uuid.uuid4().hex}"
    return thread_id, interrupts_of(await run(agent, thread_id, text=text))


def assert_untouched(
    authority: ApprovalAuthority, interrupts: list[Interrupt], effects: EffectLog
) -> None:
    for item in interrupts:
        assert authority.get_resolution(request_id(item)) is None
    assert effects.list() == []


# -- interrupts -----------------------------------------------------------------------


async def test_gated_node_ends_the_run_with_an_interrupt_outcome(agent: AAISLangGraphAgent) -> None:
    _, interrupts = await paused(agent)
    [item] = interrupts
    assert item.reason == "aais:approval"
    assert item.message == "Delete a file from the shared drive"
    aais.validate(item.metadata["aais"])
    assert item.expires_at == item.metadata["aais"]["request"]["expires_at"]


async def test_interrupt_id_is_the_langgraph_interrupt_id(
    agent: AAISLangGraphAgent, graph: Any
) -> None:
    thread_id, [item] = await paused(agent)
    state = await graph.aget_state({"configurable": {"thread_id": thread_id}})
    assert [i.id for i in state.interrupts] == [item.id]


async def test_tool_approvals_are_tool_call_interrupts(
    agent: AAISLangGraphAgent, graph: Any
) -> None:
    thread_id, interrupts = await paused(agent, "email ann@example.com,bob@example.com")
    state = await graph.aget_state({"configurable": {"thread_id": thread_id}})
    calls = {call["id"] for call in state.values["messages"][-1].tool_calls}
    assert {item.reason for item in interrupts} == {"tool_call"}
    assert {item.tool_call_id for item in interrupts} == calls
    for item in interrupts:
        aais.validate(item.metadata["aais"])


async def test_capabilities_declare_interrupts_without_edits(agent: AAISLangGraphAgent) -> None:
    loop = agent.get_capabilities()["humanInTheLoop"]
    assert loop["interrupts"] is True and loop["approveWithEdits"] is False


async def test_run_without_resume_on_a_paused_thread_re_emits_the_interrupts(
    make_agent: Callable[..., AAISLangGraphAgent], effects: EffectLog
) -> None:
    first = make_agent()
    thread_id, interrupts = await paused(first, "email ann@example.com,bob@example.com")
    again = interrupts_of(await run(make_agent(), thread_id))
    assert sorted(i.id for i in again) == sorted(i.id for i in interrupts)
    assert [i.metadata for i in sorted(again, key=lambda i: i.id)] == [
        i.metadata for i in sorted(interrupts, key=lambda i: i.id)
    ]
    assert effects.list() == []


# -- resume ---------------------------------------------------------------------------


async def test_approval_resumes_and_the_action_runs_once(
    agent: AAISLangGraphAgent, effects: EffectLog
) -> None:
    thread_id, [item] = await paused(agent)
    events = await run(agent, thread_id, resume=[answer(item)])
    finished = terminal(events)
    assert finished.type == EventType.RUN_FINISHED and finished.outcome is None
    assert effects.list() == [(thread_id, "delete_file", "/srv/report.txt")]


async def test_the_recorded_actor_is_the_authenticated_one(
    agent: AAISLangGraphAgent, authority: ApprovalAuthority
) -> None:
    thread_id, [item] = await paused(agent)
    await run(agent, thread_id, resume=[answer(item, body_actor=MALLORY)], actor=ALICE)
    decided = [
        event for event in authority.ledger.events_after(0) if event["type"] == "approval.decided"
    ]
    assert [event["decision"]["actor"]["id"] for event in decided] == ["alice"]


async def test_denial_runs_nothing(
    agent: AAISLangGraphAgent, effects: EffectLog, authority: ApprovalAuthority
) -> None:
    thread_id, [item] = await paused(agent)
    events = await run(agent, thread_id, resume=[answer(item, "deny")])
    assert terminal(events).type == EventType.RUN_FINISHED
    assert effects.list() == []
    assert authority.get_resolution(request_id(item)).resolution.outcome == "denied"


async def test_cancelled_entry_cancels_the_request(
    agent: AAISLangGraphAgent, effects: EffectLog, authority: ApprovalAuthority
) -> None:
    thread_id, [item] = await paused(agent)
    entry = ResumeEntry(interrupt_id=item.id, status="cancelled")
    assert terminal(await run(agent, thread_id, resume=[entry])).type == EventType.RUN_FINISHED
    assert authority.get_resolution(request_id(item)).resolution.outcome == "cancelled"
    assert effects.list() == []


async def test_cancelling_an_already_approved_request_is_a_conflict(
    agent: AAISLangGraphAgent, authority: ApprovalAuthority
) -> None:
    thread_id, [item] = await paused(agent)
    authority.decide(build_decision(item.metadata["aais"], decision="approve", actor=ALICE))
    entry = ResumeEntry(interrupt_id=item.id, status="cancelled")
    error = terminal(await run(agent, thread_id, resume=[entry]))
    assert error.type == EventType.RUN_ERROR and error.code == "aais.conflict"
    assert authority.get_resolution(request_id(item)).resolution.outcome == "approved"


async def test_two_tool_calls_resumed_together_are_both_applied(
    agent: AAISLangGraphAgent, effects: EffectLog
) -> None:
    thread_id, interrupts = await paused(agent, "email ann@example.com,bob@example.com")
    events = await run(agent, thread_id, resume=[answer(item) for item in interrupts])
    assert terminal(events).type == EventType.RUN_FINISHED
    assert sorted(target for _, _, target in effects.list()) == [
        "ann@example.com",
        "bob@example.com",
    ]


async def test_mixed_answers_apply_to_their_own_calls(
    agent: AAISLangGraphAgent, effects: EffectLog
) -> None:
    thread_id, interrupts = await paused(agent, "email ann@example.com,bob@example.com")
    by_target = {i.metadata["aais"]["request"]["action"]["arguments"]["to"]: i for i in interrupts}
    resume = [answer(by_target["bob@example.com"], "deny"), answer(by_target["ann@example.com"])]
    assert terminal(await run(agent, thread_id, resume=resume)).type == EventType.RUN_FINISHED
    assert [target for _, _, target in effects.list()] == ["ann@example.com"]


async def test_a_second_resume_of_the_same_interrupt_is_refused(
    agent: AAISLangGraphAgent, effects: EffectLog
) -> None:
    thread_id, [item] = await paused(agent)
    await run(agent, thread_id, resume=[answer(item)])
    error = terminal(await run(agent, thread_id, resume=[answer(item)]))
    assert error.type == EventType.RUN_ERROR and error.code == "aais.unknown_interrupt"
    assert len(effects.list()) == 1


async def test_concurrent_resumes_run_the_action_once(
    make_agent: Callable[..., AAISLangGraphAgent], effects: EffectLog
) -> None:
    agent = make_agent()
    thread_id, [item] = await paused(agent)
    results = await asyncio.gather(
        *(run(make_agent(), thread_id, resume=[answer(item)]) for _ in range(4))
    )
    kinds = sorted(terminal(events).type.value for events in results)
    assert kinds.count("RUN_FINISHED") == 1
    assert len(effects.list()) == 1


# -- refusals leave the pending approvals untouched -----------------------------------


async def test_unknown_interrupt_id_is_a_run_error(
    agent: AAISLangGraphAgent, authority: ApprovalAuthority, effects: EffectLog
) -> None:
    thread_id, [item] = await paused(agent)
    entry = answer(item).model_copy(update={"interrupt_id": "0" * 32})
    error = terminal(await run(agent, thread_id, resume=[entry]))
    assert error.type == EventType.RUN_ERROR and error.code == "aais.unknown_interrupt"
    assert_untouched(authority, [item], effects)


async def test_partial_coverage_of_open_interrupts_is_a_run_error(
    agent: AAISLangGraphAgent, authority: ApprovalAuthority, effects: EffectLog
) -> None:
    thread_id, interrupts = await paused(agent, "email ann@example.com,bob@example.com")
    error = terminal(await run(agent, thread_id, resume=[answer(interrupts[0])]))
    assert error.type == EventType.RUN_ERROR and error.code == "aais.partial_resume"
    assert interrupts[1].id in error.message
    assert_untouched(authority, interrupts, effects)


async def test_expired_interrupt_is_a_run_error_that_records_the_expiry(
    agent: AAISLangGraphAgent, authority: ApprovalAuthority, effects: EffectLog, clock: Clock
) -> None:
    """SPEC §11: a decision at or after expiry resolves the request ``expired``, on AG-UI
    as on every other channel; the run is refused and the thread continues past it."""
    thread_id, [item] = await paused(agent)
    clock.advance(timedelta(hours=1))
    events = await run(agent, thread_id, resume=[answer(item)])
    error = next(event for event in events if event.type == EventType.RUN_ERROR)
    assert error.code == "aais.expired"
    recorded = authority.get_resolution(request_id(item))
    assert recorded is not None and recorded.resolution.outcome == "expired"
    assert effects.list() == []
    assert authority.ledger.get_work(RESUME, request_id(item)).state == "done"


async def test_expired_interrupt_can_still_be_cancelled(
    agent: AAISLangGraphAgent, authority: ApprovalAuthority, effects: EffectLog, clock: Clock
) -> None:
    thread_id, [item] = await paused(agent)
    clock.advance(timedelta(hours=1))
    entry = ResumeEntry(interrupt_id=item.id, status="cancelled")
    assert terminal(await run(agent, thread_id, resume=[entry])).type == EventType.RUN_FINISHED
    assert authority.get_resolution(request_id(item)).resolution.outcome == "expired"
    assert effects.list() == []


async def test_tampered_digest_is_a_run_error_and_nothing_runs(
    agent: AAISLangGraphAgent, authority: ApprovalAuthority, effects: EffectLog
) -> None:
    thread_id, [item] = await paused(agent)
    body = answer(item).metadata["aais"]
    body["decision"]["action_digest"] = "sha256:" + "0" * 64
    entry = ResumeEntry(interrupt_id=item.id, status="resolved", metadata={"aais": body})
    error = terminal(await run(agent, thread_id, resume=[entry]))
    assert error.type == EventType.RUN_ERROR and error.code == "aais.digest_mismatch"
    assert_untouched(authority, [item], effects)
    # The approval is still answerable with the right digest.
    assert (
        terminal(await run(agent, thread_id, resume=[answer(item)])).type == EventType.RUN_FINISHED
    )
    assert len(effects.list()) == 1


async def test_unoffered_scope_is_a_run_error(
    agent: AAISLangGraphAgent, authority: ApprovalAuthority, effects: EffectLog
) -> None:
    thread_id, [item] = await paused(agent)
    error = terminal(await run(agent, thread_id, resume=[answer(item, scope="persistent")]))
    assert error.type == EventType.RUN_ERROR and error.code == "aais.invalid_resume"
    assert_untouched(authority, [item], effects)


async def test_malformed_entry_is_a_run_error_without_values(
    agent: AAISLangGraphAgent, authority: ApprovalAuthority, effects: EffectLog
) -> None:
    thread_id, [item] = await paused(agent)
    entry = ResumeEntry(interrupt_id=item.id, status="resolved", payload={"approve": "top-secret"})
    error = terminal(await run(agent, thread_id, resume=[entry]))
    assert error.type == EventType.RUN_ERROR and error.code == "aais.invalid_resume"
    assert "top-secret" not in error.message
    assert_untouched(authority, [item], effects)


async def test_resume_without_an_authenticated_actor_is_refused(
    agent: AAISLangGraphAgent, authority: ApprovalAuthority, effects: EffectLog
) -> None:
    thread_id, [item] = await paused(agent)
    error = terminal(await run(agent, thread_id, resume=[answer(item)], actor=None))
    assert error.type == EventType.RUN_ERROR and error.code == "aais.unauthenticated"
    assert_untouched(authority, [item], effects)


async def test_a_thread_driven_elsewhere_is_busy(
    make_agent: Callable[..., AAISLangGraphAgent], authority: ApprovalAuthority, effects: EffectLog
) -> None:
    import time

    agent = make_agent(settings=ServiceSettings(lease_wait=0.2))
    thread_id, [item] = await paused(agent)
    authority.ledger.acquire_lease(thread_id, new_holder(), ttl=30, now=time.time())
    error = terminal(await run(agent, thread_id, resume=[answer(item)]))
    assert error.type == EventType.RUN_ERROR and error.code == "aais.thread_busy"
    assert_untouched(authority, [item], effects)


async def test_a_refused_answer_offers_the_open_interrupts_again(
    agent: AAISLangGraphAgent, authority: ApprovalAuthority, effects: EffectLog
) -> None:
    # CopilotKit's useInterrupt drops the interrupts it showed when a run starts; the
    # refusal's stream must hand them back, as a reconnect would, for a correct answer.
    thread_id, interrupts = await paused(agent, "email ann@example.com,bob@example.com")
    body = answer(interrupts[0]).metadata["aais"]
    body["decision"]["action_digest"] = "sha256:" + "0" * 64
    tampered = ResumeEntry(interrupt_id=interrupts[0].id, status="resolved", payload=body)
    events = await run(agent, thread_id, resume=[tampered, answer(interrupts[1])])
    assert terminal(events).code == "aais.digest_mismatch"
    again = reoffered(events)
    assert [i.model_dump() for i in again] == [i.model_dump() for i in interrupts]
    assert_untouched(authority, interrupts, effects)
    wire = [e.model_dump(mode="json", by_alias=True, exclude_none=True) for e in events]
    report = validate_agui(wire)
    assert report.summary.errors == 0, report.diagnostics
    resume = [answer(item) for item in again]
    assert terminal(await run(agent, thread_id, resume=resume)).type == EventType.RUN_FINISHED
    assert len(effects.list()) == 2


async def test_nothing_is_offered_again_after_a_busy_or_unauthenticated_refusal(
    make_agent: Callable[..., AAISLangGraphAgent], authority: ApprovalAuthority
) -> None:
    import time

    agent = make_agent(settings=ServiceSettings(lease_wait=0.2))
    thread_id, [item] = await paused(agent)
    assert reoffered(await run(agent, thread_id, resume=[answer(item)], actor=None)) == []
    authority.ledger.acquire_lease(thread_id, new_holder(), ttl=30, now=time.time())
    assert reoffered(await run(agent, thread_id, resume=[answer(item)])) == []


async def test_an_approval_resolved_elsewhere_is_not_offered_again(
    agent: AAISLangGraphAgent, authority: ApprovalAuthority
) -> None:
    thread_id, [item] = await paused(agent)
    authority.decide(build_decision(item.metadata["aais"], decision="approve", actor=ALICE))
    events = await run(
        agent, thread_id, resume=[ResumeEntry(interrupt_id=item.id, status="cancelled")]
    )
    assert terminal(events).code == "aais.conflict"
    assert reoffered(events) == []


async def test_the_envelope_the_response_schema_describes_is_accepted_as_the_payload(
    agent: AAISLangGraphAgent, effects: EffectLog
) -> None:
    # resolve(decided, interrupt.id): the payload is the approval.decided envelope itself.
    thread_id, [item] = await paused(agent)
    decided = answer(item).metadata["aais"]
    schema = jsonschema.Draft202012Validator(item.response_schema)
    assert schema.is_valid(decided) and schema.is_valid({"aais": decided})
    entry = ResumeEntry(interrupt_id=item.id, status="resolved", payload=decided)
    assert terminal(await run(agent, thread_id, resume=[entry])).type == EventType.RUN_FINISHED
    assert len(effects.list()) == 1


# -- plain LangGraph interrupts keep working, resumed by id ---------------------------


async def test_plain_interrupts_are_resumed_by_id(authority: ApprovalAuthority) -> None:
    def ask(state: dict[str, Any]) -> dict[str, Any]:
        return {"answers": [lg_interrupt(f"question {state['n']}")]}

    def fan_out(state: PlainState) -> list[Send]:
        return [Send("ask", {"n": n}) for n in (1, 2)]

    builder = StateGraph(PlainState)
    builder.add_node("ask", ask)
    builder.add_conditional_edges(START, fan_out, ["ask"])
    graph = builder.compile(checkpointer=InMemorySaver())
    agent = AAISLangGraphAgent(name="plain", graph=graph, authority=authority)
    interrupts = interrupts_of(await run(agent, "plain-thread"))
    assert {i.reason for i in interrupts} == {"langgraph:interrupt"}
    resume = [
        ResumeEntry(interrupt_id=i.id, status="resolved", payload=i.message.upper())
        for i in interrupts
    ]
    assert terminal(await run(agent, "plain-thread", resume=resume)).type == EventType.RUN_FINISHED
    state = await graph.aget_state({"configurable": {"thread_id": "plain-thread"}})
    assert state.interrupts == ()


async def test_schema_keys_are_worked_out_once_per_graph(
    agent: AAISLangGraphAgent, effects: EffectLog
) -> None:
    # ag-ui-langgraph lists the graph's schema keys from its JSON Schemas on every run.
    built: list[object] = []
    original = agent.graph.get_input_jsonschema

    def counted(*args: Any, **kwargs: Any) -> Any:
        built.append(args)
        return original(*args, **kwargs)

    agent.graph.get_input_jsonschema = counted
    try:
        thread_id, [interrupt] = await paused(agent)
        finished = terminal(await run(agent, thread_id, resume=[answer(interrupt)]))
        assert finished.type == EventType.RUN_FINISHED
        await paused(agent)
    finally:
        del agent.graph.get_input_jsonschema
    assert len(built) == 1
    assert effects.list() != []  # the runs did what they do without the repeated schemas


async def test_an_edited_message_forks_the_thread_and_its_orphan_is_cancelled(
    agent: AAISLangGraphAgent, authority: ApprovalAuthority, effects: EffectLog
) -> None:
    """SPEC §11: a run the client replaced (an edited message forks the thread) resolves
    the requests it leaves behind ``cancelled``; the listing stays whole."""
    thread_id = f"thread_{uuid.uuid4().hex}"
    message_id = f"u_{uuid.uuid4().hex}"

    def said(text: str) -> RunAgentInput:
        return RunAgentInput(
            thread_id=thread_id,
            run_id=f"run_{uuid.uuid4().hex}",
            messages=[UserMessage(id=message_id, role="user", content=text)],
            state={},
            tools=[],
            context=[],
            forwarded_props={},
        )

    first = [e async for e in agent.with_actor(ALICE).run(said("delete /srv/a.txt"))]
    [old] = interrupts_of(first)
    edited = [e async for e in agent.with_actor(ALICE).run(said("delete /srv/b.txt"))]
    assert terminal(edited).type == EventType.RUN_FINISHED

    recorded = authority.get_resolution(request_id(old))
    listed = await authority.asnapshot()
    from hostile.report import record

    record("forked threads", 1, failed_open=int(recorded is None or effects.list() != []))
    assert recorded is not None and recorded.resolution.outcome == "cancelled"
    by = (recorded.resolution.extensions or {})["aais-langgraph.org/resolved_by"]
    assert by["id"] == "aais-langgraph.run_moved_on"
    assert effects.list() == []
    assert request_id(old) not in [r.id for r in listed.snapshot.pending]


# -- requester and bounds -------------------------------------------------------------


async def test_a_run_asks_on_behalf_of_its_authenticated_user(
    agent: AAISLangGraphAgent, authority: ApprovalAuthority
) -> None:
    _, [item] = await paused(agent)
    stored = authority.get_stored_request(request_id(item))
    assert stored is not None and stored.context["requester"] == ALICE["id"]


async def test_a_run_over_the_requester_bound_is_a_run_error_and_stores_nothing(
    make_agent: Callable[..., AAISLangGraphAgent], authority: ApprovalAuthority
) -> None:
    from aais_langgraph.authority import RequestLimits
    from aais_langgraph.authority.limits import Bounds
    from hostile.report import record

    authority.bounds = Bounds(RequestLimits(pending_per_requester=1), authority.ledger)
    await paused(make_agent())
    before = len(authority.ledger.list_pending())

    events = await run(make_agent(), f"thread_{uuid.uuid4().hex}", text="delete /srv/b.txt")

    finished = terminal(events)
    assert finished.type == EventType.RUN_ERROR and "bound" in finished.message
    assert len(authority.ledger.list_pending()) == before
    record("limits", 1, failed_open=int(len(authority.ledger.list_pending()) != before))
    # another user is not held back by alice's bound
    await run(make_agent(), f"thread_{uuid.uuid4().hex}", text="delete /srv/c.txt", actor=MALLORY)
    assert len(authority.ledger.list_pending()) == before + 1

"""AAISLangGraphAgent as a drop-in for ag-ui-langgraph's LangGraphAgent: flags, context, clone.

Where the two agents share a behaviour, the stock agent runs the same graph with the
same config and the events are compared; where they differ on purpose (an AAIS approval
is offered only in the interrupt outcome), the difference itself is tested.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from ag_ui.core import BaseEvent, EventType, ResumeEntry, RunAgentInput, UserMessage
from ag_ui_langgraph import LangGraphAgent
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Command
from langgraph.types import interrupt as lg_interrupt
from pydantic import BaseModel
from typing_extensions import TypedDict

from aais_agui.agent import AAISLangGraphAgent
from aais_agui.service import ServiceSettings
from aais_langgraph import ApprovalAuthority, build_decision, requires_approval
from aais_langgraph.authority import ForbiddenError, RequestLimits

from .conftest import ALICE
from .test_agent import answer, interrupts_of, paused, request_id, run, terminal


class NoteState(TypedDict, total=False):
    note: str


class Tenant(BaseModel):
    tenant: str = "nobody"


def input_for(thread_id: str, text: str = "hi") -> RunAgentInput:
    return RunAgentInput(
        thread_id=thread_id,
        run_id=f"run_{uuid.uuid4().hex}",
        messages=[UserMessage(id=f"u_{uuid.uuid4().hex}", role="user", content=text)],
        state={},
        tools=[],
        context=[],
        forwarded_props={},
    )


async def events_of(agent: Any, thread_id: str) -> list[BaseEvent]:
    return [event async for event in agent.run(input_for(thread_id))]


def context_graph(checkpointer: Any, seen: list[Any], context_schema: Any = None) -> Any:
    def look(state: NoteState, runtime: Runtime[Any]) -> dict[str, Any]:
        seen.append(runtime.context)
        return {"note": "looked"}

    builder = StateGraph(NoteState, context_schema=context_schema)
    builder.add_node("look", look)
    builder.add_edge(START, "look")
    return builder.compile(checkpointer=checkpointer)


def plain_interrupt_graph(checkpointer: Any) -> Any:
    def ask(state: NoteState) -> dict[str, Any]:
        return {"note": str(lg_interrupt({"question": "go on?"}))}

    builder = StateGraph(NoteState)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    return builder.compile(checkpointer=checkpointer)


def approval_graph(checkpointer: Any) -> Any:
    def rotate_action(state: NoteState) -> dict[str, Any]:
        return {
            "kind": "keys.rotate",
            "name": "rotate_keys",
            "summary": "Rotate the signing keys",
            "arguments": {"keyring": "signing"},
        }

    @requires_approval(rotate_action)
    def rotate(state: NoteState) -> dict[str, Any]:
        return {"note": "rotated"}

    builder = StateGraph(NoteState)
    builder.add_node("rotate", rotate)
    builder.add_edge(START, "rotate")
    return builder.compile(checkpointer=checkpointer)


@pytest.fixture
async def saver(tmp_path: Any) -> Any:
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "checkpoints.db")) as found:
        yield found


def types_of(events: list[BaseEvent]) -> list[EventType]:
    return [event.type for event in events]


# -- runtime.context ----------------------------------------------------------------------


async def test_context_without_a_schema_is_what_stock_gives(
    saver: Any, authority: ApprovalAuthority
) -> None:
    seen: list[Any] = []
    graph = context_graph(saver, seen)
    ours = AAISLangGraphAgent(name="ctx", graph=graph, authority=authority)
    stock = LangGraphAgent(name="ctx", graph=graph, config=ours.config)
    await events_of(ours, "thread-ours")
    await events_of(stock, "thread-stock")
    got, expected = seen
    assert isinstance(got, dict) and got["thread_id"] == "thread-ours"
    assert {**got, "thread_id": "thread-stock"} == expected


async def test_a_context_schema_gets_what_it_declares(
    saver: Any, authority: ApprovalAuthority
) -> None:
    seen: list[Any] = []
    graph = context_graph(saver, seen, context_schema=Tenant)
    config = {"configurable": {"tenant": "acme"}}
    ours = AAISLangGraphAgent(name="ctx", graph=graph, authority=authority, config=config)
    await events_of(ours, "thread-tenant")
    await events_of(LangGraphAgent(name="ctx", graph=graph, config=ours.config), "thread-stock")
    assert seen == [Tenant(tenant="acme"), Tenant(tenant="acme")]


# -- RAW events and the legacy on_interrupt event -----------------------------------------


async def test_raw_events_are_sent_by_default_as_stock_sends_them(
    saver: Any, authority: ApprovalAuthority
) -> None:
    graph = context_graph(saver, [])
    ours = await events_of(AAISLangGraphAgent(name="raw", graph=graph, authority=authority), "t1")
    stock = await events_of(LangGraphAgent(name="raw", graph=graph), "t2")
    assert types_of(ours).count(EventType.RAW) == types_of(stock).count(EventType.RAW) > 0


async def test_emit_raw_events_false_sends_none(saver: Any, authority: ApprovalAuthority) -> None:
    agent = AAISLangGraphAgent(
        name="raw", graph=context_graph(saver, []), authority=authority, emit_raw_events=False
    )
    events = await events_of(agent, "t1")
    assert EventType.RAW not in types_of(events)
    assert all(getattr(event, "raw_event", None) is None for event in events)


async def test_a_plain_interrupt_gets_the_legacy_event_and_the_outcome(
    saver: Any, authority: ApprovalAuthority
) -> None:
    agent = AAISLangGraphAgent(name="ask", graph=plain_interrupt_graph(saver), authority=authority)
    events = await events_of(agent, "t1")
    legacy = [e for e in events if e.type == EventType.CUSTOM and e.name == "on_interrupt"]
    assert [e.value for e in legacy] == ['{"question": "go on?"}']
    finished = events[-1]
    assert finished.type == EventType.RUN_FINISHED and finished.outcome.type == "interrupt"
    state = await agent.graph.aget_state({"configurable": {"thread_id": "t1"}})
    assert [i.id for i in finished.outcome.interrupts] == [i.id for i in state.interrupts]


async def test_the_legacy_event_can_be_switched_off(
    saver: Any, authority: ApprovalAuthority
) -> None:
    agent = AAISLangGraphAgent(
        name="ask",
        graph=plain_interrupt_graph(saver),
        authority=authority,
        enable_legacy_on_interrupt_event=False,
    )
    events = await events_of(agent, "t1")
    assert EventType.CUSTOM not in types_of(events)
    assert events[-1].outcome.type == "interrupt"


async def test_an_approval_is_offered_only_in_the_interrupt_outcome(
    saver: Any, authority: ApprovalAuthority
) -> None:
    agent = AAISLangGraphAgent(name="keys", graph=approval_graph(saver), authority=authority)
    first = await events_of(agent, "t1")
    again = await events_of(agent.clone(), "t1")  # a reconnect re-offers the open approval
    for events in (first, again):
        assert not [e for e in events if e.type == EventType.CUSTOM], types_of(events)
        [offered] = events[-1].outcome.interrupts
        assert offered.reason == "aais:approval"


async def test_an_approval_resumes_with_the_default_flags(
    saver: Any, authority: ApprovalAuthority
) -> None:
    agent = AAISLangGraphAgent(name="keys", graph=approval_graph(saver), authority=authority)
    thread_id, [item] = await paused(agent)
    finished = terminal(await run(agent, thread_id, resume=[answer(item)]))
    assert finished.type == EventType.RUN_FINISHED and finished.outcome is None
    state = await agent.graph.aget_state({"configurable": {"thread_id": thread_id}})
    assert state.values["note"] == "rotated"


# -- constructor flags ----------------------------------------------------------------------


def test_every_stock_constructor_flag_is_accepted(authority: ApprovalAuthority) -> None:
    graph = context_graph(None, [])
    attributed = AAISLangGraphAgent(
        name="a", graph=graph, authority=authority, emit_subagent_events=True
    )
    hidden = AAISLangGraphAgent(
        name="h", graph=graph, authority=authority, subagent_visibility="hidden"
    )
    assert attributed.subagent_visibility == "attributed" and attributed.emit_subagent_events
    assert hidden.subagent_visibility == "hidden" and not hidden.emit_subagent_events
    quiet = AAISLangGraphAgent(
        name="q",
        graph=graph,
        authority=authority,
        enable_legacy_on_interrupt_event=False,
        emit_interrupt_outcome=True,
        emit_raw_events=False,
    )
    assert not quiet.enable_legacy_on_interrupt_event and not quiet.emit_raw_events


def test_the_stock_defaults_are_kept_but_for_the_interrupt_outcome(
    authority: ApprovalAuthority,
) -> None:
    ours = AAISLangGraphAgent(name="d", graph=context_graph(None, []), authority=authority)
    stock = LangGraphAgent(name="d", graph=context_graph(None, []))
    for flag in ("enable_legacy_on_interrupt_event", "emit_raw_events", "subagent_visibility"):
        assert getattr(ours, flag) == getattr(stock, flag), flag
    assert ours.emit_interrupt_outcome and not stock.emit_interrupt_outcome


async def test_emit_interrupt_outcome_false_is_stocks_for_a_plain_interrupt(
    saver: Any, authority: ApprovalAuthority
) -> None:
    graph = plain_interrupt_graph(saver)
    ours = AAISLangGraphAgent(
        name="ask", graph=graph, authority=authority, emit_interrupt_outcome=False
    )
    mine, theirs = (
        await events_of(ours, "t1"),
        await events_of(LangGraphAgent(name="ask", graph=graph), "t2"),
    )
    for events in (mine, theirs):
        [legacy] = [e for e in events if e.type == EventType.CUSTOM and e.name == "on_interrupt"]
        assert legacy.value == '{"question": "go on?"}'
        assert events[-1].type == EventType.RUN_FINISHED and events[-1].outcome is None


async def test_an_approval_is_offered_in_the_outcome_whatever_emit_interrupt_outcome_says(
    saver: Any, authority: ApprovalAuthority
) -> None:
    agent = AAISLangGraphAgent(
        name="keys", graph=approval_graph(saver), authority=authority, emit_interrupt_outcome=False
    )
    thread_id = "t-keys"
    offered = await run(agent, thread_id)
    assert not [e for e in offered if e.type == EventType.CUSTOM], types_of(offered)
    [item] = interrupts_of(offered)
    assert item.reason == "aais:approval"
    again = interrupts_of(await run(agent.clone(), thread_id))  # a reconnect offers it again
    assert [i.id for i in again] == [item.id]
    finished = terminal(await run(agent, thread_id, resume=[answer(item)]))
    assert finished.type == EventType.RUN_FINISHED and finished.outcome is None
    state = await agent.graph.aget_state({"configurable": {"thread_id": thread_id}})
    assert state.values["note"] == "rotated"


def test_a_subclass_that_passes_stocks_flag_defaults_builds_and_clones(
    authority: ApprovalAuthority,
) -> None:
    class StockShaped(AAISLangGraphAgent):
        def __init__(
            self,
            *,
            name: str,
            graph: Any,
            description: str | None = None,
            config: Any = None,
            emit_interrupt_outcome: bool = False,
        ) -> None:
            super().__init__(
                name=name,
                graph=graph,
                authority=authority,
                description=description,
                config=config,
                emit_interrupt_outcome=emit_interrupt_outcome,
            )

    agent = StockShaped(name="s", graph=context_graph(None, []))
    twin = agent.clone()
    assert type(twin) is StockShaped and not twin.emit_interrupt_outcome


def test_conflicting_subagent_flags_are_refused_as_stock_refuses_them(
    authority: ApprovalAuthority,
) -> None:
    with pytest.raises(ValueError, match="subagent_visibility"):
        AAISLangGraphAgent(
            name="x",
            graph=context_graph(None, []),
            authority=authority,
            emit_subagent_events=True,
            subagent_visibility="inline",
        )


# -- the resume hook ---------------------------------------------------------------------------

PLAIN_ANSWERS = {
    "one resolved": [ResumeEntry(interrupt_id="i1", status="resolved", payload={"ok": True})],
    "one cancelled": [ResumeEntry(interrupt_id="i1", status="cancelled")],
    "several": [
        ResumeEntry(interrupt_id="i1", status="resolved", payload={"a": 1}),
        ResumeEntry(interrupt_id="i2", status="cancelled"),
    ],
}


@pytest.mark.parametrize("entries", PLAIN_ANSWERS.values(), ids=PLAIN_ANSWERS.keys())
async def test_answers_to_plain_interrupts_become_stocks_command_outside_a_run(
    saver: Any, authority: ApprovalAuthority, entries: list[ResumeEntry]
) -> None:
    graph = plain_interrupt_graph(saver)
    ours = AAISLangGraphAgent(name="ask", graph=graph, authority=authority)
    stock = LangGraphAgent(name="ask", graph=graph)
    offered = interrupts_of(await events_of(ours, "t-plain"))
    for open_interrupts in (None, offered):
        built = ours._build_command_from_agui_resume(entries, open_interrupts=open_interrupts)
        expected = stock._build_command_from_agui_resume(entries, open_interrupts=open_interrupts)
        assert isinstance(built, Command) and built.resume == expected.resume


async def test_an_answer_to_an_approval_reaches_no_graph_outside_a_planned_run(
    saver: Any, authority: ApprovalAuthority
) -> None:
    from hostile.report import refused

    agent = AAISLangGraphAgent(name="keys", graph=approval_graph(saver), authority=authority)
    thread_id, [item] = await paused(agent)
    approve = answer(item)
    wrapped = ResumeEntry(
        interrupt_id=item.id, status="resolved", payload={"aais": approve.payload}
    )
    attempts = [
        ([approve], [item]),  # as prepare_stream asks, with the open interrupts
        ([approve], None),  # the hook alone: the entry carries an AAIS decision
        ([wrapped], None),
        ([ResumeEntry(interrupt_id=item.id, status="cancelled")], [item]),
    ]
    for entries, open_interrupts in attempts:
        with refused(
            "unplanned resumes",
            RuntimeError,
            opened=lambda: authority.get_resolution(request_id(item)) is not None,
        ) as caught:
            agent.with_actor(ALICE)._build_command_from_agui_resume(
                entries, open_interrupts=open_interrupts
            )
        assert "AAISLangGraphAgent.run" in str(caught.value)
    assert authority.get_resolution(request_id(item)) is None
    state = await agent.graph.aget_state({"configurable": {"thread_id": thread_id}})
    assert "note" not in state.values and [i.id for i in state.interrupts] == [item.id]


# -- clone ------------------------------------------------------------------------------------


def test_clone_keeps_every_flag_and_the_actor(authority: ApprovalAuthority) -> None:
    agent = AAISLangGraphAgent(
        name="c",
        graph=context_graph(None, []),
        authority=authority,
        description="cloned",
        enable_legacy_on_interrupt_event=False,
        emit_raw_events=False,
        subagent_visibility="hidden",
        settings=ServiceSettings(lease_ttl=12.0, lease_wait=0.5),
    ).with_actor({"id": "alice", "type": "human"})
    twin = agent.clone()
    assert twin is not agent and type(twin) is AAISLangGraphAgent
    for name in (
        "name",
        "graph",
        "authority",
        "description",
        "enable_legacy_on_interrupt_event",
        "emit_raw_events",
        "subagent_visibility",
        "service",
        "actor",
        "config",
    ):
        assert getattr(twin, name) == getattr(agent, name), name
    assert twin.driver is agent.driver and twin.driver.lease_wait == 0.5


def test_clone_keeps_a_narrower_subclass_signature(authority: ApprovalAuthority) -> None:
    class OneGraphAgent(AAISLangGraphAgent):
        def __init__(self, *, name: str, graph: Any, description: Any = None, config: Any = None):
            super().__init__(
                name=name, graph=graph, authority=authority, description=description, config=config
            )

    agent = OneGraphAgent(name="narrow", graph=context_graph(None, []))
    twin = agent.clone()
    assert type(twin) is OneGraphAgent and twin.authority is authority


def test_clone_refuses_to_drop_a_setting_the_subclass_cannot_take(
    authority: ApprovalAuthority,
) -> None:
    class OneGraphAgent(AAISLangGraphAgent):
        def __init__(self, *, name: str, graph: Any, description: Any = None, config: Any = None):
            super().__init__(name=name, graph=graph, authority=authority, config=config)

    agent = OneGraphAgent(name="narrow", graph=context_graph(None, []))
    agent.emit_raw_events = False
    with pytest.raises(TypeError, match="does not accept 'emit_raw_events'"):
        agent.clone()


def test_clone_of_a_subclass_with_a_required_extra_parameter_says_to_override_clone(
    authority: ApprovalAuthority,
) -> None:
    class KeyedAgent(AAISLangGraphAgent):
        def __init__(self, *, api_key: str, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.api_key = api_key

    agent = KeyedAgent(
        api_key="sk-secret", name="k", graph=context_graph(None, []), authority=authority
    )
    with pytest.raises(TypeError, match="must override clone") as refused:
        agent.clone()
    assert "sk-secret" not in str(refused.value)


# -- AAIS refusals inside a run ------------------------------------------------------------


async def test_a_request_over_a_limit_ends_the_run_with_its_code(
    saver: Any,
    authority: ApprovalAuthority,
) -> None:
    limited = ApprovalAuthority(authority.ledger, limits=RequestLimits(pending_per_requester=1))
    agent = AAISLangGraphAgent(name="keys", graph=approval_graph(saver), authority=limited)
    thread_id, [item] = await paused(agent)
    events = await run(agent, f"thread_{uuid.uuid4().hex}", text="rotate again")
    kinds = types_of(events)
    assert kinds[0] == EventType.RUN_STARTED and kinds[-1] == EventType.RUN_ERROR
    assert kinds.count(EventType.RUN_ERROR) == 1 and EventType.RUN_FINISHED not in kinds
    refused = events[-1]
    assert refused.code == "aais.limit_exceeded"
    assert "alice" not in refused.message and "signing" not in refused.message
    # The approval already pending stays answerable.
    finished = terminal(await run(agent, thread_id, resume=[answer(item)]))
    assert finished.type == EventType.RUN_FINISHED and finished.outcome is None
    assert interrupts_of(await run(agent, f"thread_{uuid.uuid4().hex}", text="now"))


async def test_an_authorization_refusal_inside_a_run_ends_it_with_aais_forbidden(
    saver: Any, authority: ApprovalAuthority
) -> None:
    def step(state: NoteState) -> dict[str, Any]:
        raise ForbiddenError("decide", "only the on-call engineer may rotate keys")

    builder = StateGraph(NoteState)
    builder.add_node("step", step)
    builder.add_edge(START, "step")
    agent = AAISLangGraphAgent(
        name="keys", graph=builder.compile(checkpointer=saver), authority=authority
    )
    events = await events_of(agent, "t1")
    assert events[-1].type == EventType.RUN_ERROR and events[-1].code == "aais.forbidden"
    assert events[-1].message == "forbidden: only the on-call engineer may rotate keys"


async def test_any_other_exception_is_stock_run_error_without_a_code(
    saver: Any, authority: ApprovalAuthority
) -> None:
    def step(state: NoteState) -> dict[str, Any]:
        raise RuntimeError("disk full")

    builder = StateGraph(NoteState)
    builder.add_node("step", step)
    builder.add_edge(START, "step")
    graph = builder.compile(checkpointer=saver)
    ours = await events_of(AAISLangGraphAgent(name="s", graph=graph, authority=authority), "t1")
    stock = await events_of(LangGraphAgent(name="s", graph=graph), "t2")
    assert [(e.code, e.message) for e in ours if e.type == EventType.RUN_ERROR] == [
        (e.code, e.message) for e in stock if e.type == EventType.RUN_ERROR
    ]


async def test_a_limit_met_while_resuming_with_recorded_answers_ends_the_run_with_its_code(
    saver: Any, authority: ApprovalAuthority
) -> None:
    def second_action(state: NoteState) -> dict[str, Any]:
        return {
            "kind": "keys.publish",
            "name": "publish_keys",
            "summary": "Publish the keys",
            "arguments": {},
        }

    @requires_approval(second_action)
    def publish(state: NoteState) -> dict[str, Any]:
        return {"note": "published"}

    graph = approval_graph(saver).builder
    graph.add_node("publish", publish)
    graph.add_edge("rotate", "publish")
    limited = ApprovalAuthority(authority.ledger, limits=RequestLimits(requests_per_minute=1))
    agent = AAISLangGraphAgent(
        name="keys", graph=graph.compile(checkpointer=saver), authority=limited
    )
    thread_id, [item] = await paused(agent)
    limited.decide(
        build_decision(item.metadata["aais"], decision="approve", actor=ALICE), actor=ALICE
    )
    events = await run(agent, thread_id)  # no resume: the recorded answer resumes it
    assert types_of(events) == [EventType.RUN_STARTED, EventType.RUN_ERROR]
    assert events[-1].code == "aais.limit_exceeded"

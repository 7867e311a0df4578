"""AG-UI 1.0 outcomes: ``cancelled`` when a resume only cancelled, ``subagentRunId`` for
approvals raised inside a subgraph; every stream passes ``ag-ui-validate``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from ag_ui.core import PROTOCOL_VERSION, BaseEvent, EventType, ResumeEntry
from ag_ui_validate.pytest_plugin import validate_agui
from hypothesis import given
from hypothesis import strategies as st
from langgraph.checkpoint.memory import InMemorySaver

from aais_agui import bearer_token_authenticator, create_app, run_agent_input
from aais_agui.agent import AAISLangGraphAgent
from aais_agui.run_outcomes import speaks_cancelled, subagent_run_id
from aais_langgraph import ApprovalAuthority
from aais_langgraph.protocol import id_for, is_id

from .conftest import ALICE
from .demo_graph import EffectLog, build_demo_graph
from .http_support import agui_run, serve
from .test_agent import answer, interrupts_of, paused, reoffered, request_id, terminal
from .test_agent import run as run_as


async def run(agent: AAISLangGraphAgent, thread_id: str, **options: Any) -> list[BaseEvent]:
    """A run from a client that declares AG-UI 1.0 (``RunAgentInput.protocolVersion``)."""
    return await run_as(agent, thread_id, protocol_version=PROTOCOL_VERSION, **options)


def cancel_all(interrupts: list[Any]) -> list[ResumeEntry]:
    return [ResumeEntry(interrupt_id=item.id, status="cancelled") for item in interrupts]


def outcome_of(events: list[BaseEvent]) -> str:
    finished = terminal(events)
    assert finished.type == EventType.RUN_FINISHED, getattr(finished, "message", "")
    return "success" if finished.outcome is None else str(finished.outcome.type)


def assert_valid(events: list[BaseEvent]) -> None:
    wire = [e.model_dump(mode="json", by_alias=True, exclude_none=True) for e in events]
    report = validate_agui(wire)
    assert report.summary.errors == 0, report.diagnostics


# -- cancelled ------------------------------------------------------------------------


async def test_cancelling_every_approval_when_nothing_else_runs_is_a_cancelled_run(
    agent: AAISLangGraphAgent, authority: ApprovalAuthority, effects: EffectLog
) -> None:
    thread_id, interrupts = await paused(agent, "purge /srv/old.log")
    events = await run(agent, thread_id, resume=cancel_all(interrupts))
    assert outcome_of(events) == "cancelled"
    assert_valid(events)
    wire = terminal(events).model_dump(mode="json", by_alias=True, exclude_none=True)
    assert wire["outcome"] == {"type": "cancelled"}
    assert authority.get_resolution(request_id(interrupts[0])).resolution.outcome == "cancelled"
    assert effects.list() == []
    # Nothing waits: the next run on the thread is an ordinary new run.
    again = await run(agent, thread_id, text="hello")
    assert outcome_of(again) == "success"
    assert effects.list() == []


async def test_a_client_before_1_0_gets_success_for_the_same_cancel(
    agent: AAISLangGraphAgent, effects: EffectLog
) -> None:
    # CopilotKit 1.74 (@ag-ui/core 0.0.59) declares no protocolVersion and fails a run
    # whose outcome it does not know; it gets what such a run always was.
    thread_id, interrupts = await paused(agent, "purge /srv/legacy.log")
    events = await run_as(agent, thread_id, resume=cancel_all(interrupts))
    assert outcome_of(events) == "success"
    assert terminal(events).outcome is None
    assert effects.list() == []


async def test_a_cancel_that_runs_a_rejection_handler_is_a_success(
    agent: AAISLangGraphAgent, effects: EffectLog
) -> None:
    # delete_file's on_reject adds a reply: something ran after the cancellation.
    thread_id, interrupts = await paused(agent, "delete /srv/kept.txt")
    events = await run(agent, thread_id, resume=cancel_all(interrupts))
    assert outcome_of(events) == "success"
    assert_valid(events)
    assert effects.list() == []


async def test_cancelled_tool_calls_followed_by_the_model_are_a_success(
    agent: AAISLangGraphAgent, effects: EffectLog
) -> None:
    thread_id, interrupts = await paused(agent, "email ann@example.com,bob@example.com")
    events = await run(agent, thread_id, resume=cancel_all(interrupts))
    assert outcome_of(events) == "success"
    assert effects.list() == []


async def test_a_resume_that_also_approves_is_not_cancelled(
    agent: AAISLangGraphAgent, effects: EffectLog
) -> None:
    thread_id, interrupts = await paused(agent, "email ann@example.com,bob@example.com")
    resume = [ResumeEntry(interrupt_id=interrupts[0].id, status="cancelled"), answer(interrupts[1])]
    assert outcome_of(await run(agent, thread_id, resume=resume)) == "success"
    assert len(effects.list()) == 1


async def test_a_refused_cancel_is_a_run_error_not_a_cancelled_run(
    agent: AAISLangGraphAgent, authority: ApprovalAuthority
) -> None:
    thread_id, [item] = await paused(agent, "purge /srv/raced.log")
    authority.decide(answer(item, "deny").metadata["aais"], actor={"id": "bob", "type": "human"})
    events = await run(agent, thread_id, resume=cancel_all([item]))
    assert terminal(events).type == EventType.RUN_ERROR
    assert_valid(events)


# -- subagentRunId --------------------------------------------------------------------


async def test_an_approval_inside_a_subgraph_carries_its_subagent_run_id(
    agent: AAISLangGraphAgent, authority: ApprovalAuthority, effects: EffectLog
) -> None:
    thread_id = "thread_subgraph_approve"
    events = await run(agent, thread_id, text="archive /srv/q3.csv")
    assert_valid(events)
    [item] = interrupts_of(events)
    namespace = authority.get_stored_request(request_id(item)).context["checkpoint_ns"]
    parent, _, leaf = namespace.rpartition("|")
    assert parent.startswith("archive:") and leaf.startswith("archive_file:")
    assert item.subagent_run_id == id_for(parent)
    # Stable: a reconnect offers the same interrupt with the same subagent run id.
    [again] = interrupts_of(await run(agent, thread_id))
    assert again.model_dump() == item.model_dump()
    resumed = await run(agent, thread_id, resume=[answer(item)])
    assert outcome_of(resumed) == "success"
    assert_valid(resumed)
    assert effects.list() == [(thread_id, "archive_file", "/srv/q3.csv")]


async def test_two_subgraph_invocations_get_two_subagent_run_ids(
    agent: AAISLangGraphAgent,
) -> None:
    _, [first] = await paused(agent, "archive /srv/a.csv")
    _, [second] = await paused(agent, "archive /srv/b.csv")
    assert None not in (first.subagent_run_id, second.subagent_run_id)
    assert first.subagent_run_id != second.subagent_run_id


async def test_top_level_approvals_carry_no_subagent_run_id(agent: AAISLangGraphAgent) -> None:
    _, node = await paused(agent, "delete /srv/x.txt")
    _, tools = await paused(agent, "email ann@example.com")
    assert [i.subagent_run_id for i in node + tools] == [None, None]


async def test_a_subgraph_approval_offered_again_after_a_refusal_keeps_its_id(
    agent: AAISLangGraphAgent,
) -> None:
    thread_id, [item] = await paused(agent, "archive /srv/tampered.csv")
    body = answer(item).metadata["aais"]
    body["decision"]["action_digest"] = "sha256:" + "0" * 64
    tampered = ResumeEntry(interrupt_id=item.id, status="resolved", payload=body)
    events = await run(agent, thread_id, resume=[tampered])
    assert_valid(events)
    [again] = reoffered(events)
    assert again.subagent_run_id == item.subagent_run_id is not None


async def test_cancelling_a_subgraph_approval_is_a_cancelled_run(
    agent: AAISLangGraphAgent, effects: EffectLog
) -> None:
    thread_id, interrupts = await paused(agent, "archive /srv/never.csv")
    events = await run(agent, thread_id, resume=cancel_all(interrupts))
    assert outcome_of(events) == "cancelled"
    assert_valid(events)
    assert effects.list() == []


_SEGMENT = st.from_regex(r"[a-z_]{1,8}:[0-9a-f-]{1,12}", fullmatch=True)


@given(st.lists(_SEGMENT, min_size=2, max_size=4), st.lists(_SEGMENT, min_size=2, max_size=4))
def test_subagent_run_ids_are_injective_in_the_parent_namespace(a: list[str], b: list[str]) -> None:
    id_a, id_b = subagent_run_id("|".join(a)), subagent_run_id("|".join(b))
    assert id_a is not None and id_b is not None and is_id(id_a)
    assert (id_a == id_b) == (a[:-1] == b[:-1])
    assert subagent_run_id(a[0]) is None


# -- over HTTP ------------------------------------------------------------------------


@pytest.fixture
def http(tmp_path: Path, authority: ApprovalAuthority) -> Iterator[tuple[httpx.Client, EffectLog]]:
    effects = EffectLog(tmp_path / "http-effects.db")
    app = create_app(
        build_demo_graph(effects, InMemorySaver()),
        authority=authority,
        authenticate=bearer_token_authenticator({"alice-token": ALICE}),
    )
    with (
        serve(app) as url,
        httpx.Client(
            base_url=url, headers={"Authorization": "Bearer alice-token"}, timeout=30
        ) as client,
    ):
        yield client, effects


def test_cancelled_and_subagent_outcomes_over_http(
    http: tuple[httpx.Client, EffectLog],
) -> None:
    client, effects = http
    streams: list[list[dict[str, Any]]] = []
    for text in ("purge /srv/http.log", "archive /srv/http.csv"):
        thread_id = f"thread_http_{text.split()[0]}"
        paused_run = agui_run(client, "/agent", run_agent_input(thread_id, text=text))
        [interrupt] = paused_run[-1]["outcome"]["interrupts"]
        cancel = [{"interruptId": interrupt["id"], "status": "cancelled"}]
        body = {**run_agent_input(thread_id, resume=cancel), "protocolVersion": PROTOCOL_VERSION}
        resumed = agui_run(client, "/agent", body)
        assert resumed[0]["protocolVersion"]
        assert resumed[-1]["type"] == "RUN_FINISHED"
        assert resumed[-1]["outcome"] == {"type": "cancelled"}
        streams += [paused_run, resumed]
    assert "subagentRunId" not in streams[0][-1]["outcome"]["interrupts"][0]
    assert streams[2][-1]["outcome"]["interrupts"][0]["subagentRunId"].startswith("archive:")
    for events in streams:
        report = validate_agui(events)
        assert report.summary.errors == 0, report.diagnostics
    assert effects.list() == []


@pytest.mark.parametrize(
    ("declared", "speaks"),
    [("1.0", True), ("1.3", True), ("2.0", True), ("0.9", False), ("", False), (None, False)],
)
def test_only_clients_declaring_1_0_or_later_get_the_cancelled_outcome(
    declared: str | None, speaks: bool
) -> None:
    assert speaks_cancelled(declared) is speaks

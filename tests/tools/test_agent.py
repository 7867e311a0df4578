"""ApprovalMiddleware in a create_agent agent driven by a scripted fake chat model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver

from aais_langgraph import ApprovalAuthority, aresume_with_decisions, build_decision
from aais_langgraph.gate.langchain_ui import LANGCHAIN_UI_KEYS, approval_envelope
from aais_langgraph.tools import ApprovalMiddleware

from .helpers import ALICE, Recorder, answer, call, pending, script, thread, tool_messages, turn

SCHEMA = Path(__file__).resolve().parent.parent / "conformance" / "aais-1.0.schema.json"


def two_calls_agent(recorder: Recorder, saver: Any, authority: ApprovalAuthority) -> Any:
    model = script(
        turn(call("send_email", "c1", to="bob@example.com"), call("search", "c2", query="q"))
    )
    return create_agent(
        model,
        tools=recorder.tools(),
        middleware=[ApprovalMiddleware({"send_email": True}, authority=authority)],
        checkpointer=saver,
    )


def test_ungated_call_runs_while_gated_call_waits(recorder, saver, authority) -> None:
    agent = two_calls_agent(recorder, saver, authority)
    agent.invoke({"messages": [("user", "go")]}, thread())
    assert recorder.runs == [("search", {"query": "q"})]
    assert list(pending(agent, thread())) == ["c1"]
    assert agent.get_state(thread()).next == ("tools",)


def test_approved_gated_call_runs_once_then_agent_finishes(recorder, saver, authority) -> None:
    agent = two_calls_agent(recorder, saver, authority)
    agent.invoke({"messages": [("user", "go")]}, thread())
    requested = pending(agent, thread())["c1"]
    [resolved] = answer(agent, thread(), authority, (requested, "approve"))
    assert resolved.resolution.outcome == "approved"
    assert recorder.count("send_email") == 1 and recorder.count("search") == 1
    assert tool_messages(agent, thread())["c1"].content == "sent to bob@example.com"
    final = agent.get_state(thread()).values["messages"][-1]
    assert isinstance(final, AIMessage) and final.content == "All done."


def test_denied_call_tells_the_model_and_agent_carries_on(recorder, saver, authority) -> None:
    agent = two_calls_agent(recorder, saver, authority)
    agent.invoke({"messages": [("user", "go")]}, thread())
    answer(agent, thread(), authority, (pending(agent, thread())["c1"], "deny"))
    message = tool_messages(agent, thread())["c1"]
    assert message.status == "error"
    assert message.content.startswith("User rejected the tool call for `send_email`")
    assert "not executed" in message.content
    assert message.artifact["aais"]["resolution"]["outcome"] == "denied"
    assert recorder.count("send_email") == 0
    assert agent.get_state(thread()).values["messages"][-1].content == "All done."


def test_interrupt_value_is_a_schema_valid_tool_call_request(recorder, authority) -> None:
    agent = two_calls_agent(recorder, InMemorySaver(), authority)
    agent.invoke({"messages": [("user", "go")]}, thread())
    value = pending(agent, thread())["c1"]
    # Beside the envelope, the keys LangChain's approval UIs read (a view of the request).
    envelope = approval_envelope(value)
    assert set(value) - set(envelope) == set(LANGCHAIN_UI_KEYS)
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(schema).validate(envelope)
    request = envelope["request"]
    assert request["action"]["kind"] == "tool.call"
    assert request["action"]["name"] == "send_email"
    assert request["action"]["arguments"] == {"to": "bob@example.com"}
    assert "bob@example.com" not in request["action"]["summary"]
    stored = authority.get_stored_request(request["id"])
    assert stored is not None and stored.context["tool_call_id"] == "c1"
    assert stored.thread_id == "t1"


def test_parallel_gated_calls_are_all_open_and_answerable_one_at_a_time(
    recorder, saver, authority
) -> None:
    model = script(
        turn(
            call("send_email", "c1", to="a@example.com"),
            call("send_email", "c2", to="b@example.com"),
            call("read_file", "c3", path="/tmp/x"),
        )
    )
    agent = create_agent(
        model,
        tools=recorder.tools(),
        middleware=[
            ApprovalMiddleware({"send_email": True, "read_file": True}, authority=authority)
        ],
        checkpointer=saver,
    )
    agent.invoke({"messages": [("user", "go")]}, thread())
    requests = pending(agent, thread())
    assert sorted(requests) == ["c1", "c2", "c3"]
    assert len({r["request"]["id"] for r in requests.values()}) == 3
    answer(agent, thread(), authority, (requests["c2"], "approve"))
    assert recorder.runs == [("send_email", {"to": "b@example.com", "body": "hi"})]
    assert sorted(pending(agent, thread())) == ["c1", "c3"]
    answer(agent, thread(), authority, (requests["c3"], "deny"), (requests["c1"], "approve"))
    assert recorder.count("send_email") == 2 and recorder.count("read_file") == 0
    assert agent.get_state(thread()).values["messages"][-1].content == "All done."


def test_tools_not_in_interrupt_on_or_set_false_run_untouched(recorder, saver, authority) -> None:
    model = script(turn(call("search", "c1", query="q"), call("read_file", "c2", path="/x")))
    agent = create_agent(
        model,
        tools=recorder.tools(),
        middleware=[ApprovalMiddleware({"search": False}, authority=authority)],
        checkpointer=saver,
    )
    agent.invoke({"messages": [("user", "go")]}, thread())
    assert recorder.count("search") == 1 and recorder.count("read_file") == 1
    assert authority.ledger.list_pending() == []


async def test_async_agent_approves_and_denies_by_request(recorder, authority) -> None:
    model = script(
        turn(call("send_email", "c1", to="a@example.com"), call("read_file", "c2", path="/x"))
    )
    agent = create_agent(
        model,
        tools=recorder.tools(),
        middleware=[
            ApprovalMiddleware({"send_email": True, "read_file": True}, authority=authority)
        ],
        checkpointer=InMemorySaver(),
    )
    await agent.ainvoke({"messages": [("user", "go")]}, thread())
    requests = pending(agent, thread())
    decisions = [
        build_decision(requests["c2"], decision="deny", actor=ALICE),
        build_decision(requests["c1"], decision="approve", actor=ALICE),
    ]
    await aresume_with_decisions(agent, thread(), decisions, actor=ALICE, authority=authority)
    assert recorder.runs == [("send_email", {"to": "a@example.com", "body": "hi"})]
    assert tool_messages(agent, thread())["c2"].status == "error"


@pytest.mark.parametrize("entry", [{"allowed_decisions": ["approve", "ignore"]}, {"bogus": 1}])
def test_bad_interrupt_on_entries_fail_at_construction(entry: Any) -> None:
    with pytest.raises(ValueError, match="interrupt_on"):
        ApprovalMiddleware({"send_email": entry})

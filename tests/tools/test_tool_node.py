"""ApprovalToolNode in a hand-built graph routed with route_tool_calls."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Send

from aais_langgraph import Cancellation, resume_with_decisions
from aais_langgraph.tools import (
    ApprovalToolNode,
    pending_tool_calls,
    route_tool_calls,
    tool_call_router,
)

from .helpers import ALICE, Recorder, answer, call, pending, script, thread, tool_graph, turn

EMAIL_AND_SEARCH = turn(
    call("send_email", "c1", to="bob@example.com"), call("search", "c2", query="q")
)


def graph_for(recorder: Recorder, saver: Any, authority: Any, *turns: AIMessage, **options: Any):
    model = script(*(turns or (EMAIL_AND_SEARCH,)))
    return tool_graph(model, recorder.tools(), saver, authority=authority, **options)


def test_every_tool_is_gated_by_default_and_each_call_waits_alone(
    recorder, saver, authority
) -> None:
    graph = graph_for(recorder, saver, authority)
    graph.invoke({"messages": [HumanMessage("go")]}, thread())
    assert recorder.runs == []
    assert sorted(pending(graph, thread())) == ["c1", "c2"]


def test_approved_call_runs_with_exactly_the_approved_arguments(recorder, saver, authority) -> None:
    graph = graph_for(recorder, saver, authority, interrupt_on={"send_email": True})
    graph.invoke({"messages": [HumanMessage("go")]}, thread())
    answer(graph, thread(), authority, (pending(graph, thread())["c1"], "approve"))
    assert recorder.runs == [
        ("search", {"query": "q"}),
        ("send_email", {"to": "bob@example.com", "body": "hi"}),
    ]
    assert graph.get_state(thread()).values["messages"][-1].content == "All done."


def refusal(graph: Any) -> ToolMessage:
    messages = graph.get_state(thread()).values["messages"]
    [message] = [m for m in messages if isinstance(m, ToolMessage) and m.tool_call_id == "c1"]
    assert message.status == "error"
    assert "not executed" in message.content and "bob@example.com" not in message.content
    return message


def test_denied_call_gets_an_error_tool_message(recorder, saver, authority) -> None:
    graph = graph_for(recorder, saver, authority, interrupt_on={"send_email": True})
    graph.invoke({"messages": [HumanMessage("go")]}, thread())
    answer(graph, thread(), authority, (pending(graph, thread())["c1"], "deny"))
    assert "rejected" in refusal(graph).content
    assert recorder.count("send_email") == 0


def test_cancelled_call_gets_an_error_tool_message(recorder, saver, authority) -> None:
    graph = graph_for(recorder, saver, authority, interrupt_on={"send_email": True})
    graph.invoke({"messages": [HumanMessage("go")]}, thread())
    request_id = pending(graph, thread())["c1"]["request"]["id"]
    resume_with_decisions(
        graph, thread(), Cancellation(request_id), actor=ALICE, authority=authority
    )
    assert "cancelled" in refusal(graph).content
    assert recorder.count("send_email") == 0


def test_expired_call_gets_an_error_tool_message(recorder, saver, authority, clock) -> None:
    graph = graph_for(recorder, saver, authority, interrupt_on={"send_email": {"expires_in": 60}})
    graph.invoke({"messages": [HumanMessage("go")]}, thread())
    clock.advance(seconds=61)
    answer(graph, thread(), authority, (pending(graph, thread())["c1"], "approve"))
    assert "expired" in refusal(graph).content
    assert recorder.count("send_email") == 0


def test_call_changed_after_it_was_shown_is_stale(recorder, saver, authority) -> None:
    graph = graph_for(recorder, saver, authority, interrupt_on={"send_email": True})
    graph.invoke({"messages": [HumanMessage("go")]}, thread())
    shown = pending(graph, thread())["c1"]
    edited = AIMessage(
        content="", id="ai-0", tool_calls=[call("send_email", "c1", to="eve@example.com")]
    )
    graph.update_state(thread(), {"messages": [edited]}, as_node="agent")
    graph.invoke(None, thread())
    assert authority.get_resolution(shown["request"]["id"]).resolution.outcome == "stale"
    [resolved] = answer(graph, thread(), authority, (shown, "approve"))
    assert resolved.resolution.outcome == "conflict"
    assert recorder.count("send_email") == 0


def test_time_of_use_check_refuses_an_approval_for_other_arguments(recorder, authority) -> None:
    """A resolution whose digest is not the digest of the call about to run never runs it."""
    from aais_langgraph.tools.call_gate import GatedCall, ToolCallGate
    from aais_langgraph.tools.config import rule_for

    graph = graph_for(recorder, InMemorySaver(), authority, interrupt_on={"send_email": True})
    graph.invoke({"messages": [HumanMessage("go")]}, thread())
    requested = pending(graph, thread())["c1"]
    [approved] = answer(graph, thread(), authority, (requested, "approve"))
    action = authority.get_request(requested["request"]["id"]).request.action
    other = action.model_copy(update={"arguments": {"to": "eve@example.com"}})

    class Request:
        tool_call = {"name": "send_email", "args": {"to": "eve@example.com"}, "id": "c1"}

    rule = rule_for("send_email", True)
    assert rule is not None
    checked = ToolCallGate._checked(Request(), GatedCall(other), approved, rule)  # type: ignore[arg-type]
    assert isinstance(checked, ToolMessage) and checked.status == "error"
    assert "changed after it was shown" in checked.content


def test_several_gated_calls_in_one_task_are_refused(recorder, authority) -> None:
    builder = StateGraph(MessagesState)
    model = script(EMAIL_AND_SEARCH)
    builder.add_node("agent", lambda s: {"messages": [model.invoke(s["messages"])]})
    builder.add_node("tools", ApprovalToolNode(recorder.tools(), authority=authority))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    graph = builder.compile(checkpointer=InMemorySaver())
    with pytest.raises(ValueError, match="route_tool_calls"):
        graph.invoke({"messages": [HumanMessage("go")]}, thread())
    assert recorder.runs == []


def test_parse_input_seam_still_exists_on_tool_node() -> None:
    """ApprovalToolNode overrides ToolNode._parse_input; fail loudly if the seam moves."""
    assert "_parse_input" in vars(ToolNode)
    calls, kind = ToolNode([])._parse_input([call("search", "x", query="q")])
    assert kind == "tool_calls" and calls[0]["id"] == "x"


def test_router_sends_each_unanswered_call_to_its_own_task() -> None:
    message = AIMessage(content="", tool_calls=[call("a", "1"), call("b", "2")])
    answered = ToolMessage(content="ok", tool_call_id="1")
    sends = route_tool_calls({"messages": [message, answered]})
    assert sends == [Send("tools", [call("b", "2")])]
    assert tool_call_router("act")({"messages": [message]})[0].node == "act"
    assert route_tool_calls({"messages": [AIMessage(content="done")]}) == END
    assert pending_tool_calls([HumanMessage("hi")]) == []


async def test_async_graph_gates_and_runs_approved_calls(recorder, authority) -> None:
    from aais_langgraph import aresume_with_decisions, build_decision

    graph = graph_for(recorder, InMemorySaver(), authority, interrupt_on={"send_email": True})
    await graph.ainvoke({"messages": [HumanMessage("go")]}, thread())
    decided = build_decision(pending(graph, thread())["c1"], decision="approve", actor=ALICE)
    await aresume_with_decisions(graph, thread(), decided, actor=ALICE, authority=authority)
    assert recorder.count("send_email") == 1


def test_arguments_that_are_not_ijson_are_refused_without_running(recorder, authority) -> None:
    bad = turn(call("send_email", "c1", to="x@example.com", body=float("nan")))
    graph = graph_for(recorder, InMemorySaver(), authority, bad, interrupt_on={"send_email": True})
    graph.invoke({"messages": [HumanMessage("go")]}, thread())
    message = refusal_of(graph)
    assert "cannot be sent for approval" in message.content and "nan" not in message.content
    assert recorder.runs == []


def refusal_of(graph: Any) -> ToolMessage:
    messages = graph.get_state(thread()).values["messages"]
    return next(m for m in messages if isinstance(m, ToolMessage))

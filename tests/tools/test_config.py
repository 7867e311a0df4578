"""interrupt_on entries, summaries and the messages the model reads."""

from __future__ import annotations

import itertools
from datetime import timedelta
from typing import Any

import pytest
from langchain.agents import create_agent
from langgraph.checkpoint.memory import InMemorySaver

from aais_langgraph import ApprovalAuthority, PolicyVerdict
from aais_langgraph.protocol import Action, Decision, Origin, Request, build_request
from aais_langgraph.tools import ApprovalMiddleware, describe_tool_call
from aais_langgraph.tools.config import rule_for, rules_from
from aais_langgraph.tools.messages import refusal_message

from .helpers import answer, call, pending, script, thread, tool_messages, turn

SECRET = "sk-live-SECRET123"


def test_true_leaves_choices_to_policy_and_allows_edits() -> None:
    rule = rule_for("send_email", True)
    assert rule is not None and rule.choices is None and rule.editable


def test_false_and_missing_tools_are_not_gated() -> None:
    assert rules_from({"a": False, "b": True}).keys() == {"b"}


def test_hitl_allowed_decisions_map_to_aais_choices() -> None:
    rule = rule_for("t", {"allowed_decisions": ["approve", "reject"]})
    assert rule is not None and not rule.editable
    assert [(c.decision, c.scope) for c in rule.choices or ()] == [
        ("approve", "once"),
        ("deny", "once"),
    ]


def test_session_scope_adds_a_constrained_session_choice() -> None:
    rule = rule_for("t", {"session_scope": {"argument_prefixes": {"path": "/srv/"}}})
    assert rule is not None and rule.choices is not None
    [session] = [c for c in rule.choices if c.scope == "session"]
    assert session.scope_constraints == {"argument_prefixes": {"path": "/srv/"}}


def test_risk_level_and_expiry_shorthands() -> None:
    rule = rule_for("t", {"risk": "critical", "expires_in": 30})
    assert rule is not None and rule.risk is not None
    assert rule.risk.level == "critical" and rule.expires_in == timedelta(seconds=30)


@pytest.mark.parametrize(
    "entry, fragment",
    [
        ({"allowed_decisions": ["ignore"]}, "unsupported"),
        ({"allowed_decisions": []}, "at least one"),
        ({"choices": [{"decision": "approve", "scope": "once", "label": "x"}]}, "deny or cancel"),
        ({"reviewer_note": "yes"}, "reviewer_note"),
        ({"risk": "extreme"}, "risk"),
        ({"expires_in": -1}, "positive"),
        ({"expires_in": "soon"}, "timedelta"),
        ({"when": "yes"}, "callable"),
        ({"choices": [{"decision": "deny", "scope": "session", "label": "x"}]}, "scope"),
        ("yes", "expected True"),
    ],
)
def test_bad_entries_are_refused_with_the_tool_named(entry: Any, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment) as raised:
        rule_for("send_email", entry)
    assert "send_email" in str(raised.value)


def test_default_summary_names_tool_and_arguments_but_no_values() -> None:
    class Request:
        tool_call = {"name": "login", "args": {"user": "bob", "password": SECRET}, "id": "1"}

    summary = describe_tool_call(Request())  # type: ignore[arg-type]
    assert summary == "login (user, password)"


def test_default_summary_reads_as_a_person_writes_the_call_in_its_order() -> None:
    class Request:
        tool_call = {
            "name": "send_email",
            "args": {"to": "ann@example.com", "subject": "Q3", "body": "Hello"},
            "id": "1",
        }

    summary = describe_tool_call(Request())  # type: ignore[arg-type]
    assert summary == "send_email (to, subject, body)"
    assert "Call the tool" not in summary and "ann@example.com" not in summary


def refused(outcome: str, **extra: Any) -> str:
    requested = build_request(
        Action(kind="tool.call", name="login", summary="s", arguments={"password": SECRET}),
        origin=Origin(harness="h", session_id="s"),
    )
    from aais_langgraph.authority.resolutions import resolution_envelope
    from aais_langgraph.protocol import utc_now

    resolved = resolution_envelope(
        requested.request, outcome=outcome, message="m", now=utc_now(), sequence=0, **extra
    )
    tool_call = {"name": "login", "args": {"password": SECRET}, "id": "c1", "type": "tool_call"}
    message = refusal_message(tool_call, resolved)  # type: ignore[arg-type]
    assert message.status == "error" and message.tool_call_id == "c1"
    return str(message.content)


@pytest.mark.parametrize(
    "outcome", ["denied", "cancelled", "expired", "stale", "invalid", "conflict"]
)
def test_every_refusal_is_value_free_and_says_nothing_ran(outcome: str) -> None:
    text = refused(outcome)
    assert SECRET not in text and "not executed" in text
    if outcome != "denied":  # a denial reads as HumanInTheLoopMiddleware's reject
        assert "approval request apr_" in text


class NoOutboundEmail:
    def on_request(self, action: Action, origin: Origin) -> PolicyVerdict:
        if action.name == "send_email":
            return PolicyVerdict("deny", reason="Outbound email is disabled.")
        return PolicyVerdict("ask")

    def on_decision(self, request: Request, decision: Decision) -> str | None:
        return None


def test_policy_denial_at_request_time_reaches_the_model(recorder) -> None:
    authority = ApprovalAuthority(policy=NoOutboundEmail())
    agent = create_agent(
        script(turn(call("send_email", "c1", to="x@example.com"))),
        tools=recorder.tools(),
        middleware=[ApprovalMiddleware({"send_email": True}, authority=authority)],
        checkpointer=InMemorySaver(),
    )
    agent.invoke({"messages": [("user", "go")]}, thread())
    message = tool_messages(agent, thread())["c1"]
    assert message.status == "error"
    assert "Policy does not allow" in message.content and "disabled" in message.content
    assert recorder.runs == []


def test_unstable_describer_cannot_make_an_approval_stale(recorder) -> None:
    authority = ApprovalAuthority()
    counter = itertools.count()
    middleware = ApprovalMiddleware(
        {"send_email": {"description": lambda request: f"Email #{next(counter)}"}},
        authority=authority,
    )
    agent = create_agent(
        script(turn(call("send_email", "c1", to="x@example.com"))),
        tools=recorder.tools(),
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )
    agent.invoke({"messages": [("user", "go")]}, thread())
    shown = pending(agent, thread())["c1"]
    assert shown["request"]["action"]["summary"] == "Email #0"
    answer(agent, thread(), authority, (shown, "approve"))
    assert recorder.count("send_email") == 1


def test_authority_from_runtime_context(recorder) -> None:
    from dataclasses import dataclass

    @dataclass
    class Context:
        authority: ApprovalAuthority

    authority = ApprovalAuthority()
    agent = create_agent(
        script(turn(call("send_email", "c1", to="x@example.com"))),
        tools=recorder.tools(),
        middleware=[ApprovalMiddleware({"send_email": True})],
        checkpointer=InMemorySaver(),
        context_schema=Context,
    )
    agent.invoke({"messages": [("user", "go")]}, thread(), context=Context(authority))
    assert list(pending(agent, thread())) == ["c1"]
    assert len(authority.ledger.list_pending()) == 1


def test_a_page_tools_summary_reads_as_a_tool_calls_in_its_order() -> None:
    from aais_langgraph.tools.page_tools import summarize_page_call

    summary = summarize_page_call("move", {"x": 10, "y": "secret-ish"}, "https://app.example")
    assert summary == "move (x, y) in the page at https://app.example"

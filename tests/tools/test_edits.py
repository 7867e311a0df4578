"""Edits supersede: the original is cancelled; one reviewer action edits and approves."""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langgraph.checkpoint.memory import InMemorySaver

from aais_langgraph import (
    AAISValidationError,
    ApprovalAuthority,
    build_decision,
    resume_with_decisions,
)
from aais_langgraph.authority import ForbiddenError, Permission, Principal
from aais_langgraph.ledger import InMemoryLedger
from aais_langgraph.protocol import Actor
from aais_langgraph.threads import waiting_resumes
from aais_langgraph.tools import STOP_LABEL, ApprovalMiddleware, aedit_tool_call, edit_tool_call

from .helpers import ALICE, Recorder, answer, call, pending, script, thread, tool_messages, turn


def paused_agent(recorder: Recorder, saver: Any, authority: Any, entry: Any = True) -> Any:
    agent = create_agent(
        script(turn(call("send_email", "c1", to="wrong@example.com"))),
        tools=recorder.tools(),
        middleware=[ApprovalMiddleware({"send_email": entry}, authority=authority)],
        checkpointer=saver,
    )
    agent.invoke({"messages": [("user", "go")]}, thread())
    return agent


def edit(
    agent: Any, authority: Any, original: dict[str, Any], *, approve: bool = False, **arguments: Any
) -> Any:
    """Propose an edit (``approve=False``) or edit and approve it, as Alice."""
    return edit_tool_call(
        agent,
        thread(),
        original["request"]["id"],
        arguments,
        actor=ALICE,
        authority=authority,
        action_digest=original["request"]["action_digest"],
        approve=approve,
    )


def decision_of(authority: Any, resolved: Any) -> dict[str, Any]:
    """The recorded ``approval.decided`` whose decision a resolution records."""
    for event in authority.events_after(0).events:
        decision = event.get("decision")
        if decision and decision["id"] == resolved.resolution.decision_id:
            return decision
    raise AssertionError("no recorded decision")


def test_edit_and_approve_is_one_reviewer_action(recorder, saver, authority) -> None:
    agent = paused_agent(recorder, saver, authority)
    original = pending(agent, thread())["c1"]

    successor = edit(agent, authority, original, approve=True, to="right@example.com")

    assert recorder.runs == [("send_email", {"to": "right@example.com", "body": "hi"})]
    assert authority.get_resolution(original["request"]["id"]).resolution.outcome == "cancelled"
    assert successor.request.action_digest != original["request"]["action_digest"]
    approved = authority.get_resolution(successor.request.id)
    assert (
        approved.approved and approved.resolution.action_digest == successor.request.action_digest
    )
    assert decision_of(authority, approved)["actor"]["id"] == ALICE["id"]
    assert pending(agent, thread()) == {}
    assert waiting_resumes(authority) == []  # nothing left for a watcher to resume
    result = tool_messages(agent, thread())["c1"]
    assert result.content.startswith("Note: a reviewer edited")
    assert authority.verify_audit().ok


def test_edit_and_approve_is_the_default(recorder, authority) -> None:
    agent = paused_agent(recorder, InMemorySaver(), authority)
    original = pending(agent, thread())["c1"]
    edit_tool_call(
        agent,
        thread(),
        original["request"]["id"],
        {"to": "right@example.com"},
        actor=ALICE,
        authority=authority,
    )
    assert recorder.runs == [("send_email", {"to": "right@example.com", "body": "hi"})]


async def test_async_edit_and_approve_is_one_reviewer_action(recorder, authority) -> None:
    agent = create_agent(
        script(turn(call("send_email", "c1", to="wrong@example.com"))),
        tools=recorder.tools(),
        middleware=[ApprovalMiddleware({"send_email": True}, authority=authority)],
        checkpointer=InMemorySaver(),
    )
    await agent.ainvoke({"messages": [("user", "go")]}, thread())
    original = pending(agent, thread())["c1"]
    await aedit_tool_call(
        agent,
        thread(),
        original["request"]["id"],
        {"to": "right@example.com"},
        actor=ALICE,
        authority=authority,
    )
    assert recorder.runs == [("send_email", {"to": "right@example.com", "body": "hi"})]


class CancelButNotApprove:
    """An authorizer that lets everyone cancel and nobody but ``approver`` approve."""

    def __init__(self, approver: str) -> None:
        self.approver = approver

    def authorize(self, principal: Principal, verb: str, resource: Any) -> Permission:
        if verb == "decide" and resource.decision == "approve":
            return Permission(principal.id == self.approver, "only the approver may approve")
        return Permission(True)


def test_an_editor_who_may_not_approve_changes_nothing(recorder) -> None:
    authority = ApprovalAuthority(InMemoryLedger(), authorizer=CancelButNotApprove("olga"))
    agent = paused_agent(recorder, InMemorySaver(), authority)
    original = pending(agent, thread())["c1"]
    request_id = original["request"]["id"]
    with pytest.raises(ForbiddenError) as raised:
        edit_tool_call(
            agent,
            thread(),
            request_id,
            {"to": "right@example.com"},
            actor=Principal(Actor.from_data(ALICE)),
            authority=authority,
        )
    assert raised.value.code == "aais.forbidden" and raised.value.verb == "decide"
    assert "right@example.com" not in str(raised.value)
    assert authority.get_resolution(request_id) is None
    assert pending(agent, thread())["c1"]["request"]["id"] == request_id
    assert recorder.runs == []
    edit_tool_call(
        agent,
        thread(),
        request_id,
        {"to": "right@example.com"},
        actor=Principal(Actor(id="olga", type="human")),
        authority=authority,
    )
    assert recorder.runs == [("send_email", {"to": "right@example.com", "body": "hi"})]


def test_an_editor_who_may_not_approve_may_still_propose(recorder) -> None:
    authority = ApprovalAuthority(InMemoryLedger(), authorizer=CancelButNotApprove("olga"))
    agent = paused_agent(recorder, InMemorySaver(), authority)
    original = pending(agent, thread())["c1"]
    alice = Principal(Actor.from_data(ALICE))
    successor = edit_tool_call(
        agent,
        thread(),
        original["request"]["id"],
        {"to": "right@example.com"},
        actor=alice,
        authority=authority,
        approve=False,
    )
    assert recorder.runs == [] and authority.get_resolution(successor.request.id) is None
    decided = build_decision(successor, decision="approve", actor=ALICE)
    with pytest.raises(ForbiddenError):
        resume_with_decisions(agent, thread(), decided, actor=alice, authority=authority)
    assert recorder.runs == []


def test_an_edit_only_tool_offers_a_cancel_and_runs_edits_in_one_action(
    recorder, authority
) -> None:
    agent = paused_agent(recorder, InMemorySaver(), authority, {"allowed_decisions": ["edit"]})
    original = pending(agent, thread())["c1"]
    offered = [(c["decision"], c["label"]) for c in original["request"]["choices"]]
    assert offered == [("cancel", STOP_LABEL)]
    edit(agent, authority, original, approve=True, to="right@example.com")
    assert recorder.runs == [("send_email", {"to": "right@example.com", "body": "hi"})]


def test_a_proposed_edit_runs_only_after_its_own_approval(recorder, saver, authority) -> None:
    agent = paused_agent(recorder, saver, authority)
    original = pending(agent, thread())["c1"]

    successor = edit(agent, authority, original, to="right@example.com")

    assert recorder.runs == []
    assert authority.get_resolution(original["request"]["id"]).resolution.outcome == "cancelled"
    waiting = pending(agent, thread())["c1"]
    assert waiting["request"]["id"] == successor.request.id != original["request"]["id"]
    assert waiting["request"]["action"]["arguments"] == {"to": "right@example.com"}
    assert waiting["request"]["action_digest"] != original["request"]["action_digest"]
    edit_info = waiting["request"]["extensions"]["aais-langgraph.org/edit"]
    assert edit_info == {"supersedes": original["request"]["id"], "edited_by": ALICE}

    answer(agent, thread(), authority, (waiting, "approve"))
    assert recorder.runs == [("send_email", {"to": "right@example.com", "body": "hi"})]
    result = tool_messages(agent, thread())["c1"]
    assert result.content.startswith("Note: a reviewer edited")
    assert result.content.endswith("sent to right@example.com")


def test_denied_edit_runs_nothing(recorder, saver, authority) -> None:
    agent = paused_agent(recorder, saver, authority)
    edit(agent, authority, pending(agent, thread())["c1"], to="right@example.com")
    answer(agent, thread(), authority, (pending(agent, thread())["c1"], "deny"))
    assert recorder.runs == []
    assert tool_messages(agent, thread())["c1"].status == "error"


def test_approving_the_superseded_original_runs_nothing(recorder, saver, authority) -> None:
    agent = paused_agent(recorder, saver, authority)
    original = pending(agent, thread())["c1"]
    edit(agent, authority, original, to="right@example.com")
    [resolved] = answer(agent, thread(), authority, (original, "approve"))
    assert resolved.resolution.outcome == "conflict"
    assert recorder.runs == []


def test_an_edit_can_itself_be_edited(recorder, saver, authority) -> None:
    agent = paused_agent(recorder, saver, authority)
    first = edit(agent, authority, pending(agent, thread())["c1"], to="second@example.com")
    second = edit(agent, authority, first.to_json(), to="third@example.com")
    assert second.request.extensions["aais-langgraph.org/edit"]["supersedes"] == first.request.id
    answer(agent, thread(), authority, (pending(agent, thread())["c1"], "approve"))
    assert recorder.runs == [("send_email", {"to": "third@example.com", "body": "hi"})]


def test_replaying_the_same_edit_returns_the_same_successor(recorder, saver, authority) -> None:
    agent = paused_agent(recorder, saver, authority)
    original = pending(agent, thread())["c1"]
    first = edit(agent, authority, original, to="right@example.com")
    assert edit(agent, authority, original, to="right@example.com") == first
    with pytest.raises(AAISValidationError, match="different edit"):
        edit(agent, authority, original, to="other@example.com")
    assert list(pending(agent, thread())) == ["c1"]


def test_edit_bound_to_a_digest_the_editor_did_not_see_is_refused(recorder, authority) -> None:
    agent = paused_agent(recorder, InMemorySaver(), authority)
    original = pending(agent, thread())["c1"]
    with pytest.raises(AAISValidationError, match="action_digest") as raised:
        edit_tool_call(
            agent,
            thread(),
            original["request"]["id"],
            {"to": "right@example.com"},
            actor=ALICE,
            authority=authority,
            action_digest="sha256:" + "1" * 64,
        )
    assert "right@example.com" not in str(raised.value)
    assert authority.get_resolution(original["request"]["id"]) is None


def test_edit_is_refused_when_the_tool_does_not_allow_it(recorder, authority) -> None:
    entry = {"allowed_decisions": ["approve", "reject"]}
    agent = paused_agent(recorder, InMemorySaver(), authority, entry)
    original = pending(agent, thread())["c1"]
    assert original["request"]["extensions"]["aais-langgraph.org/editable"] is False
    with pytest.raises(AAISValidationError, match="edits were not offered"):
        edit(agent, authority, original, to="right@example.com")
    assert authority.get_resolution(original["request"]["id"]) is None


def test_edit_of_a_resolved_request_is_refused(recorder, authority) -> None:
    agent = paused_agent(recorder, InMemorySaver(), authority)
    original = pending(agent, thread())["c1"]
    answer(agent, thread(), authority, (original, "deny"))
    with pytest.raises(AAISValidationError, match="already resolved"):
        edit(agent, authority, original, to="right@example.com")
    assert recorder.runs == []


async def test_async_proposed_edit_then_approve(recorder, authority) -> None:
    from aais_langgraph import aresume_with_decisions

    agent = create_agent(
        script(turn(call("send_email", "c1", to="wrong@example.com"))),
        tools=recorder.tools(),
        middleware=[ApprovalMiddleware({"send_email": True}, authority=authority)],
        checkpointer=InMemorySaver(),
    )
    await agent.ainvoke({"messages": [("user", "go")]}, thread())
    original = pending(agent, thread())["c1"]
    successor = await aedit_tool_call(
        agent,
        thread(),
        original["request"]["id"],
        {"to": "right@example.com"},
        actor=ALICE,
        authority=authority,
        approve=False,
    )
    decided = build_decision(successor, decision="approve", actor=ALICE)
    await aresume_with_decisions(agent, thread(), decided, actor=ALICE, authority=authority)
    assert recorder.runs == [("send_email", {"to": "right@example.com", "body": "hi"})]


def test_edit_and_approve_in_a_hand_built_graph(recorder, saver, authority) -> None:
    from .helpers import tool_graph

    model = script(turn(call("send_email", "c1", to="wrong@example.com")))
    graph = tool_graph(model, recorder.tools(), saver, authority=authority)
    graph.invoke({"messages": [("user", "go")]}, thread())
    original = pending(graph, thread())["c1"]
    edit(graph, authority, original, approve=True, to="right@example.com")
    assert recorder.runs == [("send_email", {"to": "right@example.com", "body": "hi"})]
    assert tool_messages(graph, thread())["c1"].content.startswith("Note: a reviewer edited")

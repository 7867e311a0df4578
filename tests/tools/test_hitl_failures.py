"""HumanInTheLoopMiddleware's measured failures, and ApprovalMiddleware not repeating them.

Each ``test_hitl_*`` shows the failure with LangChain's middleware (cheap, in
memory); the test after it runs the same story with ApprovalMiddleware on both
checkpointers.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from pydantic import ValidationError

from aais_langgraph import ApprovalAuthority, build_decision, resume_with_decisions
from aais_langgraph.tools import ApprovalMiddleware

from .helpers import ALICE, Recorder, answer, call, pending, script, thread, tool_messages, turn

ONE_EMAIL = turn(call("send_email", "c1", to="alice@example.com"))
EDITED = AIMessage(
    content="", id="ai-0", tool_calls=[call("send_email", "c1", to="mallory@example.com")]
)


def agent_with(middleware: Any, recorder: Recorder, saver: Any, *turns: AIMessage) -> Any:
    return create_agent(
        script(*(turns or (ONE_EMAIL,))),
        tools=recorder.tools(),
        middleware=[middleware],
        checkpointer=saver,
    )


def hitl(**options: Any) -> HumanInTheLoopMiddleware:
    return HumanInTheLoopMiddleware({"send_email": True}, interrupt_mode="per_call", **options)


# (a) arguments changed with update_state before the answer


def test_hitl_runs_arguments_edited_into_state_after_review(recorder: Recorder) -> None:
    agent = agent_with(hitl(), recorder, InMemorySaver())
    agent.invoke({"messages": [("user", "go")]}, thread())
    agent.update_state(thread(), {"messages": [EDITED]})
    agent.invoke(Command(resume={"type": "approve"}), thread())  # the reviewer saw alice
    assert recorder.runs == [("send_email", {"to": "mallory@example.com", "body": "hi"})]


def test_state_edit_before_the_answer_runs_nothing_unseen(recorder, saver, authority) -> None:
    agent = agent_with(
        ApprovalMiddleware({"send_email": True}, authority=authority), recorder, saver
    )
    agent.invoke({"messages": [("user", "go")]}, thread())
    shown = pending(agent, thread())["c1"]
    agent.update_state(thread(), {"messages": [EDITED]})

    [resolved] = answer(agent, thread(), authority, (shown, "approve"))
    assert resolved.resolution.outcome == "stale"
    agent.invoke(None, thread())
    assert recorder.runs == []
    fresh = pending(agent, thread())["c1"]
    assert fresh["request"]["action"]["arguments"] == {"to": "mallory@example.com"}
    assert fresh["request"]["action_digest"] != shown["request"]["action_digest"]


def test_state_edit_then_plain_resume_with_the_old_decision_is_refused(
    recorder, saver, authority
) -> None:
    agent = agent_with(
        ApprovalMiddleware({"send_email": True}, authority=authority), recorder, saver
    )
    agent.invoke({"messages": [("user", "go")]}, thread())
    shown = pending(agent, thread())["c1"]
    agent.update_state(thread(), {"messages": [EDITED]})
    decided = build_decision(shown, decision="approve", actor=ALICE).to_json()
    with pytest.raises(ValidationError):
        agent.invoke(Command(resume=decided), thread())
    assert recorder.runs == []
    # The edited call got its own request, and the one the reviewer saw is closed stale.
    [fresh] = authority.ledger.list_pending(thread_id="t1")
    assert fresh.envelope["request"]["action"]["arguments"] == {"to": "mallory@example.com"}
    assert authority.get_resolution(shown["request"]["id"]).resolution.outcome == "stale"


# (b) decisions given in another order than the calls


TWO_EMAILS = turn(
    call("send_email", "c1", to="keep@example.com"), call("send_email", "c2", to="spam@example.com")
)


def test_hitl_batched_applies_decisions_by_position(recorder: Recorder) -> None:
    agent = agent_with(
        HumanInTheLoopMiddleware({"send_email": True}), recorder, InMemorySaver(), TWO_EMAILS
    )
    agent.invoke({"messages": [("user", "go")]}, thread())
    # Meant as: reject spam (c2), approve keep (c1) -- but position decides.
    decisions = [{"type": "reject"}, {"type": "approve"}]
    agent.invoke(Command(resume={"decisions": decisions}), thread())
    assert recorder.runs == [("send_email", {"to": "spam@example.com", "body": "hi"})]


def test_decisions_in_another_order_each_apply_to_their_own_call(
    recorder, saver, authority
) -> None:
    agent = agent_with(
        ApprovalMiddleware({"send_email": True}, authority=authority), recorder, saver, TWO_EMAILS
    )
    agent.invoke({"messages": [("user", "go")]}, thread())
    requests = pending(agent, thread())
    answer(agent, thread(), authority, (requests["c2"], "deny"), (requests["c1"], "approve"))
    assert recorder.runs == [("send_email", {"to": "keep@example.com", "body": "hi"})]
    assert tool_messages(agent, thread())["c2"].status == "error"


# (c) a `when` predicate that flips between request and resume


def test_hitl_flipping_when_turns_a_rejection_into_an_execution(recorder: Recorder) -> None:
    ask = {"now": True}
    middleware = HumanInTheLoopMiddleware(
        {"send_email": {"allowed_decisions": ["approve", "reject"], "when": lambda r: ask["now"]}},
        interrupt_mode="per_call",
    )
    agent = agent_with(middleware, recorder, InMemorySaver())
    agent.invoke({"messages": [("user", "go")]}, thread())
    [pending_interrupt] = agent.get_state(thread()).interrupts
    ask["now"] = False
    agent.invoke(Command(resume={pending_interrupt.id: {"type": "reject"}}), thread())
    assert recorder.count("send_email") == 1


def test_flipping_when_cannot_turn_a_denial_into_an_execution(recorder, saver, authority) -> None:
    ask = {"now": True}
    middleware = ApprovalMiddleware(
        {"send_email": {"when": lambda request: ask["now"]}}, authority=authority
    )
    agent = agent_with(middleware, recorder, saver)
    agent.invoke({"messages": [("user", "go")]}, thread())
    shown = pending(agent, thread())["c1"]
    ask["now"] = False
    answer(agent, thread(), authority, (shown, "deny"))
    assert recorder.runs == []
    assert "rejected" in tool_messages(agent, thread())["c1"].content
    stored = authority.get_stored_request(shown["request"]["id"])
    assert stored is not None and stored.context["when"] is True


def test_when_false_lets_the_call_run_without_a_request(recorder, saver, authority) -> None:
    middleware = ApprovalMiddleware(
        {"send_email": {"when": lambda request: "@corp" not in request.tool_call["args"]["to"]}},
        authority=authority,
    )
    agent = agent_with(
        middleware, recorder, saver, turn(call("send_email", "c1", to="bob@corp.example"))
    )
    agent.invoke({"messages": [("user", "go")]}, thread())
    assert recorder.count("send_email") == 1
    assert authority.ledger.list_pending() == []


# (d) a replayed approval after completion


TWO_TURNS = (
    turn(call("send_email", "c1", to="first@example.com")),
    turn(call("send_email", "c2", to="second@example.com")),
)


def test_hitl_replayed_approval_approves_whatever_is_pending(recorder: Recorder) -> None:
    agent = agent_with(hitl(), recorder, InMemorySaver(), *TWO_TURNS)
    agent.invoke({"messages": [("user", "go")]}, thread())
    approval = {"type": "approve"}
    agent.invoke(Command(resume=approval), thread())  # first email, as decided
    agent.invoke(Command(resume=approval), thread())  # the same answer, replayed
    assert recorder.count("send_email") == 2


def test_replayed_approval_runs_nothing_and_returns_the_recorded_resolution(
    recorder, saver, authority
) -> None:
    agent = agent_with(
        ApprovalMiddleware({"send_email": True}, authority=authority), recorder, saver, *TWO_TURNS
    )
    agent.invoke({"messages": [("user", "go")]}, thread())
    decided = build_decision(pending(agent, thread())["c1"], decision="approve", actor=ALICE)
    [first] = resume_with_decisions(agent, thread(), decided, actor=ALICE, authority=authority)
    assert recorder.count("send_email") == 1 and list(pending(agent, thread())) == ["c2"]

    [replayed] = resume_with_decisions(agent, thread(), decided, actor=ALICE, authority=authority)
    assert replayed == first
    with pytest.raises(ValidationError):
        agent.invoke(Command(resume=decided.to_json()), thread())
    assert recorder.count("send_email") == 1
    assert list(pending(agent, thread())) == ["c2"]


# (e) every decision is bound to digest, expiry, scope and actor


@pytest.fixture
def paused(recorder, saver, authority) -> tuple[Any, dict[str, Any]]:
    agent = agent_with(
        ApprovalMiddleware({"send_email": True}, authority=authority), recorder, saver
    )
    agent.invoke({"messages": [("user", "go")]}, thread())
    return agent, pending(agent, thread())["c1"]


def test_decision_with_another_digest_runs_nothing(paused, recorder, authority) -> None:
    agent, shown = paused
    forged = build_decision(shown, decision="approve", actor=ALICE).to_json()
    forged["decision"]["action_digest"] = "sha256:" + "0" * 64
    [resolved] = resume_with_decisions(agent, thread(), forged, actor=ALICE, authority=authority)
    assert resolved.resolution.outcome == "stale"
    assert recorder.runs == [] and list(pending(agent, thread())) == ["c1"]


def test_decision_after_expiry_runs_nothing(paused, recorder, authority, clock) -> None:
    agent, shown = paused
    clock.advance(minutes=16)
    [resolved] = answer(agent, thread(), authority, (shown, "approve"))
    assert resolved.resolution.outcome == "expired"
    assert recorder.runs == []
    assert "expired" in tool_messages(agent, thread())["c1"].content


def test_decision_with_a_scope_not_offered_runs_nothing(paused, recorder, authority) -> None:
    agent, shown = paused
    [resolved] = answer(agent, thread(), authority, (shown, "approve", "session"))
    assert resolved.resolution.outcome == "invalid"
    assert recorder.runs == [] and list(pending(agent, thread())) == ["c1"]


def test_decision_records_the_channel_actor_not_the_body_actor(paused, authority) -> None:
    agent, shown = paused
    claimed = build_decision(shown, decision="approve", actor={"id": "mallory", "type": "human"})
    resume_with_decisions(agent, thread(), claimed, actor=ALICE, authority=authority)
    decided = [e.payload for e in authority.ledger.audit_entries() if e.kind == "decided"]
    assert [d["actor_id"] for d in decided] == ["alice"]


def test_decision_judged_by_an_authority_that_never_saw_the_request_is_refused(
    paused, clock
) -> None:
    agent, shown = paused
    other = ApprovalAuthority(clock=clock)  # its ledger never recorded the request
    with pytest.raises(LookupError):
        answer(agent, thread(), other, (shown, "approve"))

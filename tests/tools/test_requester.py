"""Tool-call approvals carry their run's requester, so access rules apply to them too."""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langgraph.checkpoint.memory import InMemorySaver

from aais_langgraph import ApprovalAuthority, build_decision, resume_with_decisions
from aais_langgraph.authority import AccessPolicy, ForbiddenError, Principal
from aais_langgraph.gate import REQUESTER_KEY
from aais_langgraph.ledger import InMemoryLedger
from aais_langgraph.protocol import Actor
from aais_langgraph.protocol.extensions import REQUESTER_EXTENSION
from aais_langgraph.tools import ApprovalMiddleware, edit_tool_call

from .helpers import Recorder, call, pending, script, turn

CONFIG: Any = {"configurable": {"thread_id": "t-tools", REQUESTER_KEY: "mallory"}}
MALLORY = Principal(Actor(id="mallory", type="human"), frozenset({"ops"}))
OTHER = Principal(Actor(id="olga", type="human"), frozenset({"ops"}))


def paused(authority: ApprovalAuthority, recorder: Recorder) -> Any:
    agent = create_agent(
        script(turn(call("send_email", "c1", to="ann@example.com"))),
        tools=recorder.tools(),
        middleware=[ApprovalMiddleware({"send_email": True}, authority=authority)],
        checkpointer=InMemorySaver(),
    )
    agent.invoke({"messages": [("user", "go")]}, CONFIG)
    return agent


def test_a_gated_tool_call_names_its_requester_and_separation_of_duties_holds() -> None:
    policy = {"default_approvers": ["ops"], "separation_of_duties": {"from_risk": "low"}}
    authority = ApprovalAuthority(InMemoryLedger(), authorizer=AccessPolicy.from_mapping(policy))
    recorder = Recorder()
    agent = paused(authority, recorder)
    [requested] = pending(agent, CONFIG).values()
    assert requested["request"]["extensions"][REQUESTER_EXTENSION] == {"id": "mallory"}

    decided = build_decision(requested, decision="approve", actor=MALLORY.actor)
    with pytest.raises(ForbiddenError, match="separation of duties"):
        resume_with_decisions(agent, CONFIG, [decided], actor=MALLORY, authority=authority)
    assert recorder.count("send_email") == 0

    decided = build_decision(requested, decision="approve", actor=OTHER.actor)
    resume_with_decisions(agent, CONFIG, [decided], actor=OTHER, authority=authority)
    assert recorder.count("send_email") == 1


def test_an_edited_call_keeps_its_requester() -> None:
    authority = ApprovalAuthority(InMemoryLedger())
    agent = paused(authority, Recorder())
    [original] = pending(agent, CONFIG).values()

    successor = edit_tool_call(
        agent,
        CONFIG,
        original["request"]["id"],
        {"to": "bob@example.com"},
        actor=OTHER.actor,
        authority=authority,
        action_digest=original["request"]["action_digest"],
    )

    assert successor.request.extensions[REQUESTER_EXTENSION] == {"id": "mallory"}


def test_a_tool_call_that_needs_two_approvers_runs_once_after_both() -> None:
    from aais_langgraph.protocol.extensions import QUORUM_EXTENSION, TOOL_CALL_ID_EXTENSION

    rule = {"kinds": ["*"], "names": ["send_email"], "groups": ["ops"], "quorum": 2}
    policy = AccessPolicy.from_mapping({"approvers": [rule]})
    authority = ApprovalAuthority(InMemoryLedger(), authorizer=policy)
    recorder = Recorder()
    agent = paused(authority, recorder)
    for index, who in enumerate((OTHER, OTHER, MALLORY)):
        [requested] = pending(agent, CONFIG).values()
        place = requested["request"]["extensions"][QUORUM_EXTENSION]
        assert requested["request"]["extensions"][TOOL_CALL_ID_EXTENSION] == "c1"
        decided = build_decision(requested, decision="approve", actor=who.actor)
        if index == 1:  # olga approved the first one: the second needs someone else
            assert (place["index"], place["approved_by"]) == (2, ["olga"])
            with pytest.raises(ForbiddenError, match="another approver"):
                resume_with_decisions(agent, CONFIG, [decided], actor=who, authority=authority)
            assert recorder.count("send_email") == 0
            continue
        resume_with_decisions(agent, CONFIG, [decided], actor=who, authority=authority)
    assert recorder.count("send_email") == 1
    assert pending(agent, CONFIG) == {}

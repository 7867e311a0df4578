"""``create_deep_agent(interrupt_on=...)`` against ``ApprovalMiddleware`` in the subagents.

``interrupt_on`` makes ``deepagents`` add LangChain's ``HumanInTheLoopMiddleware`` to the
parent, to every declarative subagent and to the general-purpose one: its pauses are
HITL's, not AAIS requests, so nothing is in the ledger or the inbox. ``ApprovalMiddleware``
stands in when it is in each agent's ``middleware``; the general-purpose subagent does not
inherit the parent's ``middleware``, so, built by hand, it needs a spec of its own (the gap
these tests show is what ``approval_deep_agent`` closes, see test_approval_deep_agent.py).
"""

from __future__ import annotations

from pathlib import Path

from deepagents import create_deep_agent
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from aais_langgraph import ApprovalAuthority, InMemoryLedger, pending_approvals
from aais_langgraph.tools import ApprovalMiddleware

from .deep_agent import (
    GATED,
    RECIPIENT,
    EffectLog,
    build_deep_agent,
    delegating_model,
    tools,
)

CONFIG = {"configurable": {"thread_id": "deep-hitl"}}


def test_interrupt_on_pauses_on_hitls_value_which_no_aais_listing_shows(tmp_path: Path) -> None:
    authority = ApprovalAuthority(InMemoryLedger())
    effects = EffectLog(tmp_path / "effects.log")
    agent = build_deep_agent(effects, InMemorySaver(), authority=authority, gate="interrupt_on")
    agent.invoke({"messages": [("user", "Email Bob and research X")]}, CONFIG)

    [interrupt] = agent.get_state(CONFIG).interrupts
    assert [action["name"] for action in interrupt.value["action_requests"]] == [GATED]
    assert pending_approvals(authority, agent).snapshot.pending == []
    assert authority.ledger.list_pending() == []
    # HITL pauses the subagent's whole turn after its model: the sibling call waits too.
    assert effects.counts() == {GATED: 0, "look_up": 0, "take_note": 1, "search": 1}


def test_interrupt_on_beside_the_gate_asks_twice(tmp_path: Path) -> None:
    authority = ApprovalAuthority(InMemoryLedger())
    effects = EffectLog(tmp_path / "effects.log")
    agent = build_deep_agent(effects, InMemorySaver(), authority=authority, gate="both")
    agent.invoke({"messages": [("user", "Email Bob and research X")]}, CONFIG)
    [hitl] = agent.get_state(CONFIG).interrupts
    assert "action_requests" in hitl.value
    agent.invoke(Command(resume={hitl.id: {"decisions": [{"type": "approve"}]}}), CONFIG)

    [aais] = agent.get_state(CONFIG).interrupts
    assert aais.value["type"] == "approval.requested"
    assert effects.count(GATED) == 0  # HITL's approval alone runs nothing


def test_the_general_purpose_subagent_does_not_inherit_the_parents_middleware(
    tmp_path: Path,
) -> None:
    effects = EffectLog(tmp_path / "effects.log")
    gate = ApprovalMiddleware({GATED: True}, authority=ApprovalAuthority(InMemoryLedger()))
    agent = create_deep_agent(
        model=delegating_model(GATED),
        tools=[tools(effects)[GATED]],
        middleware=[gate],
        checkpointer=InMemorySaver(),
    )
    agent.invoke({"messages": [("user", "go")]}, CONFIG)

    assert agent.get_state(CONFIG).interrupts == ()
    assert effects.lines() == [f"{GATED} {RECIPIENT}"]  # ran without asking anyone


def test_a_general_purpose_spec_carrying_the_gate_pauses_it(tmp_path: Path) -> None:
    effects = EffectLog(tmp_path / "effects.log")
    authority = ApprovalAuthority(InMemoryLedger())
    gate = ApprovalMiddleware({GATED: True}, authority=authority)
    send_email = tools(effects)[GATED]
    agent = create_deep_agent(
        model=delegating_model(GATED),
        tools=[send_email],
        middleware=[gate],
        subagents=[
            {
                "name": "general-purpose",
                "description": "General help.",
                "system_prompt": "Help.",
                "tools": [send_email],
                "middleware": [gate],
            }
        ],
        checkpointer=InMemorySaver(),
    )
    agent.invoke({"messages": [("user", "go")]}, CONFIG)

    [listed] = pending_approvals(authority, agent).snapshot.pending
    assert listed.action.name == GATED and effects.lines() == []

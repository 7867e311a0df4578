"""Two invocations of one gated subagent in one turn: two requests, answered one at a time.

The parent sends "Email Bob" and "Email Carol" to ``mailer`` in parallel; each invocation
calls the gated ``send_email`` beside the ungated ``look_up``. Both requests are listed
on the parent thread with two subagent run ids; answering one runs only its call, the
other stays listed and paused; nothing that finished runs again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deepagents import create_deep_agent
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver

from aais_langgraph import (
    ApprovalAuthority,
    InMemoryLedger,
    build_decision,
    pending_approvals,
    resume_with_decisions,
)
from aais_langgraph.protocol.extensions import SUBAGENT_EXTENSION
from aais_langgraph.tools import ApprovalMiddleware

from .deep_agent import GATED, EffectLog, RoutedChatModel, tool_call, tools

ALICE = {"id": "alice", "type": "human"}
CONFIG = {"configurable": {"thread_id": "deep-parallel"}}


def mailer_turns(name: str) -> list[AIMessage]:
    calls = [
        tool_call(GATED, f"call_send_{name}", to=f"{name}@example.com"),
        tool_call("look_up", f"call_look_up_{name}", query=name),
    ]
    return [
        AIMessage(content="", tool_calls=calls, id=f"ai-{name}-0"),
        AIMessage(content=f"emailed {name}", id=f"ai-{name}-1"),
    ]


def paused_twice(effects: EffectLog) -> tuple[Any, ApprovalAuthority]:
    authority = ApprovalAuthority(InMemoryLedger())
    parent = RoutedChatModel(
        responses=[AIMessage(content="unused")],
        scripts={
            "go": [
                AIMessage(
                    content="",
                    tool_calls=[
                        tool_call(
                            "task", "call_1", description="Email bob", subagent_type="mailer"
                        ),
                        tool_call(
                            "task", "call_2", description="Email carol", subagent_type="mailer"
                        ),
                    ],
                    id="ai-parent-0",
                ),
                AIMessage(content="parent: done.", id="ai-parent-1"),
            ]
        },
    )
    mailer = RoutedChatModel(
        responses=[AIMessage(content="unused")],
        scripts={"Email bob": mailer_turns("bob"), "Email carol": mailer_turns("carol")},
    )
    found = tools(effects)
    agent = create_deep_agent(
        model=parent,
        subagents=[
            {
                "name": "mailer",
                "description": "Sends email.",
                "system_prompt": "You send email.",
                "model": mailer,
                "tools": [found[GATED], found["look_up"]],
                "middleware": [ApprovalMiddleware({GATED: True}, authority=authority)],
            }
        ],
        checkpointer=InMemorySaver(),
    )
    agent.invoke({"messages": [("user", "go")]}, CONFIG)
    return agent, authority


def waiting(agent: Any) -> dict[str, dict[str, Any]]:
    """The paused requests, by recipient."""
    values = [dict(i.value) for i in agent.get_state(CONFIG).interrupts]
    return {v["request"]["action"]["arguments"]["to"]: v for v in values}


def test_both_requests_are_listed_with_two_subagent_run_ids(tmp_path: Path) -> None:
    effects = EffectLog(tmp_path / "effects.log")
    agent, authority = paused_twice(effects)
    listed = pending_approvals(authority, agent).snapshot.pending

    assert sorted(r.action.arguments["to"] for r in listed) == [
        "bob@example.com",
        "carol@example.com",
    ]
    run_ids = {(r.extensions or {})[SUBAGENT_EXTENSION]["run_id"] for r in listed}
    assert len(run_ids) == 2
    assert effects.counts()[GATED] == 0 and effects.count("look_up") == 2


def test_answering_one_runs_only_its_call_and_the_other_stays_paused(tmp_path: Path) -> None:
    effects = EffectLog(tmp_path / "effects.log")
    agent, authority = paused_twice(effects)
    bob = waiting(agent)["bob@example.com"]
    decided = build_decision(bob, decision="approve", actor=ALICE)
    resume_with_decisions(agent, CONFIG, [decided], actor=ALICE, authority=authority)

    [still] = pending_approvals(authority, agent).snapshot.pending
    assert still.action.arguments == {"to": "carol@example.com"}
    assert list(waiting(agent)) == ["carol@example.com"]
    assert effects.lines().count(f"{GATED} bob@example.com") == 1
    assert effects.count(GATED) == 1 and effects.count("look_up") == 2

    carol = waiting(agent)["carol@example.com"]
    denied = build_decision(carol, decision="deny", actor=ALICE)
    resume_with_decisions(agent, CONFIG, [denied], actor=ALICE, authority=authority)

    state = agent.get_state(CONFIG)
    assert state.next == () and not state.interrupts
    assert effects.count(GATED) == 1 and effects.count("look_up") == 2

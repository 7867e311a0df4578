"""``approval_deep_agent``: a listed tool asks for AAIS approval wherever the deep agent runs it.

The parent, each declared subagent and the general-purpose subagent (which ``deepagents``
builds with the parent's tools but not its ``middleware``) pause on an AAIS request,
listed on the parent thread; a compiled subagent the helper cannot gate is refused.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph

from aais_langgraph import (
    ApprovalAuthority,
    InMemoryLedger,
    aresume_with_decisions,
    build_decision,
    pending_approvals,
    resume_with_decisions,
)
from aais_langgraph.protocol.extensions import SUBAGENT_EXTENSION
from aais_langgraph.tools import ApprovalMiddleware, approval_deep_agent

from .deep_agent import (
    GATED,
    RECIPIENT,
    SIBLINGS,
    EffectLog,
    ScriptedChatModel,
    build_deep_agent,
    delegating_model,
    tool_call,
    tools,
)

CONFIG = {"configurable": {"thread_id": "deep-helper"}}
ALICE = {"id": "alice", "type": "human"}


class Scene:
    """An ``approval_deep_agent`` gating ``send_email``, with its authority and effects."""

    def __init__(self, folder: Path, model: Any, **options: Any) -> None:
        self.effects = EffectLog(folder / "effects.log")
        self.authority = ApprovalAuthority(InMemoryLedger())
        found = tools(self.effects)
        options.setdefault("tools", [found[GATED]])
        self.agent = approval_deep_agent(
            model,
            interrupt_on={GATED: True},
            authority=self.authority,
            checkpointer=InMemorySaver(),
            **options,
        )

    def answer(self, kind: str) -> None:
        [interrupt] = self.agent.get_state(CONFIG).interrupts
        decided = build_decision(interrupt.value, decision=kind, scope="once", actor=ALICE)
        resume_with_decisions(self.agent, CONFIG, [decided], actor=ALICE, authority=self.authority)

    def finished(self) -> bool:
        state = self.agent.get_state(CONFIG)
        return state.next == () and not state.interrupts


def general_purpose_scene(folder: Path) -> Scene:
    scene = Scene(folder, delegating_model(GATED))
    scene.agent.invoke({"messages": [("user", "go")]}, CONFIG)
    return scene


def test_the_general_purpose_subagents_gated_call_is_listed_on_the_parent_thread(
    tmp_path: Path,
) -> None:
    scene = general_purpose_scene(tmp_path)

    [listed] = pending_approvals(scene.authority, scene.agent).snapshot.pending
    assert listed.action.name == GATED
    assert listed.extensions[SUBAGENT_EXTENSION]["name"] == "general-purpose"
    assert scene.effects.lines() == []


def test_approving_the_general_purpose_subagents_call_runs_it_once(tmp_path: Path) -> None:
    scene = general_purpose_scene(tmp_path)
    scene.answer("approve")

    assert scene.effects.lines() == [f"{GATED} {RECIPIENT}"]
    assert scene.finished()


def test_denying_the_general_purpose_subagents_call_never_runs_it(tmp_path: Path) -> None:
    scene = general_purpose_scene(tmp_path)
    scene.answer("deny")

    assert scene.effects.lines() == []
    assert scene.finished()
    assert pending_approvals(scene.authority, scene.agent).snapshot.pending == []


async def test_an_async_run_pauses_the_general_purpose_subagent_too(tmp_path: Path) -> None:
    scene = Scene(tmp_path, delegating_model(GATED))
    await scene.agent.ainvoke({"messages": [("user", "go")]}, CONFIG)
    [interrupt] = (await scene.agent.aget_state(CONFIG)).interrupts
    assert scene.effects.lines() == []

    decided = build_decision(interrupt.value, decision="approve", scope="once", actor=ALICE)
    await aresume_with_decisions(
        scene.agent, CONFIG, [decided], actor=ALICE, authority=scene.authority
    )
    assert scene.effects.lines() == [f"{GATED} {RECIPIENT}"]


def test_the_parents_own_call_of_a_listed_tool_pauses(tmp_path: Path) -> None:
    parent = ScriptedChatModel(
        responses=[
            AIMessage(content="", tool_calls=[tool_call(GATED, "call_own", to=RECIPIENT)]),
            AIMessage(content="done"),
        ]
    )
    scene = Scene(tmp_path, parent)
    scene.agent.invoke({"messages": [("user", "go")]}, CONFIG)

    [listed] = pending_approvals(scene.authority, scene.agent).snapshot.pending
    assert listed.action.name == GATED and SUBAGENT_EXTENSION not in listed.extensions
    assert scene.effects.lines() == []


def test_a_declared_subagent_without_middleware_pauses_and_its_siblings_run_once(
    tmp_path: Path,
) -> None:
    effects = EffectLog(tmp_path / "effects.log")
    authority = ApprovalAuthority(InMemoryLedger())
    agent = build_deep_agent(effects, InMemorySaver(), authority=authority, gate="helper")
    agent.invoke({"messages": [("user", "Email Bob and research X")]}, CONFIG)

    [listed] = pending_approvals(authority, agent).snapshot.pending
    assert listed.extensions[SUBAGENT_EXTENSION]["name"] == "mailer"
    assert effects.counts() == {GATED: 0, **{name: 1 for name in SIBLINGS}}
    [interrupt] = agent.get_state(CONFIG).interrupts
    decided = build_decision(interrupt.value, decision="approve", scope="once", actor=ALICE)
    resume_with_decisions(agent, CONFIG, [decided], actor=ALICE, authority=authority)
    assert effects.counts() == {GATED: 1, **{name: 1 for name in SIBLINGS}}


def test_a_built_in_file_tool_listed_asks_in_the_general_purpose_subagent(
    tmp_path: Path,
) -> None:
    model = delegating_model("write_file", file_path="/notes.txt", content="hello")
    authority = ApprovalAuthority(InMemoryLedger())
    agent = approval_deep_agent(
        model, interrupt_on={"write_file": True}, authority=authority, checkpointer=InMemorySaver()
    )
    agent.invoke({"messages": [("user", "go")]}, CONFIG)

    [listed] = pending_approvals(authority, agent).snapshot.pending
    assert listed.action.name == "write_file"
    assert listed.extensions[SUBAGENT_EXTENSION]["name"] == "general-purpose"
    [interrupt] = agent.get_state(CONFIG).interrupts
    decided = build_decision(interrupt.value, decision="approve", scope="once", actor=ALICE)
    resume_with_decisions(agent, CONFIG, [decided], actor=ALICE, authority=authority)
    assert "/notes.txt" in agent.get_state(CONFIG).values["files"]


def test_a_specs_own_interrupt_on_replaces_the_top_level_one(tmp_path: Path) -> None:
    effects = EffectLog(tmp_path / "effects.log")
    found = tools(effects)
    scene = Scene(
        tmp_path,
        delegating_model("look_up", subagent="helper"),
        tools=[],
        subagents=[
            {
                "name": "helper",
                "description": "Looks up.",
                "system_prompt": "You look up.",
                "tools": [found["look_up"]],
                "interrupt_on": {"look_up": True},
            }
        ],
    )
    scene.agent.invoke({"messages": [("user", "go")]}, CONFIG)

    [listed] = pending_approvals(scene.authority, scene.agent).snapshot.pending
    assert listed.action.name == "look_up"
    # The one pause is the AAIS gate's, not the HITL middleware deepagents builds.
    [interrupt] = scene.agent.get_state(CONFIG).interrupts
    assert interrupt.value["type"] == "approval.requested"


def test_a_specs_interrupt_on_of_none_keeps_the_top_level_one(tmp_path: Path) -> None:
    effects = EffectLog(tmp_path / "effects.log")
    scene = Scene(
        tmp_path,
        delegating_model(GATED, subagent="mailer"),
        subagents=[
            {
                "name": "mailer",
                "description": "Sends email.",
                "system_prompt": "You send email.",
                "tools": [tools(effects)[GATED]],
                "interrupt_on": None,
            }
        ],
    )
    scene.agent.invoke({"messages": [("user", "go")]}, CONFIG)

    [listed] = pending_approvals(scene.authority, scene.agent).snapshot.pending
    assert listed.extensions[SUBAGENT_EXTENSION]["name"] == "mailer"
    assert effects.lines() == []


def test_the_general_purpose_subagent_keeps_deepagents_description(tmp_path: Path) -> None:
    from deepagents.middleware.subagents import DEFAULT_GENERAL_PURPOSE_DESCRIPTION

    scene = Scene(tmp_path, delegating_model(GATED))
    task = scene.agent.nodes["tools"].bound.tools_by_name["task"]
    assert f"- general-purpose: {DEFAULT_GENERAL_PURPOSE_DESCRIPTION}" in task.description


class Witness(AgentMiddleware):
    """Notes the tool calls it wraps; named ``slot`` (a deepagents default's name, or not)."""

    def __init__(self, slot: str) -> None:
        super().__init__()
        self.slot = slot
        self.seen: list[str] = []

    @property
    def name(self) -> str:
        return self.slot

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        self.seen.append(request.tool_call["name"])
        return handler(request)


def test_the_general_purpose_subagent_inherits_only_middleware_in_a_default_place(
    tmp_path: Path,
) -> None:
    in_default_place, parents_own = Witness("PatchToolCallsMiddleware"), Witness("Mine")
    scene = Scene(tmp_path, delegating_model(GATED), middleware=[in_default_place, parents_own])
    scene.agent.invoke({"messages": [("user", "go")]}, CONFIG)

    assert in_default_place.seen == ["task", GATED]  # the parent's, then the subagent's
    assert parents_own.seen == ["task"]


def compiled_mailer(effects: EffectLog) -> Any:
    return create_agent(
        ScriptedChatModel(responses=[AIMessage(content="done")]), tools=[tools(effects)[GATED]]
    )


def test_a_compiled_subagent_holding_a_listed_tool_is_refused(tmp_path: Path) -> None:
    effects = EffectLog(tmp_path / "effects.log")
    spec = {"name": "own", "description": "Mine.", "runnable": compiled_mailer(effects)}

    with pytest.raises(ValueError, match=r"subagents\[0\].*'own'.*'send_email'.*gated_inside"):
        Scene(tmp_path, delegating_model(GATED), subagents=[spec])


def test_a_compiled_subagent_named_gated_inside_is_accepted(tmp_path: Path) -> None:
    effects = EffectLog(tmp_path / "effects.log")
    spec = {"name": "own", "description": "Mine.", "runnable": compiled_mailer(effects)}

    scene = Scene(tmp_path, delegating_model(GATED), subagents=[spec], gated_inside={"own"})
    assert "- own: Mine." in scene.agent.nodes["tools"].bound.tools_by_name["task"].description


def test_a_compiled_subagent_holding_a_listed_tool_in_a_subgraph_is_refused(
    tmp_path: Path,
) -> None:
    effects = EffectLog(tmp_path / "effects.log")
    outer = StateGraph(MessagesState)
    outer.add_node("inner", compiled_mailer(effects))
    outer.add_edge(START, "inner")
    spec = {"name": "nested", "description": "Mine.", "runnable": outer.compile()}

    with pytest.raises(ValueError, match=r"'nested'.*'send_email'"):
        Scene(tmp_path, delegating_model(GATED), subagents=[spec])


def test_an_async_subagent_named_general_purpose_leaves_the_local_one_gated(
    tmp_path: Path,
) -> None:
    remote = {"name": "general-purpose", "description": "Elsewhere.", "graph_id": "remote"}
    scene = Scene(tmp_path, delegating_model(GATED), subagents=[remote])
    scene.agent.invoke({"messages": [("user", "go")]}, CONFIG)

    [listed] = pending_approvals(scene.authority, scene.agent).snapshot.pending
    assert listed.extensions[SUBAGENT_EXTENSION]["name"] == "general-purpose"
    assert scene.effects.lines() == []


def test_an_approval_middleware_already_in_the_parents_middleware_is_refused(
    tmp_path: Path,
) -> None:
    second = ApprovalMiddleware({GATED: True}, authority=ApprovalAuthority(InMemoryLedger()))

    with pytest.raises(ValueError, match=r"^middleware: already holds an ApprovalMiddleware"):
        Scene(tmp_path, delegating_model(GATED), middleware=[second])


def test_importing_the_tools_package_does_not_import_deepagents() -> None:
    probe = "import sys, aais_langgraph.tools; print('deepagents' in sys.modules)"
    ran = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert ran.stdout.strip() == "False"

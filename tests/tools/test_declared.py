"""Tools that declare their action kind and resource (ToolAction), and the MCP marking helper."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver

from aais_langgraph import ApprovalAuthority, InMemoryLedger
from aais_langgraph.protocol import AAISValidationError
from aais_langgraph.tools import (
    TOOL_ACTION_METADATA,
    ApprovalMiddleware,
    ToolAction,
    edit_tool_call,
)
from aais_langgraph.tools.mcp import mark_mcp_tools, mcp_resource

from .helpers import ALICE, answer, call, pending, script, thread, tool_messages, turn


def recording_tool(runs: list[str], metadata: dict[str, object] | None = None) -> BaseTool:
    @tool
    def deploy(target: str) -> str:
        """Deploy to a target."""
        runs.append(target)
        return "deployed"

    return deploy.model_copy(update={"metadata": metadata})


def agent_for(deploy: BaseTool, authority: ApprovalAuthority) -> object:
    return create_agent(
        script(turn(call("deploy", "c1", target="prod"))),
        tools=[deploy],
        middleware=[ApprovalMiddleware({"deploy": True}, authority=authority)],
        checkpointer=InMemorySaver(),
    )


def test_declared_kind_and_resource_are_in_the_request_and_summary() -> None:
    runs: list[str] = []
    declared = ToolAction(kind="deploy.release", resource="https://ci.example.com/app")
    authority = ApprovalAuthority(InMemoryLedger())
    agent = agent_for(recording_tool(runs, declared.with_metadata(None)), authority)
    agent.invoke({"messages": [("user", "go")]}, thread())  # type: ignore[attr-defined]
    action = pending(agent, thread())["c1"]["request"]["action"]
    assert action["kind"] == "deploy.release"
    assert action["resource"] == "https://ci.example.com/app"
    assert action["summary"] == ("deploy (target) on https://ci.example.com/app")
    [resolved] = answer(agent, thread(), authority, (pending(agent, thread())["c1"], "approve"))
    assert resolved.approved and runs == ["prod"]


def test_an_edited_call_keeps_the_declared_kind_and_resource() -> None:
    runs: list[str] = []
    declared = ToolAction(kind="deploy.release", resource="https://ci.example.com/app")
    authority = ApprovalAuthority(InMemoryLedger())
    agent = agent_for(recording_tool(runs, declared.with_metadata(None)), authority)
    agent.invoke({"messages": [("user", "go")]}, thread())  # type: ignore[attr-defined]
    original = pending(agent, thread())["c1"]["request"]
    edit_tool_call(
        agent,
        thread(),
        original["id"],
        {"target": "staging"},
        actor=ALICE,
        authority=authority,
        action_digest=original["action_digest"],
        approve=False,
    )
    waiting = pending(agent, thread())["c1"]
    action = waiting["request"]["action"]
    assert (action["kind"], action["resource"]) == ("deploy.release", "https://ci.example.com/app")
    assert action["summary"].startswith("deploy (target) on https://ci.example.com/app")
    [resolved] = answer(agent, thread(), authority, (waiting, "approve"))
    assert resolved.approved and runs == ["staging"]


def test_plain_data_under_the_metadata_key_is_refused_and_nothing_runs() -> None:
    runs: list[str] = []
    claim = {TOOL_ACTION_METADATA: {"kind": "tool.call", "resource": "mcp://trusted/read"}}
    agent = agent_for(recording_tool(runs, claim), ApprovalAuthority(InMemoryLedger()))
    result = agent.invoke({"messages": [("user", "go")]}, thread())  # type: ignore[attr-defined]
    assert "__interrupt__" not in result and runs == []
    message = tool_messages(agent, thread())["c1"]
    assert message.status == "error" and "cannot be sent for approval" in message.content
    assert "mcp://trusted" not in message.content


def test_a_tool_action_that_is_not_valid_aais_fails_when_declared() -> None:
    with pytest.raises(AAISValidationError, match="/kind"):
        ToolAction(kind="")
    with pytest.raises(AAISValidationError, match="/effects"):
        ToolAction(effects=[""])


def test_mcp_resource_escapes_names_so_no_server_can_pose_as_another() -> None:
    assert mcp_resource("notes", "write_note") == "mcp://notes/write_note"
    assert mcp_resource("notes/write_note", "x") == "mcp://notes%2Fwrite_note/x"
    assert mcp_resource("a b", "é") == "mcp://a%20b/%C3%A9"


@given(st.tuples(st.text(), st.text()), st.tuples(st.text(), st.text()))
def test_mcp_resource_is_one_to_one_and_plain_ascii(first, second) -> None:
    resource = mcp_resource(*first)
    assert re.fullmatch(r"mcp://[A-Za-z0-9%._~-]*/[A-Za-z0-9%._~-]*", resource)
    assert (resource == mcp_resource(*second)) == (first == second)


def test_mark_mcp_tools_copies_tools_and_strips_the_server_prefix() -> None:
    original = recording_tool([], {"readOnlyHint": False}).model_copy(
        update={"name": "notes_deploy"}
    )
    [marked] = mark_mcp_tools([original], server_name="notes", tool_name_prefix=True)
    assert marked.metadata is not None and marked.metadata["readOnlyHint"] is False
    declared = marked.metadata[TOOL_ACTION_METADATA]
    assert declared == ToolAction(kind="mcp.tool.call", resource="mcp://notes/deploy")
    assert original.metadata == {"readOnlyHint": False}  # the caller's tool is untouched
    with pytest.raises(ValueError, match="prefix"):
        mark_mcp_tools([original], server_name="other", tool_name_prefix=True)

"""MCP tools behind ApprovalMiddleware: a real stdio MCP server, the adapter, ``create_agent``.

The server (``examples/mcp/notes_server.py``) runs as a subprocess that the
adapter starts for each tool call; it logs every call it executes, so "never
reached the server" is read from the server's own log. The model is a scripted
fake from langchain-core.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from langchain_core.messages import ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from mcp_agent import (
    ALICE,
    POSING_SERVER,
    WRITE,
    call,
    mcp_client,
    notes_agent,
    script,
    server_calls,
    session_tools,
    writes,
)

from aais_langgraph import (
    ApprovalAuthority,
    InMemoryLedger,
    SqliteLedger,
    aresume_with_decisions,
    build_decision,
)
from aais_langgraph.gate.langchain_ui import approval_envelope
from aais_langgraph.tools.mcp import MCP_ACTION_KIND, get_mcp_tools

pytestmark = pytest.mark.timeout(120)

SCHEMA = Path(__file__).resolve().parents[1] / "conformance" / "aais-1.0.schema.json"
CONFIG: Any = {"configurable": {"thread_id": "mcp-1"}}


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    return tmp_path / "notes"


@pytest.fixture
def authority() -> ApprovalAuthority:
    return ApprovalAuthority(InMemoryLedger())


async def paused(agent: Any) -> dict[str, Any]:
    """Run until the gated call waits; its approval.requested envelope."""
    result = await agent.ainvoke({"messages": [("user", "add a todo")]}, CONFIG)
    [waiting] = result["__interrupt__"]
    return dict(waiting.value)


async def answer(agent: Any, authority: ApprovalAuthority, decisions: list[Any]) -> list[Any]:
    return await aresume_with_decisions(agent, CONFIG, decisions, actor=ALICE, authority=authority)


async def tool_answers(agent: Any) -> dict[str, ToolMessage]:
    messages = (await agent.aget_state(CONFIG)).values["messages"]
    return {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}


def text_of(message: ToolMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(block["text"] for block in content if isinstance(block, dict))


async def test_card_names_the_mcp_server_and_tool(notes, authority) -> None:
    agent = notes_agent(await get_mcp_tools(mcp_client(notes)), authority, InMemorySaver())
    requested = await paused(agent)

    action = requested["request"]["action"]
    assert action["kind"] == MCP_ACTION_KIND == "mcp.tool.call"
    assert action["name"] == "write_note"
    assert action["resource"] == "mcp://notes/write_note"
    assert "mcp://notes/write_note" in action["summary"]
    assert WRITE["text"] not in action["summary"]
    assert action["arguments"] == WRITE
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    # The value carries LangChain's UI keys beside the envelope; the envelope validates.
    jsonschema.Draft202012Validator(schema).validate(approval_envelope(requested))
    # The ungated read ran; the gated write has not reached the server.
    assert server_calls(notes) == [{"tool": "read_note", "arguments": {"name": "todo.md"}}]


@pytest.mark.parametrize("sessions", ["per call", "one session"])
async def test_approval_runs_the_mcp_tool_once_with_exactly_the_approved_arguments(
    notes, authority, sessions
) -> None:
    client = mcp_client(notes)
    if sessions == "per call":
        tools = await get_mcp_tools(client)
        agent = notes_agent(tools, authority, InMemorySaver())
        requested = await paused(agent)
        approve = build_decision(requested, decision="approve", actor=ALICE)
        [resolved] = await answer(agent, authority, [approve])
    else:
        async with session_tools(notes) as tools:
            agent = notes_agent(tools, authority, InMemorySaver())
            requested = await paused(agent)
            approve = build_decision(requested, decision="approve", actor=ALICE)
            [resolved] = await answer(agent, authority, [approve])

    assert resolved.resolution.outcome == "approved"
    assert writes(notes) == [WRITE]
    assert (notes / "todo.md").read_text(encoding="utf-8") == WRITE["text"]
    assert "wrote todo.md" in text_of((await tool_answers(agent))["c_write"])
    # A replayed approval returns the recorded resolution and runs nothing more.
    [replayed] = await answer(agent, authority, [approve])
    assert replayed.resolution.outcome == "approved"
    assert writes(notes) == [WRITE]


async def test_denial_never_reaches_the_mcp_server(notes, authority) -> None:
    async with session_tools(notes) as tools:
        agent = notes_agent(tools, authority, InMemorySaver())
        requested = await paused(agent)
        deny = build_decision(requested, decision="deny", actor=ALICE)
        [resolved] = await answer(agent, authority, [deny])

    assert resolved.resolution.outcome == "denied"
    assert writes(notes) == [] and not (notes / "todo.md").exists()
    refusal = (await tool_answers(agent))["c_write"]
    assert refusal.status == "error" and "rejected" in text_of(refusal)
    assert refusal.artifact["aais"]["resolution"]["outcome"] == "denied"


async def test_forged_digest_never_reaches_the_mcp_server_and_the_approval_stays(
    notes, authority
) -> None:
    async with session_tools(notes) as tools:
        agent = notes_agent(tools, authority, InMemorySaver())
        requested = await paused(agent)
        forged = build_decision(requested, decision="approve", actor=ALICE).to_json()
        forged["decision"]["action_digest"] = "sha256:" + "0" * 64

        [refused] = await answer(agent, authority, [forged])
        assert refused.resolution.outcome == "stale"
        assert writes(notes) == []
        [still] = (await agent.aget_state(CONFIG)).interrupts
        assert still.value["request"]["id"] == requested["request"]["id"]

        # The correct answer still works, once.
        approve = build_decision(requested, decision="approve", actor=ALICE)
        [approved] = await answer(agent, authority, [approve])
    assert approved.resolution.outcome == "approved"
    assert writes(notes) == [WRITE]


async def test_approval_for_one_server_never_runs_a_same_named_tool_of_another(
    tmp_path, authority
) -> None:
    """The approved action names its server; the tool about to run must still be from it."""
    saver = InMemorySaver()
    async with session_tools(tmp_path / "notes") as tools:
        requested = await paused(notes_agent(tools, authority, saver))

    # Same checkpoint, but write_note is now bound from a server named "other".
    async with session_tools(tmp_path / "other", name="other") as other_tools:
        rebound = notes_agent(other_tools, authority, saver)
        approve = build_decision(requested, decision="approve", actor=ALICE)
        [resolved] = await answer(rebound, authority, [approve])

    assert resolved.resolution.outcome == "approved"  # recorded; the gate refuses to run it
    assert writes(tmp_path / "notes") == [] and writes(tmp_path / "other") == []
    refusal = (await tool_answers(rebound))["c_write"]
    assert refusal.status == "error" and "changed after it was shown" in text_of(refusal)


async def test_session_grant_scoped_to_one_server_covers_its_next_call(notes, authority) -> None:
    second = {"name": "later.md", "text": "again\n"}
    model = script([call("write_note", "c1", **WRITE)], [call("write_note", "c2", **second)])
    scope = {"resource_prefix": "mcp://notes/", "action_name": "write_note"}
    async with session_tools(notes) as tools:
        agent = notes_agent(
            tools,
            authority,
            InMemorySaver(),
            model=model,
            interrupt_on={"write_note": {"session_scope": scope}},
        )
        requested = await paused(agent)
        for_session = build_decision(requested, decision="approve", scope="session", actor=ALICE)
        [resolved] = await answer(agent, authority, [for_session])

    assert resolved.resolution.outcome == "approved"
    assert writes(notes) == [WRITE, second]  # the second call ran under the grant
    assert (await agent.aget_state(CONFIG)).interrupts == ()


async def test_server_annotations_cannot_speak_for_the_approval_card(tmp_path, authority) -> None:
    """A server's annotations reach tool metadata as data; only a ToolAction object counts."""
    folder = tmp_path / "posing"
    client = mcp_client(folder, name="posing", server=POSING_SERVER)
    model = script([call("write_note", "c_write", **WRITE)])

    # Loaded without the helper: the gate refuses the claim and asks nobody.
    [raw] = await client.get_tools()
    assert isinstance(raw.metadata, dict) and "aais-langgraph.org/action" in raw.metadata
    agent = notes_agent([raw], authority, InMemorySaver(), model=model)
    result = await agent.ainvoke({"messages": [("user", "go")]}, CONFIG)
    assert "__interrupt__" not in result
    refusal = (await tool_answers(agent))["c_write"]
    assert refusal.status == "error" and "cannot be sent for approval" in text_of(refusal)
    assert server_calls(folder) == []

    # Loaded with the helper: the card names the real server, whatever it claims.
    agent = notes_agent(await get_mcp_tools(client), authority, InMemorySaver(), model=model)
    requested = await paused(agent)
    assert requested["request"]["action"]["resource"] == "mcp://posing/write_note"
    assert server_calls(folder) == []


def test_pending_mcp_approval_survives_a_restart_and_resumes(tmp_path) -> None:
    """SQLite checkpointer + SQLite ledger; the asking process dies by SIGKILL."""
    worker = Path(__file__).resolve().with_name("mcp_restart_worker.py")

    def phase(name: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(worker), name, str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=90,
            env=os.environ.copy(),
            check=False,
        )

    asked = phase("ask")
    assert asked.returncode == -9, asked.stderr
    requested = json.loads(asked.stdout)["requested"]
    assert requested["request"]["action"]["resource"] == "mcp://notes/write_note"
    assert writes(tmp_path / "notes") == []

    # Between the processes, the ledger lists the approval as pending.
    with SqliteLedger.from_path(tmp_path / "ledger.db") as ledger:
        [stored] = ledger.list_pending()
        assert stored.request_id == requested["request"]["id"]

    resumed = phase("approve")
    assert resumed.returncode == 0, resumed.stderr
    result = json.loads(resumed.stdout)
    assert result["outcome"] == "approved"
    assert writes(tmp_path / "notes") == [WRITE]
    assert (tmp_path / "notes" / "todo.md").read_text(encoding="utf-8") == WRITE["text"]
    assert "wrote todo.md" in json.dumps(result["answers"]["c_write"])


def test_example_runs_end_to_end(tmp_path) -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "mcp" / "agent.py"
    run = subprocess.run(
        [sys.executable, str(example), "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert "waiting: mcp.tool.call · write_note · mcp://notes/write_note" in run.stdout
    assert "resolution: approved" in run.stdout
    assert writes(tmp_path / "notes") == [WRITE]

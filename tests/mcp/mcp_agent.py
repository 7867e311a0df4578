"""What the MCP tests and their restart worker share: the real servers, a scripted model, the agent.

The server is the example's ``notes_server.py``, started by ``langchain-mcp-adapters``
over stdio as a subprocess; its call log (``calls.jsonl`` in the notes folder) is
written by the server itself, so it shows exactly which calls reached it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.tools import load_mcp_tools

from aais_langgraph import ApprovalAuthority
from aais_langgraph.tools import ApprovalMiddleware, InterruptOn
from aais_langgraph.tools.mcp import mark_mcp_tools

NOTES_SERVER = Path(__file__).resolve().parents[2] / "examples" / "mcp" / "notes_server.py"
POSING_SERVER = Path(__file__).resolve().with_name("posing_server.py")
ALICE = {"id": "alice", "type": "human"}
WRITE = {"name": "todo.md", "text": "- water the plants\n"}


def mcp_client(
    folder: Path, *, name: str = "notes", server: Path = NOTES_SERVER
) -> MultiServerMCPClient:
    """A client whose one server runs as ``python SERVER FOLDER`` over stdio."""
    command = {"command": sys.executable, "args": [str(server), str(folder)]}
    return MultiServerMCPClient({name: {"transport": "stdio", **command}})


@asynccontextmanager
async def session_tools(folder: Path, *, name: str = "notes") -> AsyncIterator[list[BaseTool]]:
    """The server's tools over one MCP session: one server process for the whole block."""
    async with mcp_client(folder, name=name).session(name) as session:
        yield mark_mcp_tools(await load_mcp_tools(session, server_name=name), server_name=name)


def server_calls(folder: Path) -> list[dict[str, Any]]:
    """The server's own log of the calls it executed, in order."""
    log = folder / "calls.jsonl"
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


def writes(folder: Path) -> list[dict[str, Any]]:
    return [entry["arguments"] for entry in server_calls(folder) if entry["tool"] == "write_note"]


class ScriptedModel(FakeMessagesListChatModel):
    """Turn *n* of a conversation answers ``responses[n]``, however often it is re-run."""

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        turn = sum(isinstance(m, AIMessage) for m in messages)
        reply = self.responses[min(turn, len(self.responses) - 1)]
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self


def call(tool: str, call_id: str, **args: Any) -> dict[str, Any]:
    return {"name": tool, "args": args, "id": call_id, "type": "tool_call"}


def script(*turns: list[dict[str, Any]]) -> ScriptedModel:
    """A model proposing each turn's tool calls in order, then a final answer."""
    replies = [AIMessage("", tool_calls=calls, id=f"ai-{i}") for i, calls in enumerate(turns)]
    replies.append(AIMessage(content="Finished.", id=f"ai-{len(turns)}"))
    return ScriptedModel(responses=replies)


def read_then_write() -> ScriptedModel:
    """One turn: read the note (ungated) and write it (gated)."""
    read = call("read_note", "c_read", name="todo.md")
    return script([read, call("write_note", "c_write", **WRITE)])


def notes_agent(
    tools: list[BaseTool],
    authority: ApprovalAuthority,
    checkpointer: Any,
    *,
    model: ScriptedModel | None = None,
    interrupt_on: InterruptOn | None = None,
) -> Any:
    """``create_agent`` with the MCP tools, ``write_note`` gated by ``ApprovalMiddleware``."""
    gated = interrupt_on if interrupt_on is not None else {"write_note": True}
    return create_agent(
        model or read_then_write(),
        tools=tools,
        middleware=[ApprovalMiddleware(gated, authority=authority)],
        checkpointer=checkpointer,
    )

"""A ``create_agent`` agent for LangGraph Server whose risky tool waits for a human.

The async path: LangGraph Server runs the agent on its event loop, the tool is a
coroutine, and ``ApprovalMiddleware`` gates it with its async hook, doing its
ledger work in worker threads, so the server needs no ``--allow-blocking``. The
authority comes from ``AAIS_LEDGER_URL`` (``aais_langgraph.server_env``), as for
``approval_graph.py``; the checkpointer from the server.

The model is a stand-in that asks to run the user's message as a command, so the
example runs offline; put your own chat model in its place
(``langchain.chat_models.init_chat_model("provider:model")``). The tool appends one
line to the file named by ``AAIS_EXAMPLE_EFFECTS`` (default ``effects.log``), keyed by
its approval, so a test can count how often it really ran.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

from aais_langgraph.gate import approval_key
from aais_langgraph.tools import ApprovalMiddleware


class CommandModel(BaseChatModel):
    """Stands in for a chat model: asks to run the user's last message, then reports."""

    @property
    def _llm_type(self) -> str:
        return "example-command-model"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            reply = AIMessage(content=f"Done: {last.content}")
        else:
            call = {"name": "run_command", "args": {"command": str(last.content)}}
            reply = AIMessage(content="", tool_calls=[{**call, "id": f"call-{len(messages)}"}])
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> CommandModel:
        return self


def _record(line: str) -> None:
    path = os.environ.get("AAIS_EXAMPLE_EFFECTS", "effects.log")
    with open(path, "a", encoding="utf-8") as effects:
        effects.write(line + "\n")


@tool
async def run_command(command: str) -> str:
    """Run a shell command (stands in: appends one line to a file)."""
    # The approved request's id: the same on every re-run of this call, an idempotency key.
    await asyncio.to_thread(_record, f"{approval_key()} {command}")  # file I/O off the loop
    return f"ran `{command}`"


graph = create_agent(
    CommandModel(),
    tools=[run_command],
    middleware=[ApprovalMiddleware({"run_command": True})],
)

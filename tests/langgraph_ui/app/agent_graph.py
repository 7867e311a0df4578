"""An agent moved from ``HumanInTheLoopMiddleware`` to ``ApprovalMiddleware``, for LangGraph Server.

Only the middleware changed: the same ``interrupt_on``, no authority passed (the gate
finds it through ``AAIS_LEDGER_URL``, see ``aais_langgraph.server_env``). The chat model
is a fake: turn one asks to email the address the human typed, and after the tool's
result it says it is done. The tool appends one line to ``AAIS_EXAMPLE_EFFECTS`` per run,
so the test counts how often it really ran.
"""

from __future__ import annotations

import os
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

from aais_langgraph.tools import ApprovalMiddleware


class EmailingModel(FakeMessagesListChatModel):
    """Asks to email the address in the human's last message; after a tool result, done."""

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        if isinstance(messages[-1], ToolMessage):
            reply = AIMessage(content="Done.")
        else:
            human = [m for m in messages if isinstance(m, HumanMessage)]
            turn = sum(isinstance(m, AIMessage) for m in messages)
            reply = AIMessage(
                content="",
                tool_calls=[
                    {
                        "name": "send_email",
                        "args": {"to": str(human[-1].content)},
                        "id": f"call_{turn}",
                        "type": "tool_call",
                    }
                ],
            )
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def bind_tools(self, tools: Any, **kwargs: Any) -> EmailingModel:
        return self


@tool
def send_email(to: str) -> str:
    """Send an email."""
    with open(os.environ.get("AAIS_EXAMPLE_EFFECTS", "effects.log"), "a", encoding="utf-8") as log:
        log.write(f"send_email {to}\n")
    return f"sent to {to}"


graph = create_agent(
    EmailingModel(responses=[AIMessage(content="")]),
    tools=[send_email],
    middleware=[
        ApprovalMiddleware(
            {
                "send_email": {
                    "allowed_decisions": ["approve", "edit", "reject", "respond"],
                    "reviewer_note": True,
                }
            }
        )
    ],
)

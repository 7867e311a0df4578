"""An agent whose one gated tool call shows a reviewer's note to the model (browser test).

Served by ``aais-agui serve note_graph:agent --local-dev-login``: the model asks to
delete ``report.txt``; ``delete_file`` is configured with ``reviewer_note: True``, so
a denial's note reaches the model in the denial ``ToolMessage``.
"""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

from aais_langgraph.tools import ApprovalMiddleware


class TurnModel(FakeMessagesListChatModel):
    """Answers turn *n* (the number of AI messages so far) with ``responses[n]``."""

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        turn = sum(isinstance(m, AIMessage) for m in messages)
        message = self.responses[min(turn, len(self.responses) - 1)]
        return ChatResult(generations=[ChatGeneration(message=message)])

    def bind_tools(self, tools: Any, **kwargs: Any) -> TurnModel:
        return self


@tool
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


def agent(checkpointer: Any) -> Any:
    model = TurnModel(
        responses=[
            AIMessage(
                "",
                id="ai-0",
                tool_calls=[{"name": "delete_file", "args": {"path": "report.txt"}, "id": "c1"}],
            ),
            AIMessage("The report stays.", id="ai-1"),
        ]
    )
    return create_agent(
        model,
        tools=[delete_file],
        middleware=[
            ApprovalMiddleware(
                {"delete_file": {"allowed_decisions": ["approve", "reject"], "reviewer_note": True}}
            )
        ],
        checkpointer=checkpointer,
    )

"""A graph whose model calls a page tool the client declares, gated by ``PageToolGate``.

The model is a deterministic fake: asked to paint the page, it calls the page tool
``change_background`` with the colour named last in the user's words (when the
client declared that tool); after the tool's result it reports it; after a refusal
it says the background stays as it is. ``show_toast`` is a page tool that is not
gated (its calls reach the client at once).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Annotated, Any

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from aais_langgraph.tools import PageToolGate

PAGE_TOOL = "change_background"
UNGATED_TOOL = "show_toast"
PAGE_ORIGIN = "http://page.test"

_COLOUR = re.compile(r"\b(red|green|blue|yellow|purple|black|white)\b", re.IGNORECASE)


class PageState(TypedDict, total=False):
    """Messages, and the tools the client declared (ag-ui-langgraph writes them)."""

    messages: Annotated[list[AnyMessage], add_messages]
    tools: list[Any]


class PageModel(FakeMessagesListChatModel):
    """Calls the declared page tool when asked to paint; reports results and refusals."""

    responses: list[BaseMessage] = []

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages, **kwargs))])

    def _stream(
        self, messages: list[BaseMessage], *args: Any, **kwargs: Any
    ) -> Iterator[ChatGenerationChunk]:
        """Stream the reply as a model does: text, or one tool call chunk (ag-ui-langgraph
        turns these into ``TEXT_MESSAGE_*`` / ``TOOL_CALL_*`` events)."""
        reply = self._reply(messages, **kwargs)
        chunks = [
            {"name": call["name"], "args": json.dumps(call["args"]), "id": call["id"], "index": 0}
            for call in reply.tool_calls
        ]
        chunk = AIMessageChunk(content=reply.content, id=reply.id, tool_call_chunks=chunks)
        yield ChatGenerationChunk(message=chunk)

    def _reply(self, messages: list[BaseMessage], **kwargs: Any) -> AIMessage:
        last = messages[-1]
        turn = sum(isinstance(message, AIMessage) for message in messages)
        if isinstance(last, ToolMessage):
            if last.status == "error":
                text = "I did not change the background: the call was not approved to run."
            else:
                text = f"Done: {last.content}"
            reply = AIMessage(content=text, id=f"ai-{turn}")
        else:
            words = str(last.content) if isinstance(last, HumanMessage) else ""
            colours = _COLOUR.findall(words)
            declared = {tool.get("name") for tool in kwargs.get("tools") or []}
            if "toast" in words.lower():
                call = {"name": UNGATED_TOOL, "args": {"text": "hello"}, "id": f"call-{turn}"}
                reply = AIMessage(content="", tool_calls=[call], id=f"ai-{turn}")
            elif colours and PAGE_TOOL in declared:
                args = {"color": colours[-1].lower()}
                call = {"name": PAGE_TOOL, "args": args, "id": f"call-{turn}"}
                reply = AIMessage(content="", tool_calls=[call], id=f"ai-{turn}")
            else:
                reply = AIMessage(content="Tell me a colour to paint the page.", id=f"ai-{turn}")
        return reply


def page_tool_gate() -> PageToolGate:
    """The gate of the page tool ``change_background``, named as the graph's node."""
    return PageToolGate({PAGE_TOOL: {"risk": "medium"}}, name="page_tools", model="model")


def build_page_graph(gate: PageToolGate, checkpointer: Any) -> Any:
    """model -> (gated page tool calls) page_tools -> END or back to the model."""
    model = PageModel()

    def call_model(state: PageState) -> dict[str, Any]:
        tools = [tool for tool in state.get("tools") or [] if isinstance(tool, dict)]
        return {"messages": [model.invoke(state["messages"], tools=tools)]}

    graph = StateGraph(PageState)
    graph.add_node("model", call_model)
    graph.add_node("page_tools", gate.node)
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", gate.route, ["page_tools", END])
    graph.add_conditional_edges("page_tools", gate.after, ["model", END])
    return graph.compile(checkpointer=checkpointer)

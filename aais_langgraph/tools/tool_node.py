"""``ApprovalToolNode`` for hand-built graphs, and the router that gives each call its task.

LangGraph's ``ToolNode`` runs every tool call of a message in one task, where
several interrupts are answered by position. ``ApprovalToolNode`` refuses that
shape for gated tools: route with :func:`route_tool_calls` (one ``Send`` per
tool call, as ``create_agent`` does), so each gated call pauses in its own task
with its own request.

    tools = ApprovalToolNode([send_email, search], interrupt_on={"send_email": True})
    graph.add_node("tools", tools)
    graph.add_conditional_edges("agent", route_tool_calls, ["tools", END])
    graph.add_edge("tools", "agent")
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langchain_core.messages.tool import ToolCall
from langchain_core.tools import BaseTool
from langchain_core.tools import tool as create_tool
from langgraph.constants import END
from langgraph.prebuilt import ToolNode
from langgraph.types import Send
from pydantic import BaseModel

from ..authority import ApprovalAuthority
from .call_gate import ToolCallGate
from .config import InterruptOn, ToolCallDescriber, rules_from
from .messages import EDIT_NOTICE

ToolRouter = Callable[[Any], "list[Send] | str"]


def _messages(state: Any, messages_key: str) -> list[AnyMessage]:
    if isinstance(state, list):
        return state
    if isinstance(state, dict):
        return list(state.get(messages_key) or [])
    return list(getattr(state, messages_key, None) or [])


def pending_tool_calls(state: Any, *, messages_key: str = "messages") -> list[ToolCall]:
    """Tool calls of the last AI message that have no ``ToolMessage`` yet."""
    messages = _messages(state, messages_key)
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, AIMessage):
            answered = {m.tool_call_id for m in messages[index + 1 :] if isinstance(m, ToolMessage)}
            return [call for call in message.tool_calls if call["id"] not in answered]
    return []


def tool_call_router(
    node: str = "tools", *, messages_key: str = "messages", end: str = END
) -> ToolRouter:
    """A conditional edge: one ``Send(node, [tool_call])`` per pending call, else ``end``."""

    def route(state: Any) -> list[Send] | str:
        calls = pending_tool_calls(state, messages_key=messages_key)
        if not calls:
            return end
        return [Send(node, [call]) for call in calls]

    route.__name__ = f"route_tool_calls_to_{node}"
    return route


route_tool_calls: ToolRouter = tool_call_router()
"""``tool_call_router()`` for a tool node named ``"tools"`` and the ``"messages"`` key."""


class ApprovalToolNode(ToolNode):
    """A ``ToolNode`` whose gated calls each need an AAIS approval before they run.

    ``interrupt_on`` takes the same entries as :class:`ApprovalMiddleware`; by
    default every tool is gated. Denied, cancelled, expired and stale calls
    produce an error ``ToolMessage`` (the resolution is in its ``artifact``).
    Feed it one tool call per task with :func:`route_tool_calls`; a task holding
    several calls, any of them gated, is refused with a ``ValueError``.

    Args:
        tools: the tools (or functions made into tools).
        authority: the authority (default: the one in the run's ``configurable``).
        interrupt_on: tool name -> ``True``/``False`` or its approval config (default: every
            tool gated).
        describe: makes the ``action.summary`` of a call.
        graph_id: names the graph in each request's origin.
        edit_notice: the text a tool message carries when a reviewer edited its call (None:
            none).
        name: the node's name.
        tags: the node's tags.
        handle_tool_errors: as ``ToolNode``'s.
        messages_key: the state key of the messages.
    """

    def __init__(
        self,
        tools: Sequence[BaseTool | Callable[..., Any]],
        *,
        authority: ApprovalAuthority | None = None,
        interrupt_on: InterruptOn | None = None,
        describe: ToolCallDescriber | None = None,
        graph_id: str | None = None,
        edit_notice: str | None = EDIT_NOTICE,
        name: str = "tools",
        tags: list[str] | None = None,
        handle_tool_errors: Any = None,
        messages_key: str = "messages",
    ) -> None:
        # Built before ToolNode's own init, so the gate can be handed to it as its wrappers.
        built = [item if isinstance(item, BaseTool) else create_tool(item) for item in tools]
        entries = interrupt_on if interrupt_on is not None else {item.name: True for item in built}
        gate = ToolCallGate(
            rules_from(entries),
            authority=authority,
            describe=describe,
            graph_id=graph_id,
            edit_notice=edit_notice,
        )
        options: dict[str, Any] = {}
        if handle_tool_errors is not None:
            options["handle_tool_errors"] = handle_tool_errors
        super().__init__(
            built,
            name=name,
            tags=tags,
            messages_key=messages_key,
            wrap_tool_call=gate.wrap,
            awrap_tool_call=gate.awrap,
            **options,
        )
        self.gate = gate

    def _parse_input(
        self, input: list[AnyMessage] | dict[str, Any] | BaseModel
    ) -> tuple[list[ToolCall], Literal["list", "dict", "tool_calls"]]:
        # Seam: ToolNode._parse_input (langgraph-prebuilt 1.x); tests/tools pin it.
        tool_calls, input_type = super()._parse_input(input)
        if len(tool_calls) > 1 and any(self.gate.gates(call["name"]) for call in tool_calls):
            raise ValueError(
                f"{self.name}: {len(tool_calls)} tool calls arrived in one task and some need "
                "approval; route each call to its own task with route_tool_calls "
                "(or tool_call_router(node_name)) so decisions bind per call"
            )
        return tool_calls, input_type

"""Shared pieces for the tool-approval tests: a scripted fake model, recording tools, graphs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool, tool
from langgraph.graph import END, START, MessagesState, StateGraph

from aais_langgraph import ApprovalAuthority, build_decision, resume_with_decisions
from aais_langgraph.protocol import ApprovalResolved
from aais_langgraph.tools import ApprovalToolNode, route_tool_calls

ALICE = {"id": "alice", "type": "human"}


class ScriptedChatModel(FakeMessagesListChatModel):
    """Answers turn *n* of a conversation with ``responses[n]``, however often it is re-run.

    The turn is the number of AI messages already in the input, so a resumed or
    replayed run gets the same answer. ``bind_tools`` returns the model itself.
    """

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        turn = sum(isinstance(m, AIMessage) for m in messages)
        message = self.responses[min(turn, len(self.responses) - 1)]
        return ChatResult(generations=[ChatGeneration(message=message)])

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:
        return self


def call(name: str, call_id: str, **args: Any) -> dict[str, Any]:
    """A tool call as a model emits it."""
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


def turn(*calls: dict[str, Any], text: str = "") -> AIMessage:
    """One model turn emitting ``calls`` (a final answer when there are none)."""
    return AIMessage(content=text, tool_calls=list(calls))


def script(*turns: AIMessage) -> ScriptedChatModel:
    """A model playing ``turns`` in order, ending with a final answer."""
    numbered = [t.model_copy(update={"id": f"ai-{i}"}) for i, t in enumerate(turns)]
    numbered.append(AIMessage(content="All done.", id=f"ai-{len(turns)}"))
    return ScriptedChatModel(responses=numbered)


@dataclass
class Recorder:
    """Tools that record every execution with its exact arguments."""

    runs: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def count(self, name: str) -> int:
        return sum(1 for tool_name, _ in self.runs if tool_name == name)

    def tools(self) -> list[BaseTool]:
        runs = self.runs

        @tool
        def send_email(to: str, body: str = "hi") -> str:
            """Send an email."""
            runs.append(("send_email", {"to": to, "body": body}))
            return f"sent to {to}"

        @tool
        def search(query: str) -> str:
            """Search the web."""
            runs.append(("search", {"query": query}))
            return "3 results"

        @tool
        def read_file(path: str) -> str:
            """Read a file."""
            runs.append(("read_file", {"path": path}))
            return "contents"

        return [send_email, search, read_file]


def thread(thread_id: str = "t1") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


def pending(graph: Any, config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Pending AAIS requests of a paused thread, by tool call id."""
    found = {}
    for interrupt in graph.get_state(config).interrupts:
        request = interrupt.value["request"]
        found[request["extensions"]["aais-langgraph.org/tool_call_id"]] = interrupt.value
    return found


def tool_messages(graph: Any, config: dict[str, Any]) -> dict[str, ToolMessage]:
    messages = graph.get_state(config).values["messages"]
    return {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}


def answer(
    graph: Any,
    config: dict[str, Any],
    authority: ApprovalAuthority,
    *answers: tuple[dict[str, Any], str] | tuple[dict[str, Any], str, str],
) -> list[ApprovalResolved]:
    """Decide each ``(requested, decision[, scope])`` as Alice and resume in one call."""
    decisions = [
        build_decision(a[0], decision=a[1], scope=a[2] if len(a) > 2 else "once", actor=ALICE)
        for a in answers
    ]
    return resume_with_decisions(graph, config, decisions, actor=ALICE, authority=authority)


def tool_graph(
    model: ScriptedChatModel,
    tools: Sequence[BaseTool],
    checkpointer: Any,
    **node_options: Any,
) -> Any:
    """A hand-built agent: model node, ApprovalToolNode, one Send per tool call."""

    def agent(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ApprovalToolNode(tools, **node_options))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route_tool_calls, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer)

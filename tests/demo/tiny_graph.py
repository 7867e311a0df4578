"""A tiny approval graph for ``aais-agui serve`` tests: one node gated by ``requires_approval``.

``builder`` (a StateGraph), ``graph`` (compiled without a checkpointer) and
``make_graph`` (a factory taking ``checkpointer=``) are the three forms the
command accepts. Each executed deletion appends a line to ``$TINY_GRAPH_LOG``.
"""

from __future__ import annotations

import os
from typing import Annotated, Any

from langchain_core.messages import AIMessage, AnyMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from aais_langgraph import requires_approval


class State(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    result: str


def delete_action(state: State) -> dict[str, Any]:
    return {
        "kind": "fs.delete",
        "name": "delete_report",
        "summary": "Delete the quarterly report",
        "arguments": {"path": "/reports/q3.pdf"},
    }


def delete_report(state: State) -> dict[str, Any]:
    log = os.environ.get("TINY_GRAPH_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as handle:
            handle.write("deleted\n")
    return {"result": "deleted", "messages": [AIMessage("Deleted the report.", id="ai-deleted")]}


def rejected(state: State, resolved: Any) -> dict[str, Any]:
    outcome = resolved.resolution.outcome
    return {"result": outcome, "messages": [AIMessage(f"Not deleted ({outcome}).", id="ai-no")]}


builder = StateGraph(State)
builder.add_node(
    "delete_report", requires_approval(delete_action, on_reject=rejected)(delete_report)
)
builder.add_edge(START, "delete_report")
builder.add_edge("delete_report", END)

graph = builder.compile()


def make_graph(*, checkpointer: Any) -> Any:
    return builder.compile(checkpointer=checkpointer)

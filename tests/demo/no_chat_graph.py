"""A graph with no chat for ``aais-agui serve`` tests: its state has no ``messages`` channel,
and its one node is gated by ``requires_approval``."""

from __future__ import annotations

from typing import Any

from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from aais_langgraph import requires_approval


class State(TypedDict, total=False):
    path: str
    result: str


def archive_action(state: State) -> dict[str, Any]:
    return {
        "kind": "fs.move",
        "name": "archive_logs",
        "summary": "Archive last month's logs",
        "arguments": {"path": state.get("path", "/var/log/app")},
    }


def archive_logs(state: State) -> dict[str, Any]:
    return {"result": "archived"}


def rejected(state: State, resolved: Any) -> dict[str, Any]:
    return {"result": resolved.resolution.outcome}


builder = StateGraph(State)
builder.add_node(
    "archive_logs", requires_approval(archive_action, on_reject=rejected)(archive_logs)
)
builder.add_edge(START, "archive_logs")
builder.add_edge("archive_logs", END)

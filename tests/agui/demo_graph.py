"""A deterministic approval graph for the AG-UI tests (no model): a node gate and tool gates.

The fake "model" reads the last human message:

- ``delete <path>``  -> the ``delete_file`` node, gated by ``requires_approval``
  (AG-UI reason ``aais:approval``);
- ``email <a>,<b>``  -> one ``send_email`` tool call per recipient, each gated
  in its own task by ``ApprovalToolNode`` (AG-UI reason ``tool_call``);
- ``purge <path>``   -> the ``purge_file`` node, gated without ``on_reject`` (a cancel
  runs nothing else: the AG-UI ``cancelled`` outcome);
- ``archive <path>`` -> the ``archive`` subgraph, whose ``archive_file`` node is gated
  (the interrupt carries ``subagentRunId``);
- anything else      -> a plain reply, no approval.

Every executed side effect is appended to an :class:`EffectLog` (a SQLite file),
so tests in another process can count what ran.
"""

from __future__ import annotations

import sqlite3
import threading
import uuid
from pathlib import Path
from typing import Annotated, Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from aais_langgraph import requires_approval
from aais_langgraph.tools import ApprovalToolNode, route_tool_calls


class EffectLog:
    """Append-only record of executed side effects, shared by processes through SQLite."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._lock = threading.Lock()
        with self._connect() as conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS effects (thread_id TEXT, kind TEXT, target TEXT)"
            )

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=30, isolation_level=None)

    def record(self, thread_id: str, kind: str, target: str) -> None:
        with self._lock, self._connect() as conn:
            conn.execute("INSERT INTO effects VALUES (?, ?, ?)", (thread_id, kind, target))

    def list(self, thread_id: str | None = None) -> list[tuple[str, str, str]]:
        with self._connect() as conn:
            if thread_id is None:
                rows = conn.execute("SELECT thread_id, kind, target FROM effects").fetchall()
            else:
                rows = conn.execute(
                    "SELECT thread_id, kind, target FROM effects WHERE thread_id = ?",
                    (thread_id,),
                ).fetchall()
        return [(str(a), str(b), str(c)) for a, b, c in rows]


class DemoState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    path: str
    result: str
    op: str


def _thread_id(config: Any) -> str:
    return str(config["configurable"]["thread_id"])


def build_demo_graph(effects: EffectLog, checkpointer: Any, *, gated: bool = True) -> Any:
    """The demo graph; ``gated=False`` is the same graph without approvals (benchmarks)."""
    from langgraph.config import get_config

    @tool
    def send_email(to: str, subject: str) -> str:
        """Send an email."""
        effects.record(_thread_id(get_config()), "send_email", to)
        return f"sent '{subject}' to {to}"

    def model(state: DemoState) -> dict[str, Any]:
        last = state["messages"][-1]
        if isinstance(last, ToolMessage):
            done = AIMessage(content="All done.", id=f"ai_{uuid.uuid4().hex}")
            return {"messages": [done], "op": ""}
        text = last.content if isinstance(last, HumanMessage) else ""
        text = text if isinstance(text, str) else ""
        for op in ("delete", "purge", "archive"):
            if text.startswith(op + " "):
                path = text.removeprefix(op + " ").strip()
                reply = AIMessage(content=f"Will {op} {path}.", id=f"ai_{uuid.uuid4().hex}")
                return {"messages": [reply], "path": path, "result": "", "op": op}
        if text.startswith("email "):
            calls = [
                {
                    "name": "send_email",
                    "args": {"to": to.strip(), "subject": "Quarterly report"},
                    "id": f"call_{uuid.uuid4().hex[:16]}",
                    "type": "tool_call",
                }
                for to in text.removeprefix("email ").split(",")
            ]
            request = AIMessage(content="", tool_calls=calls, id=f"ai_{uuid.uuid4().hex}")
            return {"messages": [request], "op": ""}
        nothing = AIMessage(content="Nothing to do.", id=f"ai_{uuid.uuid4().hex}")
        return {"messages": [nothing], "op": ""}

    def delete_action(state: DemoState) -> dict[str, Any]:
        return {
            "kind": "fs.delete",
            "name": "delete_file",
            "summary": "Delete a file from the shared drive",
            "arguments": {"path": state["path"]},
        }

    def delete_file(state: DemoState) -> dict[str, Any]:
        effects.record(_thread_id(get_config()), "delete_file", state["path"])
        message = AIMessage(content=f"Deleted {state['path']}.", id=f"ai_{uuid.uuid4().hex}")
        return {"result": "deleted", "messages": [message]}

    def rejected(state: DemoState, resolved: Any) -> dict[str, Any]:
        outcome = resolved.resolution.outcome
        message = AIMessage(content=f"Not deleted ({outcome}).", id=f"ai_{uuid.uuid4().hex}")
        return {"result": outcome, "messages": [message]}

    def file_action(kind: str) -> Any:
        def action(state: DemoState) -> dict[str, Any]:
            return {
                "kind": f"fs.{kind}",
                "name": f"{kind}_file",
                "summary": f"{kind.capitalize()} a file on the shared drive",
                "arguments": {"path": state["path"]},
            }

        return action

    def file_effect(kind: str) -> Any:
        def effect(state: DemoState) -> dict[str, Any]:
            effects.record(_thread_id(get_config()), f"{kind}_file", state["path"])
            return {"result": kind}

        effect.__name__ = f"{kind}_file"
        return effect

    def after_model(state: DemoState) -> Any:
        op = state.get("op")
        if op and state.get("path") and not state.get("result"):
            return {"purge": "purge_file", "archive": "archive"}.get(op, "delete_file")
        return route_tool_calls(state)

    node = (
        requires_approval(delete_action, on_reject=rejected)(delete_file) if gated else delete_file
    )
    tools: Any = (
        ApprovalToolNode([send_email], interrupt_on={"send_email": True})
        if gated
        else _PlainTools(send_email)
    )

    def gate(kind: str) -> Any:
        effect = file_effect(kind)
        return requires_approval(file_action(kind))(effect) if gated else effect

    archive = StateGraph(DemoState)
    archive.add_node("archive_file", gate("archive"))
    archive.add_edge(START, "archive_file")
    archive.add_edge("archive_file", END)
    builder = StateGraph(DemoState)
    builder.add_node("model", model)
    builder.add_node("delete_file", node)
    builder.add_node("purge_file", gate("purge"))
    builder.add_node("archive", archive.compile())
    builder.add_node("tools", tools)
    builder.add_edge(START, "model")
    builder.add_conditional_edges(
        "model", after_model, ["delete_file", "purge_file", "archive", "tools", END]
    )
    builder.add_edge("tools", "model")
    builder.add_edge("delete_file", END)
    builder.add_edge("purge_file", END)
    builder.add_edge("archive", END)
    return builder.compile(checkpointer=checkpointer)


def _PlainTools(send_email: Any) -> Any:
    from langgraph.prebuilt import ToolNode

    return ToolNode([send_email])

"""A LangGraph graph paused on approvals: SQLite checkpointer and SQLite ledger in one file."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, StateGraph

from aais_langgraph import ApprovalAuthority, SqliteLedger, request_approval

CHOICES = [
    {"decision": "approve", "scope": "once", "label": "Allow once"},
    {"decision": "deny", "scope": "once", "label": "Deny"},
]


class State(TypedDict, total=False):
    path: str
    outcome: str


@dataclass
class Paused:
    """The graph, its authority, the file both live in, and what ran."""

    db: Path
    graph: Any
    authority: ApprovalAuthority
    executed: list[str] = field(default_factory=list)

    def pause(self, thread_id: str, path: str = "notes.txt") -> dict[str, Any]:
        """Run a thread until it waits for approval; its ``approval.requested`` envelope."""
        config = {"configurable": {"thread_id": thread_id}}
        self.graph.invoke({"path": path}, config)
        [interrupt] = self.graph.get_state(config).interrupts
        requested: dict[str, Any] = interrupt.value
        return requested


@pytest.fixture
def paused(tmp_path: Path) -> Iterator[Paused]:
    db = tmp_path / "app.db"
    ledger = SqliteLedger(db)
    ledger.setup()
    authority = ApprovalAuthority(ledger)
    conn = sqlite3.connect(db, check_same_thread=False)
    found = Paused(db=db, graph=None, authority=authority)

    def delete(state: State) -> State:
        action = {
            "kind": "filesystem.delete",
            "name": "delete_file",
            "summary": f"Delete {state['path']}",
            "arguments": {"path": state["path"]},
        }
        resolution = request_approval(action, authority=authority, choices=CHOICES)
        if resolution.approved:
            found.executed.append(state["path"])
        return {"outcome": resolution.resolution.outcome}

    builder = StateGraph(State)
    builder.add_node("delete", delete)
    builder.add_edge(START, "delete")
    found.graph = builder.compile(checkpointer=SqliteSaver(conn))
    yield found
    conn.close()
    ledger.close()

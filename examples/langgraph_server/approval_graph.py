"""A graph for LangGraph Server whose one node asks a human before it acts.

The gate is the ordinary ``request_approval``: nothing here knows it runs on a
server. The server supplies the checkpointer (``compile()`` without one); the
authority comes from the environment (``AAIS_LEDGER_URL``, see
``aais_langgraph.server_env``), because a hosted graph cannot be handed objects.

The "action" appends one line to the file named by ``AAIS_EXAMPLE_EFFECTS``
(default ``effects.log``), keyed by the request id, so a test can count how
often it really ran. Start it with::

    AAIS_LEDGER_URL=approvals.db AAIS_EXAMPLE_TOKENS=alice-token=alice langgraph dev

from this folder, and call it with ``Authorization: Bearer alice-token`` (``auth.py``).
"""

from __future__ import annotations

import os
from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph

from aais_langgraph import request_approval


class State(TypedDict, total=False):
    command: str
    outcome: str
    request_id: str


def run_command(command: str, *, idempotency_key: str) -> None:
    """The side effect: stands in for running ``command`` (appends one line to a file)."""
    path = os.environ.get("AAIS_EXAMPLE_EFFECTS", "effects.log")
    with open(path, "a", encoding="utf-8") as effects:
        effects.write(f"{idempotency_key} {command}\n")


def act(state: State) -> dict[str, Any]:
    resolved = request_approval(
        {
            "kind": "process.exec",
            "name": "shell.exec",
            "summary": f"Run `{state['command']}`",
            "arguments": {"command": state["command"]},
        }
    )
    if resolved.approved:
        # The request id is stable across re-executions of this node: an idempotency key.
        run_command(state["command"], idempotency_key=resolved.resolution.request_id)
    return {"outcome": resolved.resolution.outcome, "request_id": resolved.resolution.request_id}


builder = StateGraph(State)
builder.add_node("act", act)
builder.add_edge(START, "act")
builder.add_edge("act", END)
graph = builder.compile()

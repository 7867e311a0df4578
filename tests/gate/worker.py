"""A separate OS process driving a gated graph on a SQLite file (restart and race tests).

Run as ``python -m tests.gate.worker`` with one JSON job on stdin::

    {"db": path, "effects": path, "thread": id, "mode": ..., ...}

Modes: ``start`` (run until the interrupt), ``list`` (pending_approvals), ``resume``
(resume_with_decisions) and ``raw`` (graph.invoke(Command(resume=...))). ``"node":
"plain"`` swaps the gated node for a bare ``interrupt()`` node (no gate). With
``"barrier": true`` the worker prints ``ready`` and waits for a ``go`` line before
acting, so two racers start together. The result is one JSON line on stdout.

The gated node appends the command to the ``effects`` file when it runs the
action, after sleeping ``delay`` seconds (to widen any race window); every node
entry is appended to ``effects + ".entries"`` with a timestamp.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import time
from typing import Any, TypedDict

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from aais_langgraph import (
    ApprovalAuthority,
    SqliteLedger,
    pending_approvals,
    request_approval,
    resume_with_decisions,
)

HUMAN = {"id": "user_alex", "type": "human"}


class State(TypedDict, total=False):
    command: str
    outcome: str


def append(path: str, line: str) -> None:
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(line + "\n")
        handle.flush()


def build(job: dict[str, Any], saver: SqliteSaver, authority: ApprovalAuthority) -> Any:
    delay = float(job.get("delay", 0.0))

    def gated(state: State) -> dict[str, Any]:
        append(job["effects"] + ".entries", f"{time.time()}")
        resolved = request_approval(
            {
                "kind": "process.exec",
                "name": "shell.exec",
                "summary": "Run a shell command",
                "arguments": {"command": state["command"]},
            },
            authority=authority,
        )
        if resolved.approved:
            time.sleep(delay)
            append(job["effects"], state["command"])
        return {"outcome": resolved.resolution.outcome}

    def plain(state: State) -> dict[str, Any]:
        append(job["effects"] + ".entries", f"{time.time()}")
        answer = interrupt({"question": "run it?"})
        if answer == "approve":
            time.sleep(delay)
            append(job["effects"], state["command"])
        return {"outcome": str(answer)}

    builder = StateGraph(State)
    builder.add_node("act", plain if job.get("node") == "plain" else gated)
    builder.add_edge(START, "act")
    builder.add_edge("act", END)
    return builder.compile(checkpointer=saver)


def act(job: dict[str, Any], graph: Any, authority: ApprovalAuthority) -> Any:
    config = {"configurable": {"thread_id": job["thread"]}}
    mode = job["mode"]
    if mode == "start":
        result = graph.invoke({"command": job["command"]}, config)
        return [{"interrupt_id": i.id, "value": i.value} for i in result["__interrupt__"]]
    if mode == "list":
        return [r.id for r in pending_approvals(authority, graph).snapshot.pending]
    if mode == "resume":
        results = resume_with_decisions(
            graph, config, job["decisions"], actor=HUMAN, authority=authority
        )
        return [r.resolution.outcome for r in results]
    if mode == "raw":
        result = graph.invoke(Command(resume={job["interrupt_id"]: job["answer"]}), config)
        return {"outcome": result.get("outcome"), "paused": "__interrupt__" in result}
    raise SystemExit(f"unknown mode {mode}")


def main() -> None:
    job = json.loads(sys.stdin.readline())
    conn = sqlite3.connect(job["db"], check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()
    with SqliteLedger.from_path(job["db"]) as ledger:
        ledger.setup()
        authority = ApprovalAuthority(ledger)
        graph = build(job, saver, authority)
        if job.get("barrier"):
            print("ready", flush=True)
            if sys.stdin.readline().strip() != "go":
                raise SystemExit("no go")
        try:
            result: Any = {"ok": act(job, graph, authority)}
        except Exception as error:  # reported to the test, which decides what is acceptable
            result = {"error": type(error).__name__, "message": str(error)[:500]}
    conn.close()
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()

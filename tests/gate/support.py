"""Graphs, backends and decision builders shared by the gate tests.

Every graph records the actions it *executes* in an :class:`Effects` log, so a
test can assert how many times an approved action really ran.
"""

from __future__ import annotations

import operator
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Interrupt, Send

from aais_langgraph import (
    ApprovalAuthority,
    ApprovalRequested,
    InMemoryLedger,
    SqliteLedger,
    build_decision,
    request_approval,
)
from aais_langgraph.protocol import ApprovalDecided

START_TIME = datetime(2026, 8, 30, 18, 0, tzinfo=timezone.utc)
HUMAN: dict[str, Any] = {"id": "user_alex", "type": "human", "display_name": "Alex"}
SECRET = "sk-live-4f9a1c7e2b8d4a6f9e3c1b7a5d2e8f40"

SESSION_CHOICES: list[dict[str, Any]] = [
    {"decision": "approve", "scope": "once", "label": "Approve once"},
    {
        "decision": "approve",
        "scope": "session",
        "label": "Allow ls in this thread",
        "scope_constraints": {"command_prefix": "ls "},
    },
    {
        "decision": "approve",
        "scope": "persistent",
        "label": "Always allow ls",
        "scope_constraints": {"command_prefix": "ls "},
    },
    {"decision": "deny", "scope": "once", "label": "Deny"},
]


class FakeClock:
    """The authority's clock, moved by hand (real time is ignored)."""

    def __init__(self, start: datetime = START_TIME) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


class Effects:
    """The side effects that actually happened, in order (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.ran: list[str] = []

    def run(self, command: str) -> str:
        with self._lock:
            self.ran.append(command)
        return f"ran {command}"


def shell_action(command: str, **arguments: Any) -> dict[str, Any]:
    return {
        "kind": "process.exec",
        "name": "shell.exec",
        "summary": "Run a shell command",
        "arguments": {"command": command, **arguments},
    }


class State(TypedDict, total=False):
    command: str
    commands: list[str]
    outcome: str
    outcomes: Annotated[list[str], operator.add]
    request_ids: Annotated[list[str], operator.add]


@dataclass
class Backend:
    """A checkpointer and an authority, both in memory or both in one SQLite file."""

    name: str
    saver: Any
    authority: ApprovalAuthority
    clock: FakeClock
    path: Path | None = None


@contextmanager
def open_backend(name: str, directory: Path, clock: FakeClock | None = None) -> Iterator[Backend]:
    clock = clock or FakeClock()
    if name == "memory":
        yield Backend(
            name, InMemorySaver(), ApprovalAuthority(InMemoryLedger(), clock=clock), clock
        )
        return
    path = directory / "gate.db"
    conn = sqlite3.connect(path, check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()
    with SqliteLedger.from_path(path) as ledger:
        ledger.setup()
        yield Backend(name, saver, ApprovalAuthority(ledger, clock=clock), clock, path)
    conn.close()


def config(thread_id: str) -> Any:
    return {"configurable": {"thread_id": thread_id}}


def opened(backend: Backend, effects: Effects, *requests: ApprovalRequested) -> Callable[[], bool]:
    """For the hostile-input table: did an action run, or an approval get recorded?"""

    def observe() -> bool:
        recorded = [backend.authority.get_resolution(r.request.id) for r in requests]
        return bool(effects.ran) or any(r is not None and r.approved for r in recorded)

    return observe


def gated_graph(
    backend: Backend,
    effects: Effects,
    *,
    choices: Sequence[dict[str, Any]] | None = None,
    authority: ApprovalAuthority | None = None,
) -> Any:
    """START -> act -> END; ``act`` asks for approval of ``state["command"]``."""
    gate_authority = authority or backend.authority

    def act(state: State) -> dict[str, Any]:
        resolved = request_approval(
            shell_action(state["command"]), authority=gate_authority, choices=choices
        )
        update: dict[str, Any] = {
            "outcome": resolved.resolution.outcome,
            "request_ids": [resolved.resolution.request_id],
        }
        if resolved.approved:
            effects.run(state["command"])
        return update

    builder = StateGraph(State)
    builder.add_node("act", act)
    builder.add_edge(START, "act")
    builder.add_edge("act", END)
    return builder.compile(checkpointer=backend.saver)


def fan_out_graph(backend: Backend, effects: Effects) -> Any:
    """START -> Send("fan", command) for each of ``state["commands"]``; each gates one command."""

    def fan(state: State) -> dict[str, Any]:
        resolved = request_approval(shell_action(state["command"]), authority=backend.authority)
        if resolved.approved:
            effects.run(state["command"])
        return {"outcomes": [f"{state['command']}={resolved.resolution.outcome}"]}

    def spread(state: State) -> list[Send]:
        return [Send("fan", {"command": command}) for command in state["commands"]]

    builder = StateGraph(State)
    builder.add_node("fan", fan)
    builder.add_conditional_edges(START, spread, ["fan"])
    builder.add_edge("fan", END)
    return builder.compile(checkpointer=backend.saver)


def two_branch_graph(backend: Backend, effects: Effects) -> Any:
    """START -> left, right (in parallel); each gates its own fixed command."""

    def branch(command: str) -> Any:
        def node(state: State) -> dict[str, Any]:
            resolved = request_approval(shell_action(command), authority=backend.authority)
            if resolved.approved:
                effects.run(command)
            return {"outcomes": [f"{command}={resolved.resolution.outcome}"]}

        return node

    builder = StateGraph(State)
    builder.add_node("left", branch("ls left"))
    builder.add_node("right", branch("ls right"))
    builder.add_edge(START, "left")
    builder.add_edge(START, "right")
    builder.add_edge("left", END)
    builder.add_edge("right", END)
    return builder.compile(checkpointer=backend.saver)


def requested_of(pending: Interrupt) -> ApprovalRequested:
    return ApprovalRequested.from_data(pending.value)


def paused(result: dict[str, Any]) -> list[Interrupt]:
    """The interrupts an invoke result carries (empty if the run did not pause)."""
    return list(result.get("__interrupt__", []))


def by_command(interrupts: Sequence[Interrupt]) -> dict[str, tuple[Interrupt, ApprovalRequested]]:
    found = {}
    for pending in interrupts:
        requested = requested_of(pending)
        found[requested.request.action.arguments["command"]] = (pending, requested)
    return found


def decide(
    requested: ApprovalRequested, kind: str = "approve", scope: str = "once"
) -> ApprovalDecided:
    return build_decision(requested, decision=kind, scope=scope, actor=HUMAN)  # type: ignore[arg-type]


def tampered(decided: ApprovalDecided) -> dict[str, Any]:
    """The decision with a forged action digest (a presenter that lies about what was shown)."""
    document = decided.to_json()
    document["decision"]["action_digest"] = "sha256:" + "0" * 64
    return document


def pending_ids(graph: Any, thread_id: str) -> list[str]:
    return [pending.id for pending in graph.get_state(config(thread_id)).interrupts]

"""Benchmark: what the approval gate costs on top of plain LangGraph.

Run with ``python benchmarks/bench_gate.py`` (``--quick`` for a short run).
Every comparison is measured in the same process and interleaved (baseline
batch, gated batch, baseline batch, ...), so disk and CPU noise hit both sides;
each figure is the median over the batches.

1. Approval round trip: a node calls ``request_approval`` -> interrupt -> the
   presenter builds a decision from the interrupt value -> ``resume_with_decisions``
   -> the node runs with the resolution; against a bare ``interrupt()`` /
   ``Command(resume=...)`` round trip on the same checkpointer. InMemorySaver +
   InMemoryLedger, and SqliteSaver + SqliteLedger on files (defaults: WAL,
   ledger ``synchronous=FULL``). Aim: <= 1.3x on SQLite.
2. Grant-approved action: a node whose action a standing ``persistent`` grant
   covers (no interrupt) against the same node ungated. SqliteSaver +
   SqliteLedger. Aim: <= 1.15x.
3. ``pending_approvals`` with 1k and 10k paused threads and several times more
   resolved history (finished threads plus resolved ledger requests), as the
   O(pending) listing (``reconcile=False``) and reconciled with every checkpoint.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from aais_langgraph import (
    ApprovalAuthority,
    ApprovalRequested,
    InMemoryLedger,
    SqliteLedger,
    build_decision,
    pending_approvals,
    request_approval,
    resume_with_decisions,
)

ACTOR = {"id": "alice", "type": "human"}
GRANT_CHOICES = [
    {"decision": "approve", "scope": "once", "label": "Approve once"},
    {
        "decision": "approve",
        "scope": "persistent",
        "label": "Always allow ls",
        "scope_constraints": {"command_prefix": "ls "},
    },
    {"decision": "deny", "scope": "once", "label": "Deny"},
]


class State(TypedDict, total=False):
    command: str
    out: str


def shell_action(command: str) -> dict[str, Any]:
    return {
        "kind": "process.exec",
        "name": "shell.exec",
        "summary": f"Run {command}",
        "arguments": {"command": command, "timeout_s": 30},
        "working_directory": "/workspace",
    }


def side_effect(command: str) -> str:
    """The action itself: cheap and identical on both sides of every comparison."""
    return f"ran {command}"


def _compile(node: Callable[[State], dict[str, Any]], checkpointer: Any) -> Any:
    builder = StateGraph(State)
    builder.add_node("act", node)
    builder.add_edge(START, "act")
    builder.add_edge("act", END)
    return builder.compile(checkpointer=checkpointer)


def gated_graph(checkpointer: Any, authority: ApprovalAuthority, **options: Any) -> Any:
    def act(state: State) -> dict[str, Any]:
        resolved = request_approval(shell_action(state["command"]), authority=authority, **options)
        if not resolved.approved:
            return {"out": resolved.resolution.outcome}
        return {"out": side_effect(state["command"])}

    return _compile(act, checkpointer)


def bare_interrupt_graph(checkpointer: Any) -> Any:
    def act(state: State) -> dict[str, Any]:
        answer = interrupt({"action": shell_action(state["command"])})
        if answer != "approve":
            return {"out": "denied"}
        return {"out": side_effect(state["command"])}

    return _compile(act, checkpointer)


def ungated_graph(checkpointer: Any) -> Any:
    def act(state: State) -> dict[str, Any]:
        return {"out": side_effect(state["command"])}

    return _compile(act, checkpointer)


@contextmanager
def backend(kind: str, directory: Path) -> Iterator[tuple[Any, ApprovalAuthority]]:
    """A checkpointer and an authority: both in memory, or both in SQLite files."""
    if kind == "memory":
        yield InMemorySaver(), ApprovalAuthority(InMemoryLedger())
        return
    conn = sqlite3.connect(directory / f"{kind}-checkpoints.db", check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()
    with SqliteLedger.from_path(directory / f"{kind}-ledger.db") as ledger:
        ledger.setup()
        yield saver, ApprovalAuthority(ledger)
    conn.close()


@dataclass(frozen=True)
class Comparison:
    """Median per-operation seconds of each side, and the median (min, max) of the paired ratios."""

    baseline: float
    gated: float
    ratio: float
    low: float = 0.0
    high: float = 0.0


CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.process_time}
"""What a batch is timed with: wall time, or this process's CPU time (every thread's,
LangGraph's background writers included; waits such as an fsync not counted)."""


def interleaved(
    baseline: Callable[[int], None],
    gated: Callable[[int], None],
    *,
    batches: int,
    size: int,
    clock: str = "wall",
) -> Comparison:
    """Run the two sides in alternating batches (order flipped every batch).

    Each batch pair yields one gated/baseline ratio measured a moment apart, so
    slow drifts of the machine (other processes, disk) cancel out; the median
    of those ratios is the figure reported. ``clock``: a key of :data:`CLOCKS`.
    """
    now = CLOCKS[clock]
    counter = iter(range(10**9))
    for _ in range(5):  # warm up both paths
        baseline(next(counter))
        gated(next(counter))

    def batch(fn: Callable[[int], None]) -> float:
        start = now()
        for _ in range(size):
            fn(next(counter))
        return (now() - start) / size

    base_times: list[float] = []
    gate_times: list[float] = []
    for index in range(batches):
        if index % 2:
            gate_times.append(batch(gated))
            base_times.append(batch(baseline))
        else:
            base_times.append(batch(baseline))
            gate_times.append(batch(gated))
    ratios = [g / b for g, b in zip(gate_times, base_times, strict=True)]
    return Comparison(
        statistics.median(base_times),
        statistics.median(gate_times),
        statistics.median(ratios),
        min(ratios),
        max(ratios),
    )


# -- 1. approval round trip -------------------------------------------------------------


def round_trip(
    kind: str, directory: Path, *, batches: int, size: int, clock: str = "wall"
) -> Comparison:
    with backend(kind, directory) as (saver, authority):
        gated = gated_graph(saver, authority)
        bare = bare_interrupt_graph(saver)

        def bare_trip(i: int) -> None:
            config = {"configurable": {"thread_id": f"bare-{i}"}}
            bare.invoke({"command": f"ls {i}"}, config)
            out = bare.invoke(Command(resume="approve"), config)
            assert out["out"].startswith("ran"), out

        def gated_trip(i: int) -> None:
            config = {"configurable": {"thread_id": f"gated-{i}"}}
            paused = gated.invoke({"command": f"ls {i}"}, config)
            requested = ApprovalRequested.from_data(paused["__interrupt__"][0].value)
            decided = build_decision(requested, decision="approve", actor=ACTOR)
            resolved = resume_with_decisions(
                gated, config, decided, actor=ACTOR, authority=authority
            )
            assert resolved[0].approved, resolved

        return interleaved(bare_trip, gated_trip, batches=batches, size=size, clock=clock)


# -- 2. grant-approved action -----------------------------------------------------------


def grant_path(directory: Path, *, batches: int, size: int) -> Comparison:
    with backend("grant", directory) as (saver, authority):
        gated = gated_graph(saver, authority, choices=GRANT_CHOICES)
        ungated = ungated_graph(saver)
        # One approval with the persistent choice records the grant.
        config = {"configurable": {"thread_id": "grant-seed"}}
        paused = gated.invoke({"command": "ls seed"}, config)
        requested = ApprovalRequested.from_data(paused["__interrupt__"][0].value)
        decided = build_decision(requested, decision="approve", scope="persistent", actor=ACTOR)
        resume_with_decisions(gated, config, decided, actor=ACTOR, authority=authority)

        def ungated_run(i: int) -> None:
            out = ungated.invoke({"command": f"ls {i}"}, {"configurable": {"thread_id": f"u-{i}"}})
            assert out["out"].startswith("ran"), out

        def granted_run(i: int) -> None:
            out = gated.invoke({"command": f"ls {i}"}, {"configurable": {"thread_id": f"g-{i}"}})
            assert out["out"].startswith("ran"), out

        return interleaved(ungated_run, granted_run, batches=batches, size=size)


# -- 3. pending_approvals ---------------------------------------------------------------


def inbox(directory: Path, pending: int, history: int, *, repeats: int) -> dict[str, float]:
    """Seconds for pending_approvals with ``pending`` paused threads and ``history`` resolved."""
    path = directory / f"inbox-{pending}.db"
    conn = sqlite3.connect(path, check_same_thread=False)
    conn.execute("PRAGMA synchronous = OFF")  # setup speed only; reads are what is timed
    saver = SqliteSaver(conn)
    saver.setup()
    with SqliteLedger.from_path(path, synchronous="OFF") as ledger:
        ledger.setup()
        authority = ApprovalAuthority(ledger)
        graph = gated_graph(saver, authority)
        started = time.perf_counter()
        finished_threads = min(history, pending)
        for i in range(finished_threads):
            # Resolved history that also lives in the checkpointer: finished threads.
            config = {"configurable": {"thread_id": f"done-{i}"}}
            paused = graph.invoke({"command": f"ls {i}"}, config)
            requested = ApprovalRequested.from_data(paused["__interrupt__"][0].value)
            decided = build_decision(requested, decision="deny", actor=ACTOR)
            resume_with_decisions(graph, config, decided, actor=ACTOR, authority=authority)
        for i in range(history - finished_threads):
            # The rest of the history: resolved ledger requests without a thread.
            requested = authority.request(
                shell_action(f"cat {i}"), origin={"harness": "bench", "session_id": f"s{i}"}
            )
            authority.decide(build_decision(requested, decision="approve", actor=ACTOR))
        for i in range(pending):
            graph.invoke({"command": f"ls {i}"}, {"configurable": {"thread_id": f"wait-{i}"}})
        setup = time.perf_counter() - started

        def timed(fn: Callable[[], Any]) -> float:
            times = []
            for _ in range(repeats):
                start = time.perf_counter()
                fn()
                times.append(time.perf_counter() - start)
            return statistics.median(times)

        shown = len(pending_approvals(authority, graph).snapshot.pending)
        assert shown == pending, (shown, pending)
        figures = {
            "setup": setup,
            "ledger_only": timed(lambda: authority.snapshot()),
            "with_graph": timed(lambda: pending_approvals(authority, graph, reconcile=False)),
            # Reconciling reads every checkpoint for runs paused on requests the ledger lacks.
            "reconciled": timed(lambda: pending_approvals(authority, graph)),
        }
    conn.close()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer batches, 1k inbox only")
    parser.add_argument("--skip-inbox", action="store_true")
    args = parser.parse_args()
    batches, size = (10, 10) if args.quick else (60, 10)
    inbox_sizes = [1000] if args.quick else [1000, 10000]

    with tempfile.TemporaryDirectory(prefix="bench_gate_") as tmp:
        directory = Path(tmp)
        print(f"bench_gate  (pid {os.getpid()}, {batches} interleaved batches x {size} ops)")
        print("times: median per op; ratio: median of the paired batch ratios")
        print()
        print("1. approval round trip vs bare interrupt()/Command(resume=...)")
        print(f"   {'backend':<10}{'bare ms':>10}{'gated ms':>10}{'ratio':>8}   aim")
        for kind in ("memory", "sqlite"):
            trip = round_trip(kind, directory, batches=batches, size=size)
            aim = "<= 1.3x" if kind == "sqlite" else ""
            print(
                f"   {kind:<10}{trip.baseline * 1e3:>10.2f}{trip.gated * 1e3:>10.2f}"
                f"{trip.ratio:>7.2f}x   {aim}"
            )
        print()
        print("2. grant-approved action vs the same node ungated (SqliteSaver + SqliteLedger)")
        grant = grant_path(directory, batches=batches, size=size)
        print(f"   {'ungated ms':>12}{'granted ms':>12}{'ratio':>8}   aim")
        print(
            f"   {grant.baseline * 1e3:>12.2f}{grant.gated * 1e3:>12.2f}{grant.ratio:>7.2f}x"
            "   <= 1.15x"
        )
        if args.skip_inbox:
            return
        print()
        print("3. pending_approvals (SqliteSaver + SqliteLedger)")
        print(
            f"   {'pending':>8}{'history':>9}{'ledger-only ms':>16}{'with graph ms':>15}"
            f"{'per pending us':>16}{'reconciled ms':>15}{'setup s':>9}"
        )
        for pending in inbox_sizes:
            history = 5 * pending
            figures = inbox(directory, pending, history, repeats=3 if pending > 1000 else 5)
            per = figures["with_graph"] / pending * 1e6
            print(
                f"   {pending:>8}{history:>9}{figures['ledger_only'] * 1e3:>16.1f}"
                f"{figures['with_graph'] * 1e3:>15.1f}{per:>16.0f}"
                f"{figures['reconciled'] * 1e3:>15.1f}{figures['setup']:>9.0f}"
            )


if __name__ == "__main__":
    main()

"""Benchmark: whether the in-memory ledger's per-approval reads grow with its history.

Run with ``python benchmarks/memory_ledger_history.py [--small 1000] [--large 10000]
[--rounds 7]``.

Two :class:`~aais_langgraph.ledger.InMemoryLedger` authorities (the default of
``ApprovalAuthority()``) are filled through the public API with ``--small`` and
``--large`` approvals, each on a thread of its own, approved, its execution claimed
and finished and its resume work done, as a gated round trip leaves them. Then, in
rounds alternating the two, each times the reads an approval or a poll makes
whatever the history holds: the gate's look for claims still held on its thread
(``list_executions(states=("executing",), thread_id=...)``), a thread's requests
(``requests_of_thread``, the thread access checks), the resume work due
(``list_work(RESUME, states=("due",), ...)``, what the driver's poll reads) and, as
the baseline that never depended on the history, ``get_request``. The figure is
large / small per read, the median over the rounds (aim: 1.5x at most, the read
does not grow with the history).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from aais_langgraph import ApprovalAuthority, build_decision
from aais_langgraph.ledger import InMemoryLedger
from aais_langgraph.ledger.executions import claim_change, finish_change
from aais_langgraph.ledger.outbox import RESUME, settled_change

ACTION = {"kind": "tool_call", "name": "shell", "summary": "Run ls", "arguments": {"command": "ls"}}
ORIGIN = {"harness": "benchmarks", "session_id": "sess_1"}
ACTOR = {"id": "u_1", "type": "human"}
AIM = 1.5


def filled(approvals: int) -> ApprovalAuthority:
    """An in-memory authority holding ``approvals`` answered, executed approvals."""
    authority = ApprovalAuthority(InMemoryLedger())
    now = time.time()
    for number in range(approvals):
        request_id, thread_id = f"apr_{number}", f"thr_{number}"
        requested = authority.request(
            ACTION, origin=ORIGIN, request_id=request_id, thread_id=thread_id
        )
        authority.decide(build_decision(requested, decision="approve", actor=ACTOR))
        claimed = claim_change(request_id, "h", thread_id=thread_id, ttl=60, now=now, retry=False)
        authority.change_execution(request_id, claimed)
        authority.change_execution(request_id, finish_change(now))
        authority.ledger.update_work(RESUME, request_id, settled_change("done", now))
    return authority


def per_call(read: Callable[[], object], calls: int = 300) -> float:
    """Microseconds per call of ``read``."""
    started = time.perf_counter()
    for _ in range(calls):
        read()
    return (time.perf_counter() - started) / calls * 1e6


def reads(authority: ApprovalAuthority) -> dict[str, Callable[[], object]]:
    ledger = authority.ledger
    return {
        "get_request (baseline)": lambda: ledger.get_request("apr_5"),
        "list_executions, executing, one thread": lambda: ledger.list_executions(
            states=("executing",), thread_id="thr_5"
        ),
        "requests_of_thread": lambda: ledger.requests_of_thread("thr_5"),
        "list_work, resume work due": lambda: ledger.list_work(
            RESUME, states=("due",), due_before=time.time()
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--small", type=int, default=1000)
    parser.add_argument("--large", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    sides = {"small": reads(filled(args.small)), "large": reads(filled(args.large))}
    times: dict[str, dict[str, list[float]]] = {side: {} for side in sides}
    for _ in range(args.rounds):
        for side, found in sides.items():
            for name, read in found.items():
                times[side].setdefault(name, []).append(per_call(read))
    print(f"in-memory ledger reads, {args.small} vs {args.large} approvals stored")
    print(f"{'read':<42}{'small µs':>10}{'large µs':>10}{'ratio':>8}  aim")
    for name in sides["small"]:
        small = statistics.median(times["small"][name])
        large = statistics.median(times["large"][name])
        print(f"{name:<42}{small:>10.1f}{large:>10.1f}{large / small:>7.2f}x  <= {AIM}x")


if __name__ == "__main__":
    main()

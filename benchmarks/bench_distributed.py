"""Benchmark: 1,000 pending approvals answered concurrently by several replicas.

Run with ``python benchmarks/bench_distributed.py`` (``--quick``: 200 approvals).

Gate level: each replica is an OS process running the graph and calling
``resume_with_decisions`` from ``--concurrency`` presenter threads (the AG-UI
HTTP layer is not in the loop). Two set-ups:

- Postgres: two replica processes on one database (``PostgresSaver`` +
  ``PostgresLedger``), each answering half of the approvals. The server is a
  throwaway cluster started here (``initdb`` + ``pg_ctl``, loopback only, with
  ``fsync=off``, as in the tests) unless ``--postgres URL`` names one.
- SQLite: one replica process on one file (``SqliteSaver`` + ``SqliteLedger``
  with its default ``synchronous=FULL``).

Phase 1 pauses N threads on their approval interrupt (not timed). Phase 2
builds one approval per pending request from ``pending_approvals``, starts the
replicas, releases them together and times every ``resume_with_decisions`` call
(lease, judgement, ledger write, graph resume, the action, the checkpoint).
Afterwards it checks: zero lost (every request resolved ``approved``, every
thread finished, nothing left pending) and zero doubled (the action ran exactly
once per request: it appends ``request_id`` to an O_APPEND log). Each replica also
reports its CPU seconds in each phase (``os.times``); ``pg_scale.py`` adds the
server's and compares them.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from pathlib import Path
from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph

from aais_langgraph import (
    ApprovalAuthority,
    ApprovalRequested,
    Ledger,
    SqliteLedger,
    build_decision,
    pending_approvals,
    request_approval,
    resume_with_decisions,
)

ROOT = Path(__file__).resolve().parents[1]
ACTOR = {"id": "alice", "type": "human"}


class State(TypedDict, total=False):
    command: str
    outcome: str


def is_postgres(db: str) -> bool:
    return db.startswith(("postgres://", "postgresql://"))


@contextmanager
def backend(db: str, *, pool_size: int = 8, setup: bool = False) -> Iterator[tuple[Any, Any]]:
    """(checkpointer, authority) on one Postgres database or one SQLite file."""
    with ExitStack() as stack:
        if is_postgres(db):
            from langgraph.checkpoint.postgres import PostgresSaver
            from psycopg.rows import dict_row
            from psycopg_pool import ConnectionPool

            from aais_langgraph.ledger.postgres import PostgresLedger

            pool: ConnectionPool = stack.enter_context(
                ConnectionPool(
                    db,
                    min_size=pool_size,
                    max_size=pool_size,
                    kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
                )
            )
            saver: Any = PostgresSaver(pool)  # type: ignore[arg-type]
            ledger: Ledger = PostgresLedger(pool)
        else:
            from langgraph.checkpoint.sqlite import SqliteSaver

            conn = sqlite3.connect(db, check_same_thread=False, timeout=60)
            stack.callback(conn.close)
            saver = SqliteSaver(conn)
            ledger = stack.enter_context(SqliteLedger.from_path(db, busy_timeout=60))
        if setup:
            ledger.setup()
            saver.setup()
        yield saver, ApprovalAuthority(ledger)


def build_graph(saver: Any, authority: ApprovalAuthority, effects: str) -> Any:
    def act(state: State) -> dict[str, Any]:
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
            fd = os.open(effects, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            try:
                os.write(fd, f"{resolved.resolution.request_id}\n".encode())
            finally:
                os.close(fd)
        return {"outcome": resolved.resolution.outcome}

    builder = StateGraph(State)
    builder.add_node("act", act)
    builder.add_edge(START, "act")
    builder.add_edge("act", END)
    return builder.compile(checkpointer=saver)


def thread_config(thread_id: str) -> Any:
    return {"configurable": {"thread_id": thread_id}}


# -- replica process --------------------------------------------------------------------


def replica(job: dict[str, Any]) -> None:
    """``--replica``: pause (phase 1) or answer (phase 2) the threads in the job."""
    concurrency = int(job["concurrency"])
    with backend(job["db"], pool_size=concurrency + 2) as (saver, authority):
        graph = build_graph(saver, authority, job["effects"])
        work: list[Any] = list(job["items"])
        lock = threading.Lock()
        latencies: list[float] = []
        errors: list[str] = []

        def run_one(item: Any) -> None:
            if job["phase"] == "pause":
                graph.invoke({"command": f"deploy {item}"}, thread_config(item))
                return
            thread_id, decision = item
            started = time.perf_counter()
            [resolved] = resume_with_decisions(
                graph, thread_config(thread_id), [decision], actor=ACTOR,
                authority=authority, lease_wait=60.0,
            )  # fmt: skip
            elapsed = time.perf_counter() - started
            with lock:
                latencies.append(elapsed)
                if not resolved.approved:
                    errors.append(f"{thread_id}: {resolved.resolution.outcome}")

        def presenter() -> None:
            while True:
                with lock:
                    if not work:
                        return
                    item = work.pop()
                try:
                    run_one(item)
                except Exception as error:
                    with lock:
                        errors.append(f"{type(error).__name__}: {str(error)[:200]}")

        print("ready", flush=True)
        if sys.stdin.readline().strip() != "go":
            raise SystemExit("no go")
        started, cpu = time.perf_counter(), process_cpu_seconds()
        threads = [threading.Thread(target=presenter) for _ in range(concurrency)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall, cpu = time.perf_counter() - started, process_cpu_seconds() - cpu
    report = {"latencies": latencies, "errors": errors, "wall": wall, "cpu": cpu}
    print(json.dumps(report), flush=True)


def process_cpu_seconds() -> float:
    """User + system CPU seconds of this process (every thread) so far."""
    times = os.times()
    return times.user + times.system


def run_replicas(jobs: list[dict[str, Any]], timeout: float) -> tuple[float, list[dict[str, Any]]]:
    """Start one process per job, release them together; wall time and their reports."""
    processes = [
        subprocess.Popen(
            [sys.executable, __file__, "--replica"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for _ in jobs
    ]
    try:
        for process, job in zip(processes, jobs, strict=True):
            assert process.stdin is not None and process.stdout is not None
            process.stdin.write(json.dumps(job) + "\n")
            process.stdin.flush()
        for process in processes:
            assert process.stdout is not None
            if process.stdout.readline().strip() != "ready":
                raise RuntimeError("a replica failed to start")
        started = time.perf_counter()
        for process in processes:
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.flush()
        reports = []
        for process in processes:
            out, _ = process.communicate(timeout=timeout)
            if process.returncode != 0:
                raise RuntimeError(f"a replica exited with {process.returncode}")
            reports.append(json.loads(out.strip().splitlines()[-1]))
        return time.perf_counter() - started, reports
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)


# -- one scenario -----------------------------------------------------------------------


def scenario(
    name: str,
    db: str,
    folder: Path,
    *,
    count: int,
    replicas: int,
    concurrency: int,
    around_phase: Callable[[str], AbstractContextManager[Any]] = nullcontext,
) -> dict[str, Any]:
    """Pause ``count`` threads, then answer them from ``replicas`` processes (timed);
    ``around_phase("pause")`` and ``around_phase("answer")`` are entered around each
    phase's replicas (a probe)."""
    effects = str(folder / f"{name}-effects.log")
    with backend(db, setup=True):
        pass
    thread_ids = [f"{name}-{i:05d}" for i in range(count)]
    shares = [thread_ids[r::replicas] for r in range(replicas)]
    base = {"db": db, "effects": effects, "concurrency": concurrency}
    with around_phase("pause"):
        _, paused = run_replicas(
            [{**base, "phase": "pause", "items": share} for share in shares], 900
        )

    with backend(db) as (saver, authority):
        graph = build_graph(saver, authority, effects)
        pending = pending_approvals(authority, graph).snapshot.pending
        by_thread = {}
        for request in pending:
            stored = authority.get_stored_request(request.id)
            assert stored is not None and stored.thread_id is not None
            requested = authority.get_request(request.id)
            assert isinstance(requested, ApprovalRequested)
            decided = build_decision(requested, decision="approve", scope="once", actor=ACTOR)
            by_thread[stored.thread_id] = decided.to_json()
    if sorted(by_thread) != thread_ids:
        raise RuntimeError(f"{len(by_thread)} of {count} threads paused")

    jobs = [
        {**base, "phase": "answer", "items": [[t, by_thread[t]] for t in share]} for share in shares
    ]
    with around_phase("answer"):
        wall, reports = run_replicas(jobs, 900)

    latencies = sorted(x for report in reports for x in report["latencies"])
    errors = [e for report in reports for e in report["errors"]]
    ran = Counter(Path(effects).read_text().split()) if Path(effects).exists() else Counter()
    with backend(db) as (saver, authority):
        graph = build_graph(saver, authority, effects)
        still_pending = len(pending_approvals(authority, graph).snapshot.pending)
        unfinished = sum(1 for t in thread_ids if graph.get_state(thread_config(t)).next)
        unresolved = sum(
            1
            for t in thread_ids
            if (resolved := authority.get_resolution(_request_of(by_thread[t]))) is None
            or not resolved.approved
        )
    request_ids = {_request_of(by_thread[t]) for t in thread_ids}
    return {
        "name": name,
        "replicas": replicas,
        "concurrency": concurrency,
        "count": count,
        "wall_s": wall,
        "throughput": count / wall,
        "p50_ms": 1000 * statistics.median(latencies),
        "p99_ms": 1000 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))],
        "max_ms": 1000 * latencies[-1],
        "cpu_s": {
            "pause": sum(report["cpu"] for report in paused),
            "answer": sum(report["cpu"] for report in reports),
        },
        "lost": len(request_ids - set(ran)) + still_pending + unfinished + unresolved,
        "doubled": sum(1 for n in ran.values() if n > 1),
        "errors": errors[:5],
    }


def _request_of(decided: dict[str, Any]) -> str:
    return str(decided["decision"]["request_id"])


@contextmanager
def throwaway_cluster() -> Iterator[Any]:
    """The tests' throwaway server (``support.pg_cluster.PostgresCluster``), started."""
    sys.path.insert(0, str(ROOT / "tests"))
    from support.pg_cluster import PostgresCluster, find_bindir

    bindir = find_bindir()
    if bindir is None:
        raise SystemExit("PostgreSQL server binaries not found (apt-get install postgresql)")
    cluster = PostgresCluster(bindir)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@contextmanager
def throwaway_postgres() -> Iterator[str]:
    with throwaway_cluster() as cluster:
        yield cluster.create_database("bench")


def main() -> None:
    if "--replica" in sys.argv:
        replica(json.loads(sys.stdin.readline()))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=8, help="presenter threads a replica")
    parser.add_argument("--postgres", help="use this database instead of a throwaway cluster")
    parser.add_argument("--quick", action="store_true", help="200 approvals")
    parser.add_argument("--skip-sqlite", action="store_true")
    parser.add_argument("--skip-postgres", action="store_true")
    args = parser.parse_args()
    count = 200 if args.quick else args.count
    results = []
    with tempfile.TemporaryDirectory(prefix="aais-bench-") as scratch:
        folder = Path(scratch)
        if not args.skip_postgres:
            with ExitStack() as stack:
                url = args.postgres or stack.enter_context(throwaway_postgres())
                results.append(
                    scenario(
                        "postgres", url, folder, count=count, replicas=2,
                        concurrency=args.concurrency,
                    )
                )  # fmt: skip
        if not args.skip_sqlite:
            results.append(
                scenario(
                    "sqlite", str(folder / "bench.db"), folder, count=count, replicas=1,
                    concurrency=args.concurrency,
                )
            )  # fmt: skip
    print(f"bench_distributed  ({count} pending approvals, gate level: resume_with_decisions)")
    header = (
        f"{'backend':<10}{'replicas':>9}{'threads':>8}{'wall s':>8}{'approvals/s':>12}"
        f"{'p50 ms':>8}{'p99 ms':>8}{'max ms':>8}{'lost':>6}{'doubled':>8}"
    )
    print(header)
    for r in results:
        print(
            f"{r['name']:<10}{r['replicas']:>9}{r['concurrency'] * r['replicas']:>8}"
            f"{r['wall_s']:>8.2f}{r['throughput']:>12.1f}{r['p50_ms']:>8.1f}{r['p99_ms']:>8.1f}"
            f"{r['max_ms']:>8.1f}{r['lost']:>6}{r['doubled']:>8}"
        )
        for error in r["errors"]:
            print(f"   error: {error}")
    if any(r["lost"] or r["doubled"] or r["errors"] for r in results):
        raise SystemExit(1)


if __name__ == "__main__":
    main()

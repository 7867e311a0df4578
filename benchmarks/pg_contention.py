"""Where two Postgres replicas wait on each other: pg_stat_statements and wait events.

Run with ``python benchmarks/pg_contention.py [--count 300]``. Starts the
throwaway cluster of the tests with ``pg_stat_statements`` loaded, runs the
``bench_distributed`` Postgres scenario (2 replica processes), samples
``pg_stat_activity`` every 5 ms (active backends, and those idle in a
transaction, i.e. waiting on their client) while the approvals are answered, then prints
the statements by total time, the wait events seen, and ``EXPLAIN ANALYZE`` of
the counters' locking read.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import psycopg

import bench_distributed
from proc_cpu import cpu_seconds
from support import pg_cluster


def sample_waits(
    url: str,
    stop: threading.Event,
    into: Counter[str],
    holders: Counter[str] | None = None,
    *,
    own_cpu: list[float] | None = None,
) -> None:
    """Until ``stop``: every 5 ms, count backends in a transaction by wait event and
    query into ``into``, and what the backends others wait on do into ``holders``.
    ``own_cpu`` receives the CPU seconds of the sampler's own backend at the end
    (to take out of a measurement of the server's CPU)."""
    with psycopg.connect(url, autocommit=True) as conn:
        while not stop.is_set():
            # A backend idle in a transaction is waiting on its client (the Python
            # replica): counted too, since a lock it holds is held for that wait.
            rows = conn.execute(
                "SELECT CASE WHEN state = 'active' THEN coalesce(wait_event_type, 'CPU')"
                " || ':' || coalesce(wait_event, '-') ELSE 'Client:IdleInTransaction' END,"
                " left(regexp_replace(query, '\\s+', ' ', 'g'), 60)"
                " FROM pg_stat_activity WHERE datname = current_database()"
                " AND pid <> pg_backend_pid()"
                " AND state IN ('active', 'idle in transaction')"
            ).fetchall()
            for event, query in rows:
                into[f"{event:<28} {query}"] += 1
            if holders is None:
                time.sleep(0.005)
                continue
            # What the backends that others wait on are doing at that moment.
            blockers = conn.execute(
                "SELECT CASE WHEN b.state = 'active' THEN coalesce(b.wait_event_type, 'CPU')"
                " || ':' || coalesce(b.wait_event, '-') ELSE 'Client:IdleInTransaction' END,"
                " left(regexp_replace(b.query, '\\s+', ' ', 'g'), 60)"
                " FROM (SELECT DISTINCT unnest(pg_blocking_pids(pid)) AS pid"
                " FROM pg_stat_activity WHERE datname = current_database()"
                " AND wait_event_type = 'Lock') w JOIN pg_stat_activity b ON b.pid = w.pid"
            ).fetchall()
            for event, query in blockers:
                holders[f"{event:<28} {query}"] += 1
            time.sleep(0.005)
        if own_cpu is not None:
            own_cpu.append(cpu_seconds(conn.info.backend_pid))


def lock_wait_share(waits: Counter[str]) -> float:
    """The fraction of active-backend samples waiting on a lock (``wait_event_type`` Lock)."""
    active = {k: n for k, n in waits.items() if not k.startswith("Client:IdleIn")}
    locked = sum(n for k, n in active.items() if k.startswith("Lock:"))
    return locked / (sum(active.values()) or 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--count", type=int, default=300)
    args = parser.parse_args()
    pg_cluster._SERVER_SETTINGS += (  # type: ignore[attr-defined]
        "-c shared_preload_libraries=pg_stat_statements",
        "-c pg_stat_statements.track=all",
    )
    bindir = pg_cluster.find_bindir()
    assert bindir is not None
    cluster = pg_cluster.PostgresCluster(bindir)
    waits: Counter[str] = Counter()
    holders: Counter[str] = Counter()
    try:
        cluster.start()
        url = cluster.create_database("contention")
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION pg_stat_statements")
        stop = threading.Event()
        original = bench_distributed.run_replicas
        calls = []

        def sampled(jobs, timeout):  # type: ignore[no-untyped-def]
            calls.append(1)
            if jobs[0]["phase"] != "answer":
                return original(jobs, timeout)
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("SELECT pg_stat_statements_reset()")
            sampler = threading.Thread(target=sample_waits, args=(url, stop, waits, holders))
            sampler.start()
            try:
                return original(jobs, timeout)
            finally:
                stop.set()
                sampler.join()

        bench_distributed.run_replicas = sampled
        with tempfile.TemporaryDirectory() as tmp:
            result = bench_distributed.scenario(
                "pg", url, Path(tmp), count=args.count, replicas=2, concurrency=8
            )
        print(f"{result['count']} approvals, 2 replicas: {result['throughput']:.0f}/s")
        with psycopg.connect(url, autocommit=True) as conn:
            print("\nstatements by total time (answer phase)")
            for calls_, total, mean, query in conn.execute(
                "SELECT calls, total_exec_time, mean_exec_time,"
                " left(regexp_replace(query, '\\s+', ' ', 'g'), 90)"
                " FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 15"
            ).fetchall():
                print(f"  {calls_:>6} calls {total:>9.1f} ms total {mean:>7.3f} ms mean  {query}")
            with conn.transaction():
                plan = conn.execute(
                    "EXPLAIN (ANALYZE, BUFFERS) SELECT * FROM aais_meta FOR UPDATE"
                ).fetchall()
            print("\nEXPLAIN ANALYZE of the counters' locking read (uncontended)")
            for (line,) in plan:
                print("  " + line)
        print("\nbackends in a transaction by wait event (5 ms samples)")
        total = sum(waits.values()) or 1
        for key, n in waits.most_common(15):
            print(f"  {n / total:>6.1%}  {key}")
        locked = sum(n for k, n in waits.items() if k.startswith("Lock:"))
        print(
            f"\nwaiting on a lock: {lock_wait_share(waits):.1%} of active"
            f" backend samples, {locked / total:.1%} of those in a transaction"
        )
        print("\nwhat the backends others wait on are doing (5 ms samples)")
        total = sum(holders.values()) or 1
        for key, n in holders.most_common(8):
            print(f"  {n / total:>6.1%}  {key}")
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()

"""Benchmark: audited Postgres ledger writes from 2 processes, stamped by the server vs locked.

Run with ``python benchmarks/pg_ledger_writes.py [--per-thread 25] [--rounds 2]``.
Ledger only (no graph, no checkpointer): each of 2 processes runs 8 threads that
add a request and record its resolution, on one throwaway cluster. ``stamped``
is the ledger as set up (``aais_stamp`` fills the counters in the statement sent
with ``COMMIT``); ``locked`` is the same code on a database without the function,
where the counters' row is held for one client round trip. Rounds alternate.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def worker(url: str, tag: str, per_thread: int) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from aais_langgraph.ledger.postgres import PostgresLedger
    from ledger.envelopes import approval, request_envelope

    with PostgresLedger.from_conn_string(url, pool_size=8) as ledger:
        shares = [
            [request_envelope(f"apr_{tag}_{t}_{i}") for i in range(per_thread)] for t in range(8)
        ]

        def run(share: list[dict[str, object]]) -> None:
            for requested in share:
                ledger.add_request(requested)
                ledger.record_resolution(approval(requested))

        print("ready", flush=True)
        sys.stdin.readline()
        threads = [threading.Thread(target=run, args=(share,)) for share in shares]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        print("done", flush=True)


def one_round(url: str, per_thread: int) -> float:
    """Resolutions (each with its request) per second from 2 processes of 8 threads."""
    command = [sys.executable, __file__, "--worker", url]
    processes = [
        subprocess.Popen(
            [*command, str(n), str(per_thread)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in range(2)
    ]
    for process in processes:
        assert process.stdout is not None and process.stdout.readline().strip() == "ready"
    started = time.perf_counter()
    for process in processes:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    for process in processes:
        process.communicate(timeout=600)
        if process.returncode != 0:
            raise RuntimeError(f"a worker exited with {process.returncode}")
    return 2 * 8 * per_thread / (time.perf_counter() - started)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--per-thread", type=int, default=25)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))
    import psycopg

    from aais_langgraph.ledger.postgres import PostgresLedger
    from support.pg_cluster import PostgresCluster, find_bindir

    bindir = find_bindir()
    if bindir is None:
        raise SystemExit("PostgreSQL server binaries not found")
    cluster = PostgresCluster(bindir)
    results: dict[str, list[float]] = {"stamped": [], "locked": []}
    try:
        cluster.start()
        for index in range(args.rounds):
            order = ["stamped", "locked"] if index % 2 == 0 else ["locked", "stamped"]
            for kind in order:
                url = cluster.create_database(f"writes_{kind}_{index}")
                with PostgresLedger.from_conn_string(url) as ledger:
                    ledger.setup()
                if kind == "locked":
                    with psycopg.connect(url, autocommit=True) as conn:
                        conn.execute("DROP FUNCTION aais_stamp(jsonb)")
                results[kind].append(one_round(url, args.per_thread))
    finally:
        cluster.stop()
    load = os.getloadavg()[0]
    print(f"pg_ledger_writes (2 processes x 8 threads, {args.per_thread} each; load {load:.1f})")
    for kind, rates in results.items():
        print(f"  {kind:<8} " + ", ".join(f"{rate:.0f}/s" for rate in rates))
    print(json.dumps(results))


if __name__ == "__main__":
    main()

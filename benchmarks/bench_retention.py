"""Soak: many approvals into one SQLite ledger with retention; file size and verify time stay flat.

Each approval is a request and an approving decision through the authority (the
gate's path, durable writes). Every ``--every`` approvals the ledger is compacted
to the ``--keep-last`` most recent resolved requests. At every ``--report``
approvals it prints the file size (main file and WAL, after a checkpoint), the
pages SQLite has free for reuse, and how long ``audit verify`` takes. With
``--no-retention`` it never compacts: the baseline the figures are compared with.

    python benchmarks/bench_retention.py --approvals 100000 --keep-last 10000
    python benchmarks/bench_retention.py --approvals 30000 --no-retention
"""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import cast

from aais_langgraph.authority import ApprovalAuthority, RequestLimits
from aais_langgraph.ledger import SqliteLedger
from aais_langgraph.ledger.retention import RetentionPolicy
from aais_langgraph.ledger.sqlite import Synchronous
from aais_langgraph.protocol import build_decision

ACTION = {"kind": "tool_call", "name": "shell", "summary": "Run ls", "arguments": {"command": "ls"}}
ACTOR = {"id": "user_alex", "type": "human"}


def _sizes(path: Path) -> tuple[int, int, int]:
    """``(file bytes, wal bytes, free pages)`` after a WAL checkpoint."""
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        free = int(conn.execute("PRAGMA freelist_count").fetchone()[0])
    wal = path.with_name(path.name + "-wal")
    return path.stat().st_size, wal.stat().st_size if wal.exists() else 0, free


def soak(
    path: Path, approvals: int, keep_last: int | None, every: int, report: int, synchronous: str
) -> None:
    policy = None if keep_last is None else RetentionPolicy(keep_last=keep_last)
    print(
        f"approvals={approvals} keep_last={keep_last} every={every} synchronous={synchronous}",
        flush=True,
    )
    print("approvals  file_MB  wal_MB  free_pages  verify_s  entries  compact_s  rate/s")
    with SqliteLedger.from_conn_string(path, synchronous=cast(Synchronous, synchronous)) as ledger:
        authority = ApprovalAuthority(ledger, limits=RequestLimits.unbounded())
        compact_seconds = 0.0
        started = time.perf_counter()
        window = started
        for number in range(1, approvals + 1):
            requested = authority.request(
                ACTION,
                origin={"harness": "bench", "session_id": f"sess_{number % 50}"},
                request_id=f"apr_{number:08d}",
            )
            authority.decide(
                build_decision(requested, decision="approve", scope="once", actor=ACTOR)
            )
            if policy is not None and number % every == 0:
                moment = time.perf_counter()
                ledger.compact_history(policy, now=time.time())
                compact_seconds += time.perf_counter() - moment
            if number % report == 0 or number == approvals:
                rate = report / (time.perf_counter() - window)
                moment = time.perf_counter()
                result = authority.verify_audit()
                verify_seconds = time.perf_counter() - moment
                assert result.ok, result
                size, wal, free = _sizes(path)
                print(
                    f"{number:9d}  {size / 1e6:7.2f}  {wal / 1e6:6.2f}  {free:10d}  "
                    f"{verify_seconds:8.3f}  {result.checked:7d}  {compact_seconds:9.2f}  "
                    f"{rate:6.0f}",
                    flush=True,
                )
                compact_seconds = 0.0
                window = time.perf_counter()
        print(f"total {time.perf_counter() - started:.1f}s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--approvals", type=int, default=100_000)
    parser.add_argument("--keep-last", type=int, default=10_000)
    parser.add_argument("--no-retention", action="store_true")
    parser.add_argument("--every", type=int, default=1000, help="compact every N approvals")
    parser.add_argument("--report", type=int, default=10_000, help="report every N approvals")
    parser.add_argument("--synchronous", default="FULL", choices=("OFF", "NORMAL", "FULL"))
    parser.add_argument("--db", type=Path, help="the ledger file (default: a temporary one)")
    args = parser.parse_args()
    keep = None if args.no_retention else args.keep_last
    if args.db is not None:
        soak(args.db, args.approvals, keep, args.every, args.report, args.synchronous)
        return
    with tempfile.TemporaryDirectory() as directory:
        soak(
            Path(directory) / "ledger.db",
            args.approvals,
            keep,
            args.every,
            args.report,
            args.synchronous,
        )


if __name__ == "__main__":
    main()

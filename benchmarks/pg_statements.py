"""Benchmark: statements and transactions per approval on Postgres, ledger and checkpointer.

Run with ``python benchmarks/pg_statements.py [--count 100] [--top 25]``.

The ``bench_distributed`` graph (one gated node, gate level: ``graph.invoke`` pauses,
``resume_with_decisions`` answers), one approval at a time in this process, on the
tests' throwaway cluster with ``log_statement = all``: every statement a client
sends is one line of the server's log, ``BEGIN``, ``SET`` and ``COMMIT`` included
(a function's inner statements are not). The ledger and the checkpointer each get
a database of their own, so every statement and transaction is told apart by
database: statements from the log lines (prefixed with the database),
transactions from ``pg_stat_database`` (commits + rollbacks, read after the
phase's connections have closed, which flushes their statistics). Only the two
phases are counted (the pausing runs and the answers); finding each request's
decision in between is not. ``--top`` lists the ledger's statements by calls
per approval.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

import bench_distributed
from aais_langgraph import (
    ApprovalAuthority,
    ApprovalRequested,
    build_decision,
    resume_with_decisions,
)
from aais_langgraph.ledger.postgres import PostgresLedger
from support import pg_cluster

ACTOR = bench_distributed.ACTOR
DATABASES = ("ledger", "checkpoints")

_TRANSACTIONS = (
    "SELECT datname, xact_commit + xact_rollback FROM pg_stat_database"
    " WHERE datname IN ('ledger', 'checkpoints')"
)
_LOGGED = re.compile(r"^(\w+)\|LOG:  (?:statement|execute [^:]*): (.*)$")


def logged_statements(log: Path, start: int, end: int) -> Counter[tuple[str, str]]:
    """Statements the server logged between two offsets of its log, by (database, text)."""
    with log.open("rb") as handle:
        handle.seek(start)
        text = handle.read(end - start).decode("utf-8", errors="replace")
    statements: Counter[tuple[str, str]] = Counter()
    for line in text.splitlines():
        match = _LOGGED.match(line)
        if match is not None and match.group(1) in DATABASES:
            statements[(match.group(1), " ".join(match.group(2).split())[:100])] += 1
    return statements


def transactions_so_far(admin: psycopg.Connection[Any]) -> Counter[str]:
    """Transactions (committed or rolled back) of each database, so far."""
    rows = admin.execute(_TRANSACTIONS).fetchall()
    return Counter({str(database): int(count) for database, count in rows})


@contextmanager
def backend(urls: dict[str, str]) -> Iterator[tuple[Any, ApprovalAuthority]]:
    """A ``PostgresSaver`` on one database and the ledger on the other, pools closed on exit."""
    from langgraph.checkpoint.postgres import PostgresSaver

    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    with (
        ConnectionPool(urls["checkpoints"], min_size=1, max_size=2, kwargs=kwargs) as saver_pool,
        ConnectionPool(urls["ledger"], min_size=1, max_size=2, kwargs=kwargs) as ledger_pool,
    ):
        saver: Any = PostgresSaver(saver_pool)  # type: ignore[arg-type]
        yield saver, ApprovalAuthority(PostgresLedger(ledger_pool))


def measure(
    urls: dict[str, str], admin: psycopg.Connection[Any], log: Path, count: int, effects: str
) -> tuple[Counter[tuple[str, str]], Counter[str]]:
    """Pause ``count`` threads, then answer them; the two phases' statement and
    transaction counts (summed), by database."""
    with backend(urls) as (saver, authority):
        saver.setup()
        authority.ledger.setup()
    thread_ids = [f"t-{i:05d}" for i in range(count)]
    statements: Counter[tuple[str, str]] = Counter()
    transactions: Counter[str] = Counter()

    def counted(phase: Any) -> None:
        time.sleep(1.0)  # backends of the last phase have exited and flushed their statistics
        before, start = transactions_so_far(admin), log.stat().st_size
        phase()
        time.sleep(1.0)
        statements.update(logged_statements(log, start, log.stat().st_size))
        transactions.update(transactions_so_far(admin) - before)

    def pause() -> None:
        with backend(urls) as (saver, authority):
            graph = bench_distributed.build_graph(saver, authority, effects)
            for thread_id in thread_ids:
                config = bench_distributed.thread_config(thread_id)
                graph.invoke({"command": f"deploy {thread_id}"}, config)

    counted(pause)
    decisions = {}
    with backend(urls) as (saver, authority):
        for thread_id in thread_ids:
            [stored] = authority.ledger.list_pending(thread_id=thread_id)
            requested = authority.get_request(stored.request_id)
            assert isinstance(requested, ApprovalRequested)
            decided = build_decision(requested, decision="approve", scope="once", actor=ACTOR)
            decisions[thread_id] = decided.to_json()

    def answer() -> None:
        with backend(urls) as (saver, authority):
            graph = bench_distributed.build_graph(saver, authority, effects)
            for thread_id in thread_ids:
                [resolved] = resume_with_decisions(
                    graph, bench_distributed.thread_config(thread_id), [decisions[thread_id]],
                    actor=ACTOR, authority=authority, lease_wait=60.0,
                )  # fmt: skip
                if not resolved.approved:
                    raise SystemExit(f"{thread_id}: {resolved.resolution.outcome}")

    counted(answer)
    ran = Path(effects).read_text().split()
    if len(ran) != count or len(set(ran)) != count:
        raise SystemExit(f"{len(ran)} actions ran for {count} approvals")
    return statements, transactions


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--count", type=int, default=100, help="approvals")
    parser.add_argument("--top", type=int, default=25, help="ledger statements listed")
    args = parser.parse_args()
    bindir = pg_cluster.find_bindir()
    if bindir is None:
        raise SystemExit("PostgreSQL server binaries not found (apt-get install postgresql)")
    cluster = pg_cluster.PostgresCluster(bindir)
    try:
        cluster.start()
        urls = {name: cluster.create_database(name) for name in DATABASES}
        with psycopg.connect(cluster.url(), autocommit=True) as admin:
            admin.execute("ALTER SYSTEM SET log_statement = 'all'")
            admin.execute("ALTER SYSTEM SET log_line_prefix = '%d|'")
            admin.execute("SELECT pg_reload_conf()")
            with tempfile.TemporaryDirectory(prefix="aais-pg-statements-") as scratch:
                effects = str(Path(scratch) / "effects.log")
                statements, transactions = measure(urls, admin, cluster.log, args.count, effects)
    finally:
        cluster.stop()
    per = 1 / args.count
    print(f"pg_statements ({args.count} approvals, one at a time; per approval: pause + answer)")
    for database in DATABASES:
        calls = sum(n for (db, _), n in statements.items() if db == database)
        print(
            f"  {database:<12} statements {calls * per:6.2f}   transactions"
            f" {transactions[database] * per:6.2f}"
        )
    print(f"\nledger statements per approval (top {args.top})")
    ledger = [(n, query) for (db, query), n in statements.items() if db == "ledger" and n]
    for n, query in sorted(ledger, reverse=True)[: args.top]:
        print(f"  {n * per:6.2f}  {query}")


if __name__ == "__main__":
    main()

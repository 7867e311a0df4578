"""Benchmark: CPU-seconds per approval across every process, Postgres vs SQLite, and a shard model.

Run with ``python benchmarks/pg_scale.py [--count 1000] [--rounds 5]``.

Throughput on a 2-core box whose server shares the cores cannot show scale-out, so
this measures what can be: the ``bench_distributed`` scenario (pause N threads,
then answer them, gate level) with

- Postgres: 2 replica processes x ``--concurrency`` presenter threads on the tests'
  throwaway cluster (``fsync=off``). CPU is the replicas' (``os.times`` over the
  answering phase) plus every server process's (``/proc``: postmaster, backends,
  background workers, before and after; the sampler's own backend taken out).
  ``pg_stat_activity`` is sampled every 5 ms meanwhile: the lock-wait share is
  the fraction of active backends whose ``wait_event_type`` is ``Lock``.
- SQLite: 1 process x ``--concurrency`` threads on one file (``synchronous=FULL``).

Rounds alternate the two (order flipped each round, a fresh database each);
figures are medians with min-max. The model at the end combines the server's
CPU per approval, the audited (stamped) writes per approval, the uncontended
server time of one ``aais_stamp`` and the ``fdatasync`` time of this disk into
what one authority stream and one primary carry, and N shards.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import psycopg

import bench_distributed
from pg_contention import lock_wait_share, sample_waits
from proc_cpu import server_cpu_seconds

ROOT = Path(__file__).resolve().parents[1]
PHASES = ("pause", "answer")
"""A whole approval: the run that pauses (the request) and the run that answers."""
DURABLE_STAMPS = 2
"""Stamped writes of an approval that wait for their WAL flush: the request and the
resolution (the execution marks commit with ``synchronous_commit`` off)."""

_STATS = """SELECT
    (SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()),
    (SELECT wal_bytes FROM pg_stat_wal),
    (SELECT count(*) FROM aais_audit),
    (SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions WHERE funcname = 'aais_stamp')"""


def _stats(url: str) -> tuple[float, ...]:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(_STATS).fetchone()
    assert row is not None
    return tuple(float(value) for value in row)


class PostgresProbe:
    """Around each phase: server CPU, lock-wait samples, commits, WAL, stamps (by phase)."""

    def __init__(self, data_dir: Path, url: str) -> None:
        self.data_dir = data_dir
        self.url = url
        self.figures: dict[str, dict[str, float]] = {}

    @contextmanager
    def measure(self, phase: str) -> Iterator[None]:
        time.sleep(0.5)  # the pausing replicas' backends have flushed their statistics
        before = _stats(self.url)
        cpu = server_cpu_seconds(self.data_dir)
        stop = threading.Event()
        waits: Counter[str] = Counter()
        sampler_cpu: list[float] = []
        sampler = threading.Thread(
            target=sample_waits, args=(self.url, stop, waits), kwargs={"own_cpu": sampler_cpu}
        )
        sampler.start()
        try:
            yield
        finally:
            stop.set()
            sampler.join()
        time.sleep(0.5)  # the replicas' backends exit and are reaped
        cpu = server_cpu_seconds(self.data_dir) - cpu - sum(sampler_cpu)
        after = _stats(self.url)
        commits, wal, audits, stamps = (b - a for a, b in zip(before, after, strict=True))
        self.figures[phase] = {
            "server_cpu_s": cpu,
            "lock_share": lock_wait_share(waits),
            "samples": float(sum(waits.values())),
            "commits": commits,
            "wal_bytes": wal,
            "audits": audits,
            "stamps": stamps,
        }


def postgres_round(
    cluster: Any, name: str, folder: Path, count: int, concurrency: int
) -> dict[str, Any]:
    url = cluster.create_database(name)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"ALTER DATABASE {name} SET track_functions = 'pl'")
    probe = PostgresProbe(cluster.data, url)
    result = bench_distributed.scenario(
        name, url, folder, count=count, replicas=2, concurrency=concurrency,
        around_phase=probe.measure,
    )  # fmt: skip
    return {**result, "server": probe.figures}


def cpu_ms_per_approval(result: dict[str, Any], phases: tuple[str, ...] = PHASES) -> float:
    """CPU ms per approval of one scenario: its replicas', and its server's if it had one."""
    cpu = sum(result["cpu_s"][phase] for phase in phases)
    if "server" in result:
        cpu += sum(result["server"][phase]["server_cpu_s"] for phase in phases)
    return 1000 * cpu / result["count"]


def stamp_uncontended_ms(cluster: Any, writes: int = 200) -> float:
    """Mean server time of one ``aais_stamp`` with no other writer (its lock is free)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from aais_langgraph.ledger.postgres import PostgresLedger
    from ledger.envelopes import approval, request_envelope

    url = cluster.create_database("stamp_alone")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ALTER DATABASE stamp_alone SET track_functions = 'pl'")
    with PostgresLedger.from_conn_string(url) as ledger:
        ledger.setup()
        for i in range(writes // 2):
            requested = request_envelope(f"apr_alone_{i}")
            ledger.add_request(requested)
            ledger.record_resolution(approval(requested))
    time.sleep(0.7)  # the ledger's backend has exited and flushed its statistics
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT calls, total_time FROM pg_stat_user_functions WHERE funcname = 'aais_stamp'"
        ).fetchone()
    assert row is not None and row[0] > 0, "aais_stamp was not tracked"
    return float(row[1]) / float(row[0])


def fdatasync_ms(folder: Path, count: int = 200) -> float:
    """Median time to write one 8 kB page and ``fdatasync`` it (one WAL flush) on this disk."""
    path = folder / "fsync-probe"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    page = os.urandom(8192)
    times = []
    try:
        for _ in range(count):
            started = time.perf_counter()
            os.pwrite(fd, page, 0)
            os.fdatasync(fd)
            times.append(time.perf_counter() - started)
    finally:
        os.close(fd)
        path.unlink()
    return 1000 * statistics.median(times)


def spread(values: list[float], unit: str = "", digits: int = 2) -> str:
    return (
        f"{statistics.median(values):.{digits}f}{unit} "
        f"({min(values):.{digits}f}-{max(values):.{digits}f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--count", type=int, default=1000, help="approvals a round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=8, help="presenter threads a replica")
    parser.add_argument(
        "--cores", type=int, default=8, help="model: cores of one primary (default 8)"
    )
    args = parser.parse_args()
    count = args.count
    postgres: list[dict[str, Any]] = []
    sqlite: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="aais-pg-scale-") as scratch:
        folder = Path(scratch)
        fsync = fdatasync_ms(folder)
        with bench_distributed.throwaway_cluster() as cluster:
            for index in range(args.rounds):
                order = ["postgres", "sqlite"] if index % 2 == 0 else ["sqlite", "postgres"]
                for kind in order:
                    name = f"{kind}{index}"
                    if kind == "postgres":
                        result = postgres_round(cluster, name, folder, count, args.concurrency)
                        postgres.append(result)
                    else:
                        db = str(folder / f"{name}.db")
                        result = bench_distributed.scenario(
                            name, db, folder, count=count, replicas=1,
                            concurrency=args.concurrency,
                        )  # fmt: skip
                        sqlite.append(result)
                    if result["lost"] or result["doubled"] or result["errors"]:
                        raise SystemExit(f"{name}: lost/doubled/errors {result}")
                    print(f"  round {index} {kind}: done", file=sys.stderr, flush=True)
            stamp = stamp_uncontended_ms(cluster)

    report(postgres, sqlite, count=count, concurrency=args.concurrency, cores=args.cores,
           stamp=stamp, fsync=fsync)  # fmt: skip


def report(
    postgres: list[dict[str, Any]],
    sqlite: list[dict[str, Any]],
    *,
    count: int,
    concurrency: int,
    cores: int,
    stamp: float,
    fsync: float,
) -> None:
    ms = 1000 / count
    print(
        f"pg_scale ({count} approvals, {len(postgres)} rounds interleaved; Postgres 2 replicas"
        f" x {concurrency} threads, SQLite 1 x {concurrency}; {os.cpu_count()} cores)"
    )
    print("CPU ms per approval (median (min-max)); whole = pause phase + answer phase")
    totals: dict[str, list[float]] = {}
    for phases, label in ((("answer",), "answer"), (("pause", "answer"), "whole")):
        lite = [sum(r["cpu_s"][p] for p in phases) * ms for r in sqlite]
        replica = [sum(r["cpu_s"][p] for p in phases) * ms for r in postgres]
        server = [sum(r["server"][p]["server_cpu_s"] for p in phases) * ms for r in postgres]
        total = [a + b for a, b in zip(replica, server, strict=True)]
        ratios = [p / s for p, s in zip(total, lite, strict=True)]
        totals[label] = server
        print(
            f"  {label:<7} SQLite {spread(lite)} | Postgres replicas {spread(replica)}"
            f" + server {spread(server)} = {spread(total)} | ratio {spread(ratios, 'x')}"
            " (aim <= 1.3x)"
        )
    shares = [100 * r["server"]["answer"]["lock_share"] for r in postgres]
    samples = statistics.median(r["server"]["answer"]["samples"] for r in postgres)
    print(
        f"lock-wait share of active backends, answer phase, {2 * concurrency} presenters /"
        f" 2 replicas: {spread(shares, '%', 1)} (aim <= 5%; {samples:.0f} samples a round)"
    )
    print(
        f"approvals/s (answer phase): Postgres {spread([r['throughput'] for r in postgres], '', 0)}"
        f", SQLite {spread([r['throughput'] for r in sqlite], '', 0)}"
    )

    def per_approval(key: str) -> float:
        return statistics.median(
            sum(r["server"][p][key] for p in ("pause", "answer")) / count for r in postgres
        )

    transactions, wal = per_approval("commits"), per_approval("wal_bytes")
    audits, stamps = per_approval("audits"), per_approval("stamps")
    server = statistics.median(totals["whole"])
    print("\nper approval, whole (Postgres, medians)")
    print(
        f"  transactions {transactions:.1f} (reads included), WAL {wal / 1024:.1f} kB,"
        f" audit entries {audits:.1f}, stamped writes {stamps:.1f}"
    )
    print(f"  aais_stamp alone {stamp:.3f} ms server time; fdatasync of 8 kB here {fsync:.3f} ms")

    # One stream: its audited writes are serial (each holds the chain's row from its
    # stamp until its commit ends; a durable one's after its WAL flush), so a stream
    # carries at most this many.
    stream = 1000 / (stamps * stamp + DURABLE_STAMPS * fsync)
    per_core = 1000 / server
    primary = cores * per_core
    print("\nmodel (docs/deployment.md states its assumptions)")
    print(
        f"  one stream, synchronous_commit=on: <= {stream:.0f} approvals/s under the chain's"
        f" lock: {stamps:.1f} stamps x {stamp:.3f} ms + {DURABLE_STAMPS} flushes x {fsync:.3f} ms"
    )
    print(
        f"  one primary: {per_core:.0f} approvals/s per server core; {cores} cores"
        f" <= {primary:.0f}/s, WAL {primary * wal / 2**20:.1f} MB/s"
    )
    for shards in (1, 2, 4, 8, 16):
        one = min(shards * stream, primary)
        many = shards * min(stream, primary)
        print(
            f"  {shards:>2} streams: on one {cores}-core primary <= {one:.0f}/s;"
            f" a primary each <= {many:.0f}/s"
        )


if __name__ == "__main__":
    main()

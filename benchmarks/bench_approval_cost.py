"""Benchmark: what an approval costs, every row next to its baseline, in one run.

Run with ``python benchmarks/bench_approval_cost.py`` (``--quick``: about two minutes;
``--only ROW`` to run some rows; ``--profile``/``--phases TRIPS`` to look inside
one round trip instead). It reuses the pieces of ``bench_gate.py``,
``bench_distributed.py`` and ``bench_agui.py``; every gated figure is measured
alternating with its baseline (order flipped every round), and each row reports
the median ratio with its min-max over the rounds.

Rows:

- ``trip-sqlite`` / ``trip-memory``: approval round trip (``request_approval`` ->
  interrupt -> decision -> ``resume_with_decisions``) vs a bare ``interrupt()`` /
  ``Command(resume=...)`` round trip on the same checkpointer (SqliteSaver +
  SqliteLedger on files, ``synchronous=FULL``; InMemorySaver + InMemoryLedger).
- ``grant``: an action a standing grant covers vs the same node ungated (SQLite).
- ``inbox``: ``pending_approvals`` (default: reconciled) with 10k vs 1k paused
  threads (``--quick``: 2k vs 200), 5x resolved history each; rounds alternate
  the two sizes.
- ``distributed``: N approvals answered concurrently, Postgres with 2 replica
  processes vs SQLite with 1 (throwaway cluster, as in the tests; rounds
  alternate the backends, a fresh database each round).
- ``agui``: one AG-UI run of the gated demo graph (the pausing run, and the
  answering run) vs a plain ag-ui-langgraph run, sequential runs alternating.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_agui
import bench_distributed
import bench_gate
from bench_gate import Comparison
from round_trip_phases import phases
from round_trip_profile import profile

ROWS = ("trip-sqlite", "trip-memory", "grant", "inbox", "distributed", "agui")


def spread(values: list[float]) -> tuple[float, float, float]:
    return statistics.median(values), min(values), max(values)


SHOWN: list[tuple[str, str, float, float, tuple[float, float, float], str]] = []
"""Every row shown, for ``--markdown``."""


def show(
    name: str, unit: str, base: float, gated: float, ratio: tuple[float, float, float], aim: str
) -> None:
    mid, low, high = ratio
    SHOWN.append((name, unit, base, gated, ratio, aim))
    print(
        f"{name:<50}{base:>10.2f}{gated:>10.2f} {unit:<6}{mid:>6.2f}x"
        f"  ({low:.2f}-{high:.2f})   {aim}",
        flush=True,
    )


def markdown() -> str:
    """The rows shown, as the README's benchmark table."""
    lines = ["| row | baseline | gated | ratio (min-max) | aim |", "|---|---:|---:|---|---|"]
    for name, unit, base, gated, (mid, low, high), aim in SHOWN:
        lines.append(
            f"| {name} | {base:.2f} {unit} | {gated:.2f} {unit} "
            f"| {mid:.2f}x ({low:.2f}-{high:.2f}) | {aim} |"
        )
    return "\n".join(lines)


# -- round trip and grant (bench_gate) ---------------------------------------------------


def gate_rows(rows: list[str], directory: Path, *, batches: int, size: int) -> None:
    def row(name: str, comparison: Comparison, aim: str) -> None:
        show(
            name,
            "ms/op",
            comparison.baseline * 1e3,
            comparison.gated * 1e3,
            (comparison.ratio, comparison.low, comparison.high),
            aim,
        )

    if "trip-sqlite" in rows:
        trip = bench_gate.round_trip("sqlite", directory, batches=batches, size=size)
        row("approval round trip vs bare, SQLite", trip, "<= 1.3x")
    if "trip-memory" in rows:
        trip = bench_gate.round_trip("memory", directory, batches=batches, size=size)
        row("approval round trip vs bare, InMemorySaver", trip, "<= 1.5x")
    if "grant" in rows:
        grant = bench_gate.grant_path(directory, batches=batches, size=size)
        row("grant-covered action vs ungated, SQLite", grant, "<= 1.10x")


# -- pending_approvals -------------------------------------------------------------------


def inbox_row(directory: Path, *, small: int, large: int, rounds: int) -> None:
    """Seed both inboxes once (not timed), then time the two listings alternately."""
    with seeded_inbox(directory, small) as list_small, seeded_inbox(directory, large) as list_large:
        list_small()
        list_large()
        smalls: list[float] = []
        larges: list[float] = []
        for index in range(rounds):
            order = [(list_small, smalls), (list_large, larges)]
            for fn, into in order if index % 2 == 0 else reversed(order):
                start = time.perf_counter()
                fn()
                into.append(time.perf_counter() - start)
    ratios = [b / a for a, b in zip(smalls, larges, strict=True)]
    show(
        f"pending_approvals {large // 1000 if large >= 1000 else large}"
        f"{'k' if large >= 1000 else ''} vs {small} paused",
        "ms",
        statistics.median(smalls) * 1e3,
        statistics.median(larges) * 1e3,
        spread(ratios),
        f"<= {large / small * 1.1:.0f}x, large <= {large / 20_000:.2f} s",
    )


@contextmanager
def seeded_inbox(directory: Path, pending: int) -> Iterator[Callable[[], Any]]:
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    from aais_langgraph import (
        ApprovalAuthority,
        ApprovalRequested,
        SqliteLedger,
        build_decision,
        pending_approvals,
    )

    path = directory / f"inbox12-{pending}.db"
    conn = sqlite3.connect(path, check_same_thread=False)
    conn.execute("PRAGMA synchronous = OFF")  # seeding speed only; reads are timed
    saver = SqliteSaver(conn)
    saver.setup()
    with SqliteLedger.from_path(path, synchronous="OFF") as ledger:
        ledger.setup()
        authority = ApprovalAuthority(ledger)
        graph = bench_gate.gated_graph(saver, authority)
        history = 5 * pending
        for i in range(pending):  # finished threads: resolved history in the checkpointer too
            config = {"configurable": {"thread_id": f"done-{i}"}}
            paused = graph.invoke({"command": f"ls {i}"}, config)
            requested = ApprovalRequested.from_data(paused["__interrupt__"][0].value)
            decided = build_decision(requested, decision="deny", actor=bench_gate.ACTOR)
            bench_gate.resume_with_decisions(
                graph, config, decided, actor=bench_gate.ACTOR, authority=authority
            )
        for i in range(history - pending):  # the rest: resolved ledger requests, no thread
            requested = authority.request(
                bench_gate.shell_action(f"cat {i}"),
                origin={"harness": "bench", "session_id": f"s{i}"},
            )
            authority.decide(build_decision(requested, decision="approve", actor=bench_gate.ACTOR))
        for i in range(pending):
            graph.invoke({"command": f"ls {i}"}, {"configurable": {"thread_id": f"wait-{i}"}})

        def listing() -> Any:
            shown = pending_approvals(authority, graph)
            assert len(shown.snapshot.pending) == pending
            return shown

        yield listing
    conn.close()


# -- distributed -------------------------------------------------------------------------


def distributed_row(directory: Path, *, count: int, rounds: int, concurrency: int) -> None:
    postgres: list[float] = []
    sqlite: list[float] = []
    with bench_distributed.throwaway_postgres() as url:
        base_url = url.rsplit("/", 1)[0]
        for index in range(rounds):
            order = ["postgres", "sqlite"] if index % 2 == 0 else ["sqlite", "postgres"]
            for kind in order:
                name = f"{kind}{index}"
                if kind == "postgres":
                    db = _create_database(base_url, f"bench{index}")
                    result = bench_distributed.scenario(
                        name, db, directory, count=count, replicas=2, concurrency=concurrency
                    )
                    postgres.append(result["throughput"])
                else:
                    db = str(directory / f"dist-{index}.db")
                    result = bench_distributed.scenario(
                        name, db, directory, count=count, replicas=1, concurrency=concurrency
                    )
                    sqlite.append(result["throughput"])
                if result["lost"] or result["doubled"] or result["errors"]:
                    raise SystemExit(f"{name}: lost/doubled/errors {result}")
    ratios = [p / s for p, s in zip(postgres, sqlite, strict=True)]
    show(
        f"{count} approvals: Postgres 2 procs vs SQLite 1",
        "/s",
        statistics.median(sqlite),
        statistics.median(postgres),
        spread(ratios),
        ">= 1.5x",
    )
    print(
        f"{'':<44}postgres {min(postgres):.0f}-{max(postgres):.0f}/s, "
        f"sqlite {min(sqlite):.0f}-{max(sqlite):.0f}/s"
    )


def _create_database(base_url: str, name: str) -> str:
    import psycopg

    with psycopg.connect(f"{base_url}/postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{base_url}/{name}"


# -- AG-UI -------------------------------------------------------------------------------


def agui_row(directory: Path, *, rounds: int, per_round: int) -> None:
    """Gated runs against two baselines: the stock agent, which builds the graph's JSON
    Schemas on every run (``aais_agui`` does it once per graph), and the stock agent
    doing that once too, which leaves the approval layer's own cost."""
    with (
        bench_agui.server(directory / "agui-aais", plain=False) as aais_url,
        bench_agui.server(directory / "agui-plain", plain=True) as stock_url,
        bench_agui.server(directory / "agui-once", plain=True, schema_keys_once=True) as once_url,
    ):
        asyncio.run(bench_agui._warm(aais_url, stock_url))
        asyncio.run(bench_agui._warm(aais_url, once_url))
        plain, pause, answer = asyncio.run(
            _agui_rounds(aais_url, {"stock": stock_url, "once": once_url}, rounds, per_round)
        )
    for baseline, label in (("stock", "stock"), ("once", "stock, schemas once")):
        for name, gated in (("pausing", pause), ("answering", answer)):
            show(
                f"AG-UI {name} run vs {label}",
                "ms",
                statistics.median(plain[baseline]) * 1e3,
                statistics.median(gated) * 1e3,
                spread([g / b for g, b in zip(gated, plain[baseline], strict=True)]),
                "<= 1.05x",
            )


async def _agui_rounds(
    aais_url: str, baselines: dict[str, str], rounds: int, per_round: int
) -> tuple[dict[str, list[float]], list[float], list[float]]:
    """Per round: median seconds of each baseline's plain runs, of pausing and of answering
    runs (all sequential; the order rotates every round)."""
    plain: dict[str, list[float]] = {name: [] for name in baselines}
    pause: list[float] = []
    answer: list[float] = []
    clients = {name: bench_agui.client_for(url, 2, token=False) for name, url in baselines.items()}
    async with bench_agui.client_for(aais_url, 2, token=True) as aais:

        def plain_batch(name: str) -> Callable[[], Awaitable[None]]:
            async def batch() -> None:
                times = []
                for _ in range(per_round):
                    thread = f"plain_{uuid.uuid4().hex[:12]}"
                    body = bench_agui.run_agent_input(thread, text=f"delete /srv/{thread}")
                    seconds, terminal = await bench_agui.agui_run(clients[name], body)
                    assert terminal.get("type") == "RUN_FINISHED", terminal
                    times.append(seconds)
                plain[name].append(statistics.median(times))

            return batch

        async def gated_batch() -> None:
            pauses, answers = [], []
            for _ in range(per_round):
                thread = f"gated_{uuid.uuid4().hex[:12]}"
                body = bench_agui.run_agent_input(thread, text=f"delete /srv/{thread}")
                seconds, terminal = await bench_agui.agui_run(aais, body)
                assert terminal.get("type") == "RUN_FINISHED", terminal
                [interrupt] = terminal["outcome"]["interrupts"]
                pauses.append(seconds)
                seconds, terminal = await bench_agui.resume(aais, thread, interrupt)
                assert terminal.get("type") == "RUN_FINISHED", terminal
                answers.append(seconds)
            pause.append(statistics.median(pauses))
            answer.append(statistics.median(answers))

        batches = [gated_batch, *(plain_batch(name) for name in baselines)]
        try:
            for index in range(rounds):
                shift = index % len(batches)
                for batch in batches[shift:] + batches[:shift]:
                    await batch()
        finally:
            for client in clients.values():
                await client.aclose()
    return plain, pause, answer


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="about two minutes")
    parser.add_argument("--only", nargs="+", choices=ROWS, default=list(ROWS))
    parser.add_argument("--profile", type=int, metavar="TRIPS", help="profile round trips instead")
    parser.add_argument("--top", type=int, default=40, help="profile lines shown")
    parser.add_argument("--markdown", action="store_true", help="end with the README's table")
    parser.add_argument(
        "--raw", action="store_true", help="profile: answer with Command(resume=decided)"
    )
    parser.add_argument(
        "--phases", type=int, metavar="TRIPS", help="wall time of each round-trip phase instead"
    )
    parser.add_argument("--memory", action="store_true", help="phases: InMemorySaver + ledger")
    args = parser.parse_args()
    if args.profile:
        profile(args.profile, args.top, raw=args.raw)
        return
    if args.phases:
        phases(args.phases, kind="memory" if args.memory else "sqlite")
        return
    quick = args.quick
    print(
        f"bench_approval_cost{' --quick' if quick else ''}: ratio = gated / baseline, "
        "median (min-max) over interleaved rounds"
    )
    print(f"{'row':<50}{'baseline':>10}{'gated':>10} {'unit':<6}{'ratio':>7}  (min-max)     aim")
    scratch = Path(tempfile.mkdtemp(prefix="bench_approval_cost_"))
    try:
        gate_rows(args.only, scratch, batches=6 if quick else 40, size=10)
        if "inbox" in args.only:
            small, large = (200, 2000) if quick else (1000, 10_000)
            inbox_row(scratch, small=small, large=large, rounds=4 if quick else 7)
        if "distributed" in args.only:
            distributed_row(
                scratch, count=150 if quick else 1000, rounds=2 if quick else 3, concurrency=8
            )
        if "agui" in args.only:
            agui_row(scratch, rounds=4 if quick else 10, per_round=5 if quick else 10)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if args.markdown:
        print()
        print(markdown())


if __name__ == "__main__":
    main()

"""Benchmark: what an approval costs, every row next to its baseline, in one run.

Run with ``python benchmarks/bench_approval_cost.py`` (``--quick``: about two minutes;
``--only ROW`` to run some rows; ``--cpu`` to time the round trips in this process's
CPU time rather than the wall's; ``--profile``/``--phases TRIPS`` to look inside one
round trip instead). It reuses the pieces of ``bench_gate.py``,
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
  threads (``--quick``: 2k vs 200; ``--inbox-sizes SMALL LARGE``), 5x resolved
  history each (``--inbox-history X``); rounds alternate the two sizes. Seeding is
  not timed; ``--seed-dir DIR`` keeps the seeded files there and reuses them.
- ``distributed``: N approvals answered concurrently, Postgres with 2 replica
  processes vs SQLite with 1 (throwaway cluster, as in the tests; rounds
  alternate the backends, a fresh database each round): approvals/s, and CPU per
  approval across every process, the server's included (``pg_scale.py``).
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
from datetime import timedelta
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


def gate_rows(
    rows: list[str], directory: Path, *, batches: int, size: int, clock: str = "wall"
) -> None:
    def row(name: str, comparison: Comparison, aim: str) -> None:
        show(
            name,
            "ms/op",
            comparison.baseline * 1e3,
            comparison.gated * 1e3,
            (comparison.ratio, comparison.low, comparison.high),
            aim,
        )

    cpu = ", CPU" if clock == "cpu" else ""
    if "trip-sqlite" in rows:
        trip = bench_gate.round_trip("sqlite", directory, batches=batches, size=size, clock=clock)
        row(f"approval round trip vs bare, SQLite{cpu}", trip, "<= 1.3x")
    if "trip-memory" in rows:
        trip = bench_gate.round_trip("memory", directory, batches=batches, size=size, clock=clock)
        row(f"approval round trip vs bare, InMemorySaver{cpu}", trip, "<= 1.5x")
    if "grant" in rows:
        grant = bench_gate.grant_path(directory, batches=batches, size=size)
        row("grant-covered action vs ungated, SQLite", grant, "<= 1.10x")


# -- pending_approvals -------------------------------------------------------------------


def _written(path: Path) -> None:
    """Commit a write to ``path`` from a connection of its own (a row in a table of the
    benchmark's): to every other connection the file has changed since its last read."""
    import sqlite3

    conn = sqlite3.connect(path)
    try:
        with conn:
            conn.execute("CREATE TABLE IF NOT EXISTS bench_written (at REAL)")
            conn.execute("INSERT INTO bench_written VALUES (?)", (time.time(),))
    finally:
        conn.close()


def inbox_row(
    directory: Path,
    *,
    small: int,
    large: int,
    rounds: int,
    history: int = 5,
    written: bool = False,
) -> None:
    """Seed both inboxes once (not timed), then time the two listings alternately.

    ``written``: before each timed listing another connection writes to its file, so the
    listing cannot take the file for unchanged since the last (as in a served inbox that
    is being written to); otherwise nothing is written between listings."""
    with (
        seeded_inbox(directory, small, history) as list_small,
        seeded_inbox(directory, large, history) as list_large,
    ):
        list_small()
        list_large()
        smalls: list[float] = []
        larges: list[float] = []
        paths = {
            id(list_small): directory / inbox_file(small, history),
            id(list_large): directory / inbox_file(large, history),
        }
        for index in range(rounds):
            order = [(list_small, smalls), (list_large, larges)]
            for fn, into in order if index % 2 == 0 else reversed(order):
                if written:
                    _written(paths[id(fn)])
                start = time.perf_counter()
                fn()
                into.append(time.perf_counter() - start)
    ratios = [b / a for a, b in zip(smalls, larges, strict=True)]
    shape = "" if history == 5 else f", {history}x history"
    shape += ", after a write" if written else ""
    show(
        f"pending_approvals {large // 1000 if large >= 1000 else large}"
        f"{'k' if large >= 1000 else ''} vs {small} paused{shape}",
        "ms",
        statistics.median(smalls) * 1e3,
        statistics.median(larges) * 1e3,
        spread(ratios),
        f"<= {large / small * 1.05:.1f}x" + (", large <= 0.10 s" if large == 10_000 else ""),
    )


def inbox_file(pending: int, history: int = 5) -> str:
    """The name of the seeded inbox of ``pending`` paused threads (see :func:`seeded_inbox`)."""
    return f"inbox13-{pending}.db" if history == 5 else f"inbox13-{pending}-h{history}.db"


@contextmanager
def seeded_inbox(directory: Path, pending: int, history: int = 5) -> Iterator[Callable[[], Any]]:
    """A listing of ``pending`` paused threads with ``history`` x resolved history. The file
    (:func:`inbox_file`, in ``directory``) is reused when present: seed once, list often."""
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    from aais_langgraph import ApprovalAuthority, SqliteLedger, pending_approvals

    path = directory / inbox_file(pending, history)
    if not path.exists():
        seeding = path.with_name(f"{path.name}.seeding")
        for stale in directory.glob(f"{seeding.name}*"):
            stale.unlink()
        _seed(seeding, pending, history)
        seeding.rename(path)  # only a complete seed is reused: an interrupted one starts over
    conn = sqlite3.connect(path, check_same_thread=False)
    saver = SqliteSaver(conn)
    with SqliteLedger.from_path(path, synchronous="OFF") as ledger:
        authority = ApprovalAuthority(ledger)
        graph = bench_gate.gated_graph(saver, authority)

        def listing() -> Any:
            shown = pending_approvals(authority, graph)
            assert len(shown.snapshot.pending) == pending
            return shown

        yield listing
    conn.close()


def _seed(path: Path, pending: int, history: int) -> None:
    """Seed ``path``: ``pending`` paused threads; ``history`` x resolved history (up to
    ``pending`` finished threads, the rest ledger requests without a thread)."""
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    from aais_langgraph import ApprovalAuthority, ApprovalRequested, SqliteLedger, build_decision

    conn = sqlite3.connect(path, check_same_thread=False)
    conn.execute("PRAGMA synchronous = OFF")  # seeding speed only; reads are timed
    saver = SqliteSaver(conn)
    saver.setup()
    with SqliteLedger.from_path(path, synchronous="OFF") as ledger:
        ledger.setup()
        # Requests that outlive the seed, so a reused file lists all of them.
        authority = ApprovalAuthority(ledger, default_expiry=timedelta(days=3650))
        graph = bench_gate.gated_graph(saver, authority)
        resolved = history * pending
        for i in range(min(pending, resolved)):  # finished threads: in the checkpointer too
            config = {"configurable": {"thread_id": f"done-{i}"}}
            paused = graph.invoke({"command": f"ls {i}"}, config)
            requested = ApprovalRequested.from_data(paused["__interrupt__"][0].value)
            decided = build_decision(requested, decision="deny", actor=bench_gate.ACTOR)
            bench_gate.resume_with_decisions(
                graph, config, decided, actor=bench_gate.ACTOR, authority=authority
            )
        for i in range(resolved - pending):  # the rest: resolved ledger requests, no thread
            requested = authority.request(
                bench_gate.shell_action(f"cat {i}"),
                origin={"harness": "bench", "session_id": f"s{i}"},
            )
            authority.decide(build_decision(requested, decision="approve", actor=bench_gate.ACTOR))
        for i in range(pending):
            graph.invoke({"command": f"ls {i}"}, {"configurable": {"thread_id": f"wait-{i}"}})
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


# -- distributed -------------------------------------------------------------------------


def distributed_row(directory: Path, *, count: int, rounds: int, concurrency: int) -> None:
    import pg_scale

    postgres: list[float] = []
    sqlite: list[float] = []
    cpu: dict[str, list[float]] = {"postgres": [], "sqlite": []}
    locks: list[float] = []
    with bench_distributed.throwaway_cluster() as cluster:
        for index in range(rounds):
            order = ["postgres", "sqlite"] if index % 2 == 0 else ["sqlite", "postgres"]
            for kind in order:
                name = f"{kind}{index}"
                if kind == "postgres":
                    result = pg_scale.postgres_round(
                        cluster, f"bench{index}", directory, count, concurrency
                    )
                    postgres.append(result["throughput"])
                    locks.append(result["server"]["answer"]["lock_share"])
                else:
                    db = str(directory / f"dist-{index}.db")
                    result = bench_distributed.scenario(
                        name, db, directory, count=count, replicas=1, concurrency=concurrency
                    )
                    sqlite.append(result["throughput"])
                cpu[kind].append(pg_scale.cpu_ms_per_approval(result))
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
    cpu_ratios = [p / s for p, s in zip(cpu["postgres"], cpu["sqlite"], strict=True)]
    show(
        "CPU/approval: Postgres all processes vs SQLite",
        "ms",
        statistics.median(cpu["sqlite"]),
        statistics.median(cpu["postgres"]),
        spread(cpu_ratios),
        "<= 1.3x",
    )
    print(
        f"{'':<44}lock-wait share of active backends {100 * statistics.median(locks):.1f}%"
        f" ({100 * min(locks):.1f}-{100 * max(locks):.1f}%), aim <= 5%"
    )


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
        "--cpu", action="store_true", help="round trips: time this process's CPU, not the wall"
    )
    parser.add_argument(
        "--raw", action="store_true", help="profile: answer with Command(resume=decided)"
    )
    parser.add_argument(
        "--phases", type=int, metavar="TRIPS", help="wall time of each round-trip phase instead"
    )
    parser.add_argument("--memory", action="store_true", help="phases: InMemorySaver + ledger")
    parser.add_argument(
        "--inbox-sizes",
        nargs=2,
        type=int,
        metavar=("SMALL", "LARGE"),
        help="inbox: paused threads of the two listings (default 1000 10000; quick 200 2000)",
    )
    parser.add_argument(
        "--inbox-history",
        type=int,
        default=5,
        metavar="X",
        help="inbox: resolved history per paused thread (default 5)",
    )
    parser.add_argument(
        "--seed-dir",
        type=Path,
        help="inbox: keep the seeded files here and reuse them (seeding 100k takes a while)",
    )
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
        gate_rows(
            args.only,
            scratch,
            batches=6 if quick else 40,
            size=10,
            clock="cpu" if args.cpu else "wall",
        )
        if "inbox" in args.only:
            small, large = args.inbox_sizes or ((200, 2000) if quick else (1000, 10_000))
            seeds = args.seed_dir or scratch
            seeds.mkdir(parents=True, exist_ok=True)
            for written in (False, True):
                inbox_row(
                    seeds,
                    small=small,
                    large=large,
                    rounds=4 if quick else 7,
                    history=args.inbox_history,
                    written=written,
                )
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

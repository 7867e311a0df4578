"""Benchmark: served throughput: N threads paused for approval and answered concurrently
over AG-UI on loopback, against the stock ag-ui-langgraph agent serving the same graph.

Run with ``python benchmarks/bench_agui.py [--threads 200] [--rounds 5]
[--answer agui|profile]``.

Three servers run side by side in subprocesses on 127.0.0.1, all on the SQLite
defaults (LangGraph ``AsyncSqliteSaver``; the approval ledger in a sibling SQLite
file), serving the same demo graph (``tests/agui/demo_graph.py``: ``delete <path>``
runs one side effect), all with ag-ui-langgraph's default event flags (RAW events
on, as :func:`aais_agui.create_app` serves them):

- ``aais``: :func:`aais_agui.create_app`, bearer-token authentication, the
  node gated by an AAIS approval. Phase 1 starts N runs at once; each ends in an
  interrupt. Phase 2 answers all N at once: ``--answer agui`` (default) resumes
  each thread with an AG-UI run carrying the decided envelope in ``resume[]``;
  ``--answer profile`` posts each decision to ``/approvals/{id}/decisions``
  (the thread resumes in the background) and waits until every side effect ran.
  An approval is two runs (the one that pauses, the one that answers).
- ``cached``: the stock agent serving the graph without approvals, its schema keys
  worked out once (as ``aais_agui`` does), N runs at once: the baseline of the aim.
- ``stock``: the stock agent as released, which builds the graph's JSON Schemas on
  every run, N runs at once.

Every round runs the three sides one after the other, the order rotating by round;
figures are the median and min-max over the rounds. The aim's ratio is
``approvals/s x 2 / cached runs/s`` of the same round (1.0: an approval costs
exactly two stock runs). Checked every round: every thread ran its side effect
exactly once (lost and doubled are counted), no ``RUN_ERROR``, and the ledger holds
exactly one ``approved`` resolution per request. Exits non-zero if any was lost,
doubled or failed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
SERVER = ROOT / "tests" / "agui" / "demo_server.py"
TOKEN = "bench-" + uuid.uuid4().hex
ACTOR = {"id": "bench-approver", "type": "human"}

sys.path.insert(0, str(SERVER.parent))
from demo_graph import EffectLog  # noqa: E402

from aais_agui.mapping import resume_entry_for, run_agent_input  # noqa: E402
from aais_langgraph import build_decision  # noqa: E402
from aais_langgraph.ledger import SqliteLedger  # noqa: E402


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def server(
    folder: Path, *, plain: bool, schema_keys_once: bool = False, requesters: int = 1
) -> Iterator[str]:
    port = free_port()
    command = [sys.executable, str(SERVER), "--dir", str(folder), "--port", str(port)]
    command += ["--plain"] if plain else ["--auth", "token", "--requesters", str(requesters)]
    command += ["--schema-keys-once"] if schema_keys_once else []
    folder.mkdir(parents=True, exist_ok=True)
    log = (folder / "server.log").open("w")
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        env={**os.environ, "AAIS_AGUI_TOKEN": TOKEN},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{url}/agent/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("benchmark server did not start")
            time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(15)
        log.close()


async def agui_run(
    client: httpx.AsyncClient, body: dict[str, Any], headers: dict[str, str] | None = None
) -> tuple[float, dict[str, Any]]:
    """One AG-UI run; returns (seconds, terminal event)."""
    started = time.perf_counter()
    last: dict[str, Any] = {}
    async with client.stream("POST", "/agent", json=body, headers=headers) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                last = json.loads(line[6:])
    return time.perf_counter() - started, last


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def summary(name: str, samples: list[float], wall: float, count: int) -> dict[str, Any]:
    return {
        "phase": name,
        "p50_ms": round(percentile(samples, 0.50) * 1000, 1),
        "p99_ms": round(percentile(samples, 0.99) * 1000, 1),
        "mean_ms": round(statistics.fmean(samples) * 1000, 1),
        "wall_s": round(wall, 3),
        "throughput_per_s": round(count / wall, 1),
    }


THREADS_PER_REQUESTER = 100
"""Threads one requester starts in a round (well inside the default request limits)."""


def requesters_for(threads: int) -> int:
    return max(1, -(-threads // THREADS_PER_REQUESTER))


def requester_headers(index: int) -> dict[str, str]:
    """The bearer token of thread ``index``'s requester (``demo_server.py --requesters``)."""
    number = index // THREADS_PER_REQUESTER
    return {"Authorization": f"Bearer {TOKEN}" + (f".{number}" if number else "")}


def client_for(url: str, threads: int, *, token: bool) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {TOKEN}"} if token else {}
    limits = httpx.Limits(max_connections=threads + 10, max_keepalive_connections=threads + 10)
    return httpx.AsyncClient(base_url=url, headers=headers, limits=limits, timeout=300)


async def bench_aais(url: str, folder: Path, threads: int, answer: str) -> dict[str, Any]:
    """One round of the gated side: N runs that pause at once, then N answers at once."""
    thread_ids = [f"bench_{i}_{uuid.uuid4().hex[:8]}" for i in range(threads)]
    # Each thread is one requester's (their first run owns it, their answer resumes it).
    owners = [requester_headers(i) for i in range(threads)]
    mark = _ledger_mark(folder)
    async with client_for(url, threads, token=True) as client:
        started = time.perf_counter()
        paused = await asyncio.gather(
            *(
                agui_run(client, run_agent_input(t, text=f"delete /srv/{t}"), owner)
                for t, owner in zip(thread_ids, owners, strict=True)
            )
        )
        pause_wall = time.perf_counter() - started
    interrupts = []
    for _, terminal in paused:
        assert terminal.get("type") == "RUN_FINISHED", terminal
        [interrupt] = terminal["outcome"]["interrupts"]
        interrupts.append(interrupt)
    # A fresh pool for the answers: idle keep-alive connections from phase 1 may be
    # closing on the server side (uvicorn's keep-alive timeout) as they are reused.
    async with client_for(url, threads, token=True) as client:
        started = time.perf_counter()
        if answer == "agui":
            answered = await asyncio.gather(
                *(
                    resume(client, t, i, owner)
                    for t, i, owner in zip(thread_ids, interrupts, owners, strict=True)
                )
            )
        else:
            answered = await asyncio.gather(
                *(decide(client, i, owner) for i, owner in zip(interrupts, owners, strict=True))
            )
            await wait_for_effects(folder, thread_ids)
        answer_wall = time.perf_counter() - started
    errors = [terminal for _, terminal in answered if terminal.get("type") != "RUN_FINISHED"]
    requests = [i["metadata"]["aais"]["request"]["id"] for i in interrupts]
    pause_times = [seconds for seconds, _ in paused]
    answer_times = [seconds for seconds, _ in answered]
    wall = pause_wall + answer_wall
    return {
        "approvals_per_s": threads / wall,
        "pause": summary("run -> interrupt", pause_times, pause_wall, threads),
        "answer": summary(f"answer ({answer})", answer_times, answer_wall, threads),
        "end_to_end": summary(
            "pause + answer",
            [p + a for p, a in zip(pause_times, answer_times, strict=True)],
            wall,
            threads,
        ),
        **verify(folder, thread_ids, errors, requests=requests, after=mark),
    }


async def resume(
    client: httpx.AsyncClient,
    thread_id: str,
    interrupt: dict[str, Any],
    headers: dict[str, str] | None = None,
) -> tuple[float, dict[str, Any]]:
    decided = build_decision(interrupt["metadata"]["aais"], decision="approve", actor=ACTOR)
    entry = resume_entry_for(decided, interrupt_id=interrupt["id"])
    body = run_agent_input(thread_id, resume=[entry.model_dump(by_alias=True, mode="json")])
    return await agui_run(client, body, headers)


async def decide(
    client: httpx.AsyncClient, interrupt: dict[str, Any], headers: dict[str, str] | None = None
) -> tuple[float, dict[str, Any]]:
    envelope = interrupt["metadata"]["aais"]
    decided = build_decision(envelope, decision="approve", actor=ACTOR)
    started = time.perf_counter()
    response = await client.post(
        f"/approvals/{envelope['request']['id']}/decisions",
        json=decided.to_json(),
        headers=headers,
    )
    seconds = time.perf_counter() - started
    ok = response.status_code == 200 and response.json()["resolution"]["outcome"] == "approved"
    return seconds, {"type": "RUN_FINISHED" if ok else f"HTTP {response.status_code}"}


async def wait_for_effects(folder: Path, thread_ids: list[str], timeout: float = 600) -> None:
    effects = EffectLog(folder / "effects.db")
    expected = set(thread_ids)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if expected <= {thread for thread, _, _ in effects.list()}:
            return
        await asyncio.sleep(0.05)


def _ledger_mark(folder: Path) -> int:
    """The ledger's last event sequence (0 without a ledger): a round's events come after."""
    if not (folder / "ledger.db").exists():
        return 0
    ledger = SqliteLedger(folder / "ledger.db", synchronous=None)
    try:
        return ledger.last_sequence()
    finally:
        ledger.close()


def verify(
    folder: Path,
    thread_ids: list[str],
    errors: list[dict[str, Any]],
    *,
    requests: list[str] | None = None,
    after: int = 0,
) -> dict[str, int]:
    """Count, for this round's threads, side effects lost (none ran) and doubled (more than
    one ran), failed runs, and requests without exactly one ``approved`` resolution."""
    ran = [t for t, _, _ in EffectLog(folder / "effects.db").list()]
    mine = set(thread_ids)
    per_thread = {t: 0 for t in thread_ids}
    for thread in ran:
        if thread in mine:
            per_thread[thread] += 1
    checks = {
        "lost": sum(1 for n in per_thread.values() if n == 0),
        "doubled": sum(1 for n in per_thread.values() if n > 1),
        "failed": len(errors),
        "unapproved": 0,
    }
    if requests is not None:
        approved = dict.fromkeys(requests, 0)
        ledger = SqliteLedger(folder / "ledger.db", synchronous=None)
        try:
            # The round's events come after ``after``: a few per request, 10x is ample.
            for event in ledger.events_after(after, limit=10 * len(requests) + 1000):
                resolution = event.get("resolution") or {}
                if (
                    event["type"] == "approval.resolved"
                    and resolution.get("outcome") == "approved"
                    and resolution.get("request_id") in approved
                ):
                    approved[resolution["request_id"]] += 1
        finally:
            ledger.close()
        checks["unapproved"] = sum(1 for n in approved.values() if n != 1)
    if errors:
        print(f"  {len(errors)} runs failed, e.g. {errors[0]}", file=sys.stderr)
    return checks


async def bench_plain(url: str, folder: Path, threads: int) -> dict[str, Any]:
    """One round of a stock side: N runs at once."""
    thread_ids = [f"plain_{i}_{uuid.uuid4().hex[:8]}" for i in range(threads)]
    async with client_for(url, threads, token=False) as client:
        started = time.perf_counter()
        runs = await asyncio.gather(
            *(agui_run(client, run_agent_input(t, text=f"delete /srv/{t}")) for t in thread_ids)
        )
        wall = time.perf_counter() - started
    errors = [terminal for _, terminal in runs if terminal.get("type") != "RUN_FINISHED"]
    return {
        "runs_per_s": threads / wall,
        "run": summary("run (no approval)", [s for s, _ in runs], wall, threads),
        **verify(folder, thread_ids, errors),
    }


SIDES = ("aais", "cached", "stock")
CHECKS = ("lost", "doubled", "failed", "unapproved")


def spread(values: list[float], digits: int = 1) -> dict[str, float]:
    return {
        "median": round(statistics.median(values), digits),
        "min": round(min(values), digits),
        "max": round(max(values), digits),
    }


def report_of(rounds: list[dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """Median and min-max over the rounds of each side's figures, the ratios of each round,
    and the check counts summed over the rounds."""

    def column(side: str, phase: str, key: str) -> list[float]:
        return [float(r[side][phase][key]) for r in rounds]

    aais = [r["aais"]["approvals_per_s"] for r in rounds]
    ratios = {
        f"approvals_x2_vs_{side}_runs": spread(
            [2 * r["aais"]["approvals_per_s"] / r[side]["runs_per_s"] for r in rounds], 3
        )
        for side in ("cached", "stock")
    }
    return {
        "rounds": len(rounds),
        "aais": {
            "approvals_per_s": spread(aais),
            **{
                phase: {key: spread(column("aais", phase, key)) for key in ("p50_ms", "p99_ms")}
                for phase in ("pause", "answer", "end_to_end")
            },
        },
        **{
            side: {
                "runs_per_s": spread([r[side]["runs_per_s"] for r in rounds]),
                "run": {key: spread(column(side, "run", key)) for key in ("p50_ms", "p99_ms")},
            }
            for side in ("cached", "stock")
        },
        "ratios": ratios,
        "checks": {
            side: {check: sum(r[side][check] for r in rounds) for check in CHECKS} for side in SIDES
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--threads", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--answer", choices=["agui", "profile"], default="agui")
    parser.add_argument("--json", action="store_true", help="print the JSON report only")
    parser.add_argument("--keep", action="store_true", help="keep the server folders and logs")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="bench_agui_"))
    rounds: list[dict[str, dict[str, Any]]] = []
    try:
        folders = {side: scratch / side for side in SIDES}
        with (
            server(
                folders["aais"], plain=False, requesters=requesters_for(args.threads)
            ) as aais_url,
            server(folders["cached"], plain=True, schema_keys_once=True) as cached_url,
            server(folders["stock"], plain=True) as stock_url,
        ):
            urls = {"aais": aais_url, "cached": cached_url, "stock": stock_url}
            # Warm the servers (imports, first checkpoints, a first approval) unmeasured.
            asyncio.run(_warm(aais_url, cached_url))
            asyncio.run(_warm(aais_url, stock_url))
            asyncio.run(bench_aais(aais_url, folders["aais"], 2, args.answer))
            for index in range(args.rounds):
                shift = index % len(SIDES)
                measured: dict[str, dict[str, Any]] = {}
                for side in SIDES[shift:] + SIDES[:shift]:
                    if side == "aais":
                        run = bench_aais(urls[side], folders[side], args.threads, args.answer)
                    else:
                        run = bench_plain(urls[side], folders[side], args.threads)
                    measured[side] = asyncio.run(run)
                rounds.append(measured)
                if not args.json:
                    print(_round_line(index, measured), flush=True)
    finally:
        if args.keep:
            print(f"server folders and logs kept in {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    report = {"threads": args.threads, "answer": args.answer, **report_of(rounds)}
    failures = sum(n for side in report["checks"].values() for n in side.values())
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print_report(report)
    if failures:
        sys.exit(1)


def _round_line(index: int, measured: dict[str, dict[str, Any]]) -> str:
    aais = measured["aais"]["approvals_per_s"]
    cached, stock = measured["cached"]["runs_per_s"], measured["stock"]["runs_per_s"]
    return (
        f"  round {index + 1}: aais {aais:.1f} approvals/s, cached {cached:.1f} runs/s, "
        f"stock {stock:.1f} runs/s, approvals x2 / cached {2 * aais / cached:.3f}"
    )


def _print_report(report: dict[str, Any]) -> None:
    def fig(values: dict[str, float], unit: str = "") -> str:
        return f"{values['median']}{unit} ({values['min']}-{values['max']})"

    print(
        f"{report['threads']} concurrent threads, answers via {report['answer']}, SQLite, "
        f"loopback; median (min-max) over {report['rounds']} rounds"
    )
    aais = report["aais"]
    print(f"  aais    {fig(aais['approvals_per_s'])} approvals/s (two runs each)")
    for phase in ("pause", "answer", "end_to_end"):
        print(
            f"          {phase:<10} p50 {fig(aais[phase]['p50_ms'], ' ms')}  "
            f"p99 {fig(aais[phase]['p99_ms'], ' ms')}"
        )
    for side in ("cached", "stock"):
        figures = report[side]
        print(
            f"  {side:<7} {fig(figures['runs_per_s'])} runs/s  "
            f"p50 {fig(figures['run']['p50_ms'], ' ms')}  "
            f"p99 {fig(figures['run']['p99_ms'], ' ms')}"
        )
    for name, values in report["ratios"].items():
        print(f"  ratio {name}: {fig(values)}")
    for side, checks in report["checks"].items():
        print(f"  checks {side}: " + ", ".join(f"{check} {n}" for check, n in checks.items()))


async def _warm(aais_url: str, plain_url: str) -> None:
    async with client_for(aais_url, 1, token=True) as client:
        await agui_run(client, run_agent_input(f"warm_{uuid.uuid4().hex}", text="hello"))
    async with client_for(plain_url, 1, token=False) as client:
        await agui_run(client, run_agent_input(f"warm_{uuid.uuid4().hex}", text="hello"))


if __name__ == "__main__":
    main()

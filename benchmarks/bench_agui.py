"""Benchmark: N threads paused for approval and answered concurrently over AG-UI on loopback.

Run with ``python benchmarks/bench_agui.py [--threads 200] [--answer agui|profile]``.

Two servers run side by side in subprocesses on 127.0.0.1, both on the SQLite
defaults (LangGraph ``AsyncSqliteSaver``; the approval ledger in a sibling
SQLite file, ``synchronous=FULL``), serving the same demo graph
(``tests/agui/demo_graph.py``: ``delete <path>`` runs one side effect):

- ``aais``: :func:`aais_agui.create_app`, bearer-token authentication, the
  node gated by an AAIS approval. Phase 1 starts N runs at once; each ends in an
  interrupt. Phase 2 answers all N at once: ``--answer agui`` (default) resumes
  each thread with an AG-UI run carrying the decided envelope in ``resume[]``;
  ``--answer profile`` posts each decision to ``/approvals/{id}/decisions``
  (the thread resumes in the background) and waits until every side effect ran.
- ``plain``: the stock ag-ui-langgraph endpoint serving the same graph without
  approvals (``emit_raw_events=False`` on both), N runs at once.

Checked after the run: every thread completed, each side effect ran exactly
once, no ``RUN_ERROR``, and the ledger holds exactly N ``approved`` resolutions.
Reported: p50/p99 latency per request, wall time, throughput, and the ratios.
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
def server(folder: Path, *, plain: bool, schema_keys_once: bool = False) -> Iterator[str]:
    port = free_port()
    command = [sys.executable, str(SERVER), "--dir", str(folder), "--port", str(port)]
    command += ["--plain"] if plain else ["--auth", "token"]
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


async def agui_run(client: httpx.AsyncClient, body: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    """One AG-UI run; returns (seconds, terminal event)."""
    started = time.perf_counter()
    last: dict[str, Any] = {}
    async with client.stream("POST", "/agent", json=body) as response:
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


def client_for(url: str, threads: int, *, token: bool) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {TOKEN}"} if token else {}
    limits = httpx.Limits(max_connections=threads + 10, max_keepalive_connections=threads + 10)
    return httpx.AsyncClient(base_url=url, headers=headers, limits=limits, timeout=300)


async def bench_aais(url: str, folder: Path, threads: int, answer: str) -> dict[str, Any]:
    thread_ids = [f"bench_{i}_{uuid.uuid4().hex[:8]}" for i in range(threads)]
    async with client_for(url, threads, token=True) as client:
        started = time.perf_counter()
        paused = await asyncio.gather(
            *(agui_run(client, run_agent_input(t, text=f"delete /srv/{t}")) for t in thread_ids)
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
                *(resume(client, t, i) for t, i in zip(thread_ids, interrupts, strict=True))
            )
        else:
            answered = await asyncio.gather(*(decide(client, i) for i in interrupts))
            await wait_for_effects(folder, threads)
        answer_wall = time.perf_counter() - started
    errors = [terminal for _, terminal in answered if terminal.get("type") != "RUN_FINISHED"]
    verify(folder, thread_ids, errors)
    pause_times = [seconds for seconds, _ in paused]
    answer_times = [seconds for seconds, _ in answered]
    return {
        "pause": summary("run -> interrupt", pause_times, pause_wall, threads),
        "answer": summary(f"answer ({answer})", answer_times, answer_wall, threads),
        "end_to_end": summary(
            "pause + answer",
            [p + a for p, a in zip(pause_times, answer_times, strict=True)],
            pause_wall + answer_wall,
            threads,
        ),
    }


async def resume(
    client: httpx.AsyncClient, thread_id: str, interrupt: dict[str, Any]
) -> tuple[float, dict[str, Any]]:
    decided = build_decision(interrupt["metadata"]["aais"], decision="approve", actor=ACTOR)
    entry = resume_entry_for(decided, interrupt_id=interrupt["id"])
    body = run_agent_input(thread_id, resume=[entry.model_dump(by_alias=True, mode="json")])
    return await agui_run(client, body)


async def decide(
    client: httpx.AsyncClient, interrupt: dict[str, Any]
) -> tuple[float, dict[str, Any]]:
    envelope = interrupt["metadata"]["aais"]
    decided = build_decision(envelope, decision="approve", actor=ACTOR)
    started = time.perf_counter()
    response = await client.post(
        f"/approvals/{envelope['request']['id']}/decisions", json=decided.to_json()
    )
    seconds = time.perf_counter() - started
    ok = response.status_code == 200 and response.json()["resolution"]["outcome"] == "approved"
    return seconds, {"type": "RUN_FINISHED" if ok else f"HTTP {response.status_code}"}


async def wait_for_effects(folder: Path, expected: int, timeout: float = 300) -> None:
    effects = EffectLog(folder / "effects.db")
    deadline = time.monotonic() + timeout
    while len(effects.list()) < expected and time.monotonic() < deadline:
        await asyncio.sleep(0.05)


def verify(folder: Path, thread_ids: list[str], errors: list[dict[str, Any]]) -> None:
    """Every thread ran its side effect exactly once; the ledger approved each request once."""
    assert not errors, f"{len(errors)} answers failed, e.g. {errors[0]}"
    ran = EffectLog(folder / "effects.db").list()
    per_thread = {t: sum(1 for thread, _, _ in ran if thread == t) for t in thread_ids}
    lost = [t for t, n in per_thread.items() if n == 0]
    doubled = [t for t, n in per_thread.items() if n > 1]
    assert not lost and not doubled and len(ran) == len(thread_ids), (len(lost), len(doubled))
    if (folder / "ledger.db").exists():
        ledger = SqliteLedger(folder / "ledger.db", synchronous=None)
        try:
            approved = {
                event["resolution"]["request_id"]
                for event in ledger.events_after(0, limit=10 * len(thread_ids) + 100)
                if event["type"] == "approval.resolved"
                and event["resolution"]["outcome"] == "approved"
            }
        finally:
            ledger.close()
        assert len(approved) == len(thread_ids), len(approved)


async def bench_plain(url: str, folder: Path, threads: int) -> dict[str, Any]:
    thread_ids = [f"plain_{i}_{uuid.uuid4().hex[:8]}" for i in range(threads)]
    async with client_for(url, threads, token=False) as client:
        started = time.perf_counter()
        runs = await asyncio.gather(
            *(agui_run(client, run_agent_input(t, text=f"delete /srv/{t}")) for t in thread_ids)
        )
        wall = time.perf_counter() - started
    errors = [terminal for _, terminal in runs if terminal.get("type") != "RUN_FINISHED"]
    verify(folder, thread_ids, errors)
    return {"run": summary("run (no approval)", [s for s, _ in runs], wall, threads)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=200)
    parser.add_argument("--answer", choices=["agui", "profile"], default="agui")
    parser.add_argument("--json", action="store_true", help="print the JSON report only")
    parser.add_argument("--keep", action="store_true", help="keep the server folders and logs")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="bench_agui_"))
    try:
        aais_dir, plain_dir = scratch / "aais", scratch / "plain"
        with server(aais_dir, plain=False) as aais_url, server(plain_dir, plain=True) as plain_url:
            # Warm both servers (imports, first checkpoints) outside the measurement.
            asyncio.run(_warm(aais_url, plain_url))
            aais_report = asyncio.run(bench_aais(aais_url, aais_dir, args.threads, args.answer))
            plain_report = asyncio.run(bench_plain(plain_url, plain_dir, args.threads))
    finally:
        if args.keep:
            print(f"server folders and logs kept in {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    report = {
        "threads": args.threads,
        "answer": args.answer,
        "aais": aais_report,
        "plain": plain_report,
        "ratios": {
            "pause_run_p50_vs_plain_run_p50": round(
                aais_report["pause"]["p50_ms"] / plain_report["run"]["p50_ms"], 2
            ),
            "answer_p50_vs_plain_run_p50": round(
                aais_report["answer"]["p50_ms"] / plain_report["run"]["p50_ms"], 2
            ),
            "end_to_end_p50_vs_plain_run_p50": round(
                aais_report["end_to_end"]["p50_ms"] / plain_report["run"]["p50_ms"], 2
            ),
            "end_to_end_p99_vs_plain_run_p99": round(
                aais_report["end_to_end"]["p99_ms"] / plain_report["run"]["p99_ms"], 2
            ),
            "plain_throughput_vs_aais_end_to_end": round(
                plain_report["run"]["throughput_per_s"]
                / aais_report["end_to_end"]["throughput_per_s"],
                2,
            ),
        },
        "checks": "all threads completed; every side effect ran exactly once; "
        "no RUN_ERROR; one approved resolution per request",
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"{args.threads} concurrent threads, answers via {args.answer}, SQLite, loopback")
    for label, phases in (("aais", aais_report), ("plain", plain_report)):
        for phase in phases.values():
            print(
                f"  {label:5} {phase['phase']:<20} p50 {phase['p50_ms']:8.1f} ms  "
                f"p99 {phase['p99_ms']:8.1f} ms  wall {phase['wall_s']:7.2f} s  "
                f"{phase['throughput_per_s']:7.1f}/s"
            )
    for name, value in report["ratios"].items():
        print(f"  ratio {name}: {value}")
    print(f"  checks: {report['checks']}")


async def _warm(aais_url: str, plain_url: str) -> None:
    async with client_for(aais_url, 1, token=True) as client:
        await agui_run(client, run_agent_input(f"warm_{uuid.uuid4().hex}", text="hello"))
    async with client_for(plain_url, 1, token=False) as client:
        await agui_run(client, run_agent_input(f"warm_{uuid.uuid4().hex}", text="hello"))


if __name__ == "__main__":
    main()

"""Benchmark: the served snapshot of a large pending inbox, and what writing it costs.

Run with ``python benchmarks/bench_snapshot.py [--pending 10000] [--rounds 5]
[--seed-dir DIR] [--inbox-job off|at-once|after]`` (the inbox ``bench_approval_cost.py``
seeds, reused from ``--seed-dir``). It serves the seeded inbox (SQLite ledger,
``AsyncSqliteSaver`` on the same file) with :func:`aais_agui.create_app` in this process
(Starlette's ``TestClient``, lifespan included) and times ``GET /approvals/snapshot``:
wall and CPU time (``time.process_time``, every thread of the process) of the first
request and the median (min-max) of the next ``--rounds``. ``--inbox-job``: the
service's ``inbox`` job switched off (``off``, the default), or on with the first
request sent as soon as the server has started, while the job's first pass works
(``at-once``), or once that pass has ended (``after``, which also prints the pass's
wall time). Then, on one listing (``pending_approvals``
with ``SqliteSaver``), the two ways of writing its text, interleaved: the snapshot's
document (``to_json``) encoded again by FastAPI's ``jsonable_encoder`` and
``json.dumps`` (how the route wrote it before), against
:func:`~aais_langgraph.protocol.envelope_text`.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

TOKEN = "bench-snapshot-token"


def _app(path: Path, inbox_every: float | None) -> Any:
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    import bench_gate
    from aais_agui import ServiceSettings, create_app
    from aais_langgraph import ApprovalAuthority, SqliteLedger

    authority = ApprovalAuthority(SqliteLedger(path))
    graph = bench_gate.gated_graph(None, authority)
    # The inbox job's interval (code from before the job has none to set).
    job = {"inbox_every": inbox_every} if hasattr(ServiceSettings, "inbox_every") else {}

    def authenticate(request: Any) -> dict[str, str] | None:
        if request.headers.get("authorization") == f"Bearer {TOKEN}":
            return {"id": "alice", "type": "human"}
        return None

    app = create_app(
        graph,
        authority=authority,
        authenticate=authenticate,
        checkpointer=AsyncSqliteSaver.from_conn_string(str(path)),
        settings=ServiceSettings(resume_due_every=None, orphans_every=None, **job),
    )
    return app


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def measure(
    path: Path, pending: int, rounds: int, listing: Callable[[], Any], inbox_job: str = "off"
) -> None:
    from fastapi.encoders import jsonable_encoder
    from starlette.testclient import TestClient

    app = _app(path, None if inbox_job == "off" else 3600.0)
    headers = {"authorization": f"Bearer {TOKEN}"}
    walls: list[float] = []
    cpus: list[float] = []
    started = time.perf_counter()
    with TestClient(app) as client:
        if inbox_job == "after":
            scheduler = app.state.aais_service.scheduler
            while not scheduler.passes["inbox"]:
                time.sleep(0.005)
            print(f"  the inbox job's first pass ended {time.perf_counter() - started:.2f} s in")
        for _ in range(rounds + 1):
            wall, cpu = time.perf_counter(), time.process_time()
            answer = client.get("/approvals/snapshot", headers=headers)
            walls.append((time.perf_counter() - wall) * 1e3)
            cpus.append((time.process_time() - cpu) * 1e3)
            answer.raise_for_status()
            shown = len(answer.json()["snapshot"]["pending"])
            assert shown == pending, (shown, pending)
        size = len(answer.content)
    print(
        f"bench_snapshot: GET /approvals/snapshot of {pending} pending ({size / 1e6:.1f} MB), "
        f"inbox job {inbox_job}"
    )
    print(f"  first:  {walls[0]:.0f} ms wall, {cpus[0]:.0f} ms CPU")
    print(f"  next {rounds}: {_spread(walls[1:])} ms wall, {_spread(cpus[1:])} ms CPU")

    try:
        from aais_langgraph.protocol import envelope_text
    except ImportError:  # code from before envelope_text: the GET figures only
        return
    snapshot = listing()

    def before() -> str:
        return json.dumps(
            jsonable_encoder(snapshot.to_json()), ensure_ascii=False, separators=(",", ":")
        )

    def after() -> str:
        return envelope_text(snapshot)

    assert json.loads(before()) == json.loads(after())
    timed: dict[str, list[float]] = {"before": [], "after": []}
    ways: list[tuple[str, Callable[[], str]]] = [("before", before), ("after", after)]
    for index in range(rounds):
        for name, fn in ways if index % 2 == 0 else reversed(ways):
            cpu = time.process_time()
            fn()
            timed[name].append((time.process_time() - cpu) * 1e3)
    ratios = [a / b for a, b in zip(timed["after"], timed["before"], strict=True)]
    print(
        f"  writing the text, CPU ms: to_json + jsonable_encoder + json.dumps "
        f"{_spread(timed['before'])}, envelope_text {_spread(timed['after'])}, "
        f"ratio {statistics.median(ratios):.3f}x ({min(ratios):.3f}-{max(ratios):.3f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--pending", type=int, default=10_000, help="paused threads (10k)")
    parser.add_argument("--rounds", type=int, default=5, help="snapshots after the first")
    parser.add_argument("--seed-dir", type=Path, help="keep the seeded inbox here, reuse it")
    parser.add_argument(
        "--inbox-job",
        choices=["off", "at-once", "after"],
        default="off",
        help="the service's inbox job: off, on (first request at once), on (after its pass)",
    )
    args = parser.parse_args()
    import bench_approval_cost

    scratch = Path(tempfile.mkdtemp(prefix="bench_snapshot_"))
    try:
        seeds = args.seed_dir or scratch
        seeds.mkdir(parents=True, exist_ok=True)
        with bench_approval_cost.seeded_inbox(seeds, args.pending) as listing:
            path = seeds / bench_approval_cost.inbox_file(args.pending)
            measure(path, args.pending, args.rounds, listing, args.inbox_job)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()

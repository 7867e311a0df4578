"""Benchmark: the resident memory of a served process holding a large pending inbox.

Run with ``python benchmarks/inbox_rss.py`` (``--pending N``, default 10k;
``--seed-dir DIR`` reuses the inbox ``bench_approval_cost.py`` seeds there). It
serves the seeded inbox (SQLite ledger, LangGraph ``AsyncSqliteSaver`` on the same
file) with :func:`aais_agui.create_app` under uvicorn in a child process, and reads
the child's ``VmRSS`` from ``/proc/<pid>/status`` from outside: once serving, after
one ``GET /approvals/snapshot`` listing all ``N`` pending approvals, and after a
second one (what the listing's caches keep is in the first figure already).
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from aais_agui import ServiceSettings

sys.path.insert(0, str(Path(__file__).resolve().parent))

TOKEN = "inbox-rss-token"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def rss_mib(pid: int) -> float:
    """``VmRSS`` of ``pid`` in MiB, read from ``/proc``."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def serve(path: Path, port: int) -> None:
    """The child: the seeded inbox served by ``create_app`` under uvicorn."""
    import uvicorn
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    import bench_gate
    from aais_agui import create_app
    from aais_langgraph import ApprovalAuthority, SqliteLedger

    ledger = SqliteLedger(path)
    authority = ApprovalAuthority(ledger)
    graph = bench_gate.gated_graph(None, authority)  # create_app gives it the checkpointer

    def authenticate(request: Any) -> dict[str, str] | None:
        if request.headers.get("authorization") == f"Bearer {TOKEN}":
            return {"id": "alice", "type": "human"}
        return None

    app = create_app(
        graph,
        authority=authority,
        authenticate=authenticate,
        checkpointer=AsyncSqliteSaver.from_conn_string(str(path)),
        settings=ServiceSettings(resume_due_every=None, orphans_every=None),
    )
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def measure(path: Path, pending: int) -> None:
    import httpx

    port = free_port()
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(path), "--port", str(port)],
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    url = f"http://127.0.0.1:{port}"
    headers = {"authorization": f"Bearer {TOKEN}"}
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{url}/agent/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if child.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the server did not start")
            time.sleep(0.2)
        serving = rss_mib(child.pid)
        figures = []
        for _ in range(2):
            started = time.perf_counter()
            answer = httpx.get(f"{url}/approvals/snapshot", headers=headers, timeout=600)
            elapsed = time.perf_counter() - started
            answer.raise_for_status()
            shown = len(answer.json()["snapshot"]["pending"])
            assert shown == pending, (shown, pending)
            figures.append((elapsed, rss_mib(child.pid)))
    finally:
        child.terminate()
        child.wait(30)
    print(f"inbox_rss: {pending} pending approvals served (SQLite ledger + AsyncSqliteSaver)")
    print(f"{'VmRSS serving, before any listing':<44}{serving:>9.1f} MiB")
    for index, (elapsed, rss) in enumerate(figures, 1):
        print(f"{f'VmRSS after listing {index} ({elapsed * 1e3:.0f} ms)':<44}{rss:>9.1f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--pending", type=int, default=10_000, help="paused threads (10k)")
    parser.add_argument("--seed-dir", type=Path, help="keep the seeded inbox here, reuse it")
    parser.add_argument("--serve", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        serve(args.serve, args.port)
        return
    import bench_approval_cost

    scratch = Path(tempfile.mkdtemp(prefix="inbox_rss_"))
    try:
        seeds = args.seed_dir or scratch
        seeds.mkdir(parents=True, exist_ok=True)
        with bench_approval_cost.seeded_inbox(seeds, args.pending):
            pass  # seeded (or reused); the server opens the file itself
        measure(seeds / bench_approval_cost.inbox_file(args.pending), args.pending)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()

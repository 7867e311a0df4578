"""A process for the durable resume work tests (tests/distributed/test_resume_work.py).

Run as ``python -m tests.distributed.due_worker`` from the repository root with one
JSON job on stdin, the same job fields as :mod:`tests.distributed.worker` (``db``,
``effects``, ``keyed``, ``markers``, ``thread``, ``command``, ``node``, ...) and a
``mode``:

``hold_and_die``    take the thread's run lease with ``run_lease`` (``lease_ttl``), write
                    the marker ``lease_held`` and die at once with ``os._exit(9)``,
                    still holding it (no release, no renewal)
``decide_and_die``  record ``decision`` (an ``approval.decided`` envelope) with
                    ``authority.decide`` (the ledger writes the resume work with the
                    resolution), write the marker ``decided`` and die with
                    ``os._exit(9)`` before anything resumes the thread
``due``             a replica serving the graph: loop ``ThreadDriver.resume_due()``
                    every ``interval`` seconds until every one of ``request_ids`` has
                    left state ``due`` (or ``passes`` passes ran, or ``deadline``
                    seconds passed)

``due`` prints one JSON line: ``{"ok": {"passes": n, "reports": [...], "work": {...}}}``
where each report is a pass that did something (``at``: its wall time, the
:class:`~aais_langgraph.threads.DueReport` lists, and the resume work of
``request_ids`` read after the pass) and ``work`` holds the rows at the end.
With ``"barrier": true`` it prints ``ready`` once set up and waits for ``go``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from aais_langgraph.authority import run_lease
from aais_langgraph.ledger import RESUME
from aais_langgraph.threads import ThreadDriver

from .worker import HUMAN, Backend, build, mark, open_backend, wait_for_go


def work_rows(backend: Backend, request_ids: list[str]) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    for request_id in request_ids:
        work = backend.ledger.get_work(RESUME, request_id)
        rows[request_id] = None if work is None else work.to_json()
    return rows


def serve_due(job: dict[str, Any], backend: Backend) -> dict[str, Any]:
    driver = ThreadDriver(
        build(job, backend), backend.authority, lease_ttl=float(job.get("lease_ttl", 60.0))
    )
    request_ids: list[str] = list(job.get("request_ids", []))
    passes = int(job.get("passes", 0))  # 0: until the work left 'due'
    interval = float(job.get("interval", 0.1))
    wait_for_go(job)
    deadline = time.monotonic() + float(job.get("deadline", 30.0))
    reports: list[dict[str, Any]] = []
    ran = 0
    while time.monotonic() < deadline:
        ran += 1
        try:
            report = driver.resume_due()
        except Exception as error:  # a pass that failed as a whole (e.g. a locked file)
            reports.append({"at": time.time(), "error": f"{type(error).__name__}: {error}"})
        else:
            if report.resumed or report.settled or report.deferred or report.unknown:
                reports.append(
                    {
                        "at": time.time(),
                        "resumed": report.resumed,
                        "settled": report.settled,
                        "deferred": report.deferred,
                        "unknown": report.unknown,
                        "work": work_rows(backend, request_ids),
                    }
                )
        if passes and ran >= passes:
            break
        rows = work_rows(backend, request_ids)
        if not passes and all(row is not None and row["state"] != "due" for row in rows.values()):
            break
        time.sleep(interval)
    return {"passes": ran, "reports": reports, "work": work_rows(backend, request_ids)}


def main() -> None:
    job = json.loads(sys.stdin.readline())
    with open_backend(job["db"], pool_size=int(job.get("pool_size", 4))) as backend:
        mode = job["mode"]
        if mode == "hold_and_die":
            ttl = float(job.get("lease_ttl", 60.0))
            with run_lease(backend.ledger, job["thread"], ttl=ttl):
                mark(job, "lease_held")
                os._exit(9)  # dies holding the lease: no release, no renewal
        if mode == "decide_and_die":
            resolved = backend.authority.decide(job["decision"], actor=HUMAN)
            mark(job, "decided")
            sys.stdout.write(json.dumps({"outcome": resolved.resolution.outcome}) + "\n")
            sys.stdout.flush()
            os._exit(9)  # the answer is recorded; nothing resumed the thread
        if mode != "due":
            raise SystemExit(f"unknown mode {mode}")
        try:
            result: Any = {"ok": serve_due(job, backend)}
        except Exception as error:  # reported to the test, which decides what is acceptable
            result = {"error": type(error).__name__, "message": str(error)[:500]}
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()

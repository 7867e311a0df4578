"""Benchmark: the decide round trip (request + approve) against a ledger holding N resolutions.

Run with ``python benchmarks/bench_decide.py``. For each backend and each N (1k, 10k
and 100k by default) a ledger is prefilled with N resolved requests through the
public ledger API, then ``ApprovalAuthority.request`` followed by
``ApprovalAuthority.decide`` (approve once) is timed; building the decision is the
presenter's work and is not timed. Batches of ``--ops`` round trips are interleaved
across the sizes, so load from elsewhere on the machine hits every size alike.
Figures are microseconds per round trip: wall (median of the batches, best in
brackets) split into request and decide, and this process's CPU time. The cost
should not grow with N: the last columns are ratios to the smallest N. Each batch
adds to its ledger, so N grows by ``ops x repeats`` during the run.

SQLite runs on a temporary file in WAL mode. Prefill uses a second connection with
``synchronous=OFF`` (durability is irrelevant for history); the timed authority uses
the ledger's default ``synchronous=FULL`` unless ``--sync`` says otherwise, so the
figures include one fsync'd commit for the request and one for the resolution.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from aais_langgraph.authority import ApprovalAuthority
from aais_langgraph.ledger import InMemoryLedger, Ledger, ResolutionWrite, SqliteLedger
from aais_langgraph.protocol import build_decision, build_request, utc_now

ACTION = {
    "kind": "process.exec",
    "name": "shell.exec",
    "summary": "Run the JavaScript syntax check",
    "arguments": {"command": "node --check script.js"},
    "working_directory": "/workspace/example",
}
ORIGIN = {"harness": "bench", "session_id": "s-1"}
ACTOR = {"id": "user_bench", "type": "human"}


def templates() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """One requested/decided/resolved triple; prefill copies it with fresh ids."""
    requested = build_request(ACTION, origin=ORIGIN, expires_in=timedelta(days=3650))
    decided = build_decision(requested, decision="approve", actor=ACTOR)
    authority = ApprovalAuthority(InMemoryLedger())
    authority.add(requested)
    resolved = authority.decide(decided)
    return requested.to_json(), decided.to_json(), resolved.to_json()


def prefill(ledger: Ledger, count: int, *, report: Callable[[int], None] | None = None) -> None:
    """Store ``count`` resolved requests through the ledger API."""
    requested, decided, resolved = templates()
    for index in range(count):
        request_id = f"apr_fill_{index}"
        req = copy.deepcopy(requested)
        req["id"] = f"evt_req_{index}"
        req["request"]["id"] = request_id
        dec = copy.deepcopy(decided)
        dec["id"] = f"evt_dec_{index}"
        dec["decision"]["id"] = f"dec_fill_{index}"
        dec["decision"]["request_id"] = request_id
        res = copy.deepcopy(resolved)
        res["id"] = f"evt_res_{index}"
        res["resolution"]["id"] = f"res_fill_{index}"
        res["resolution"]["request_id"] = request_id
        res["resolution"]["decision_id"] = f"dec_fill_{index}"
        ledger.add_request(req)
        ledger.record_resolution(ResolutionWrite(request_id=request_id, resolved=res, decided=dec))
        if report is not None and (index + 1) % 10_000 == 0:
            report(index + 1)


@dataclass
class Sample:
    """Seconds spent over one batch of round trips."""

    request_wall: float
    decide_wall: float
    cpu: float

    @property
    def wall(self) -> float:
        return self.request_wall + self.decide_wall


def round_trips(authority: ApprovalAuthority, ops: int) -> Sample:
    """Time ``ops`` round trips; building the decision (the presenter's work) is not timed."""
    sample = Sample(0.0, 0.0, 0.0)
    for _ in range(ops):
        cpu_started = time.process_time()
        started = time.perf_counter()
        requested = authority.request(ACTION, origin=ORIGIN)
        middle = time.perf_counter()
        cpu_middle = time.process_time()
        decided = build_decision(requested, decision="approve", actor=ACTOR, decided_at=utc_now())
        cpu_resumed = time.process_time()
        resumed = time.perf_counter()
        resolved = authority.decide(decided)
        ended = time.perf_counter()
        sample.cpu += time.process_time() - cpu_resumed + cpu_middle - cpu_started
        assert resolved.approved
        sample.request_wall += middle - started
        sample.decide_wall += ended - resumed
    return sample


@dataclass
class Subject:
    """One prefilled ledger under test."""

    size: int
    authority: ApprovalAuthority
    prefill_seconds: float
    path: Path | None
    samples: list[Sample] = field(default_factory=list)


def build_subjects(backend: str, sizes: list[int], sync: str, stack: ExitStack) -> list[Subject]:
    folder = Path(stack.enter_context(tempfile.TemporaryDirectory()))
    subjects = []
    for size in sizes:
        path: Path | None = None
        if backend == "sqlite":
            path = folder / f"bench-{size}.db"
            filler: Ledger = stack.enter_context(SqliteLedger.from_path(path, synchronous="OFF"))
            filler.setup()
            timed: Ledger = stack.enter_context(SqliteLedger.from_path(path, synchronous=sync))  # type: ignore[arg-type]
        else:
            filler = timed = InMemoryLedger()
        started = time.perf_counter()
        prefill(filler, size, report=lambda done: print(f"  prefilled {done}", flush=True))
        filled = time.perf_counter() - started
        print(f"  {backend} {size}: prefill {filled:.1f} s", flush=True)
        subjects.append(Subject(size, ApprovalAuthority(timed), filled, path))
    return subjects


def run(backend: str, sizes: list[int], ops: int, repeats: int, sync: str) -> None:
    label = f"{backend} (synchronous={sync})" if backend == "sqlite" else backend
    print(f"\n{label}")
    with ExitStack() as stack:
        subjects = build_subjects(backend, sizes, sync, stack)
        for subject in subjects:
            round_trips(subject.authority, max(ops // 10, 10))  # warm caches and pages
        # Interleave the sizes, so load from elsewhere on the machine hits them alike.
        for _ in range(repeats):
            for subject in subjects:
                subject.samples.append(round_trips(subject.authority, ops))
        print(
            f"{ops} round trips x {repeats} repeats per size, interleaved; "
            "microseconds per round trip (median of repeats; best in brackets)"
        )
        print(f"{'stored':>8} {'prefill s':>9} {'request':>8} {'decide':>8} "
              f"{'total':>14} {'cpu':>12} {'total/first':>11} {'cpu/first':>9}")  # fmt: skip
        first_total = first_cpu = 0.0
        for subject in subjects:
            per_op = 1e6 / ops
            request = statistics.median(s.request_wall for s in subject.samples) * per_op
            decide = statistics.median(s.decide_wall for s in subject.samples) * per_op
            total = statistics.median(s.wall for s in subject.samples) * per_op
            best = min(s.wall for s in subject.samples) * per_op
            cpu = statistics.median(s.cpu for s in subject.samples) * per_op
            best_cpu = min(s.cpu for s in subject.samples) * per_op
            first_total, first_cpu = first_total or total, first_cpu or cpu
            size_note = f"  ({subject.path.stat().st_size / 1e6:.0f} MB)" if subject.path else ""
            print(
                f"{subject.size:>8} {subject.prefill_seconds:>9.1f} {request:>8.0f} "
                f"{decide:>8.0f} {total:>6.0f} [{best:>5.0f}] {cpu:>5.0f} [{best_cpu:>4.0f}] "
                f"{total / first_total:>11.2f} {cpu / first_cpu:>9.2f}{size_note}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--ops", type=int, default=200, help="round trips per repeat")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--backend", choices=["sqlite", "memory", "both"], default="both")
    parser.add_argument("--sync", choices=["OFF", "NORMAL", "FULL"], default="FULL")
    args = parser.parse_args()
    backends = ["sqlite", "memory"] if args.backend == "both" else [args.backend]
    for backend in backends:
        run(backend, args.sizes, args.ops, args.repeats, args.sync)


if __name__ == "__main__":
    main()

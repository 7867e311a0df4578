"""Where an approval round trip's wall time goes, phase by phase, next to a bare one.

Run through ``python benchmarks/bench_approval_cost.py --phases TRIPS [--memory]``. Unlike
``--profile`` (cProfile, which inflates many small calls), every figure is wall time
measured with ``perf_counter`` around one phase, median over ``TRIPS`` round trips,
bare and gated trips alternating.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import bench_gate

TIMES: defaultdict[str, list[float]] = defaultdict(list)


def _timed(owner: Any, name: str, label: str) -> None:
    """Wrap ``owner.name`` so each call's wall time is recorded under ``label``."""
    original = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            TIMES[label].append(time.perf_counter() - started)

    setattr(owner, name, wrapper)


def _clock(label: str, fn: Callable[[], Any]) -> Any:
    started = time.perf_counter()
    result = fn()
    TIMES[label].append(time.perf_counter() - started)
    return result


def phases(trips: int, *, kind: str = "sqlite") -> None:
    """Time ``trips`` bare and gated round trips on ``kind`` (sqlite or memory), by phase."""
    from langgraph.types import Command

    from aais_langgraph import ApprovalRequested, build_decision, resume_with_decisions
    from aais_langgraph.gate import request
    from aais_langgraph.threads import answers, runs

    _timed(request, "_open_request", "  node: open the request (first run: screen, build, store)")
    _timed(request, "_ask", "  node: interrupt() (first run: raise; second: judge the answer)")
    _timed(answers.AnswerPlanner, "parse", "  driver: parse the answers")
    _timed(runs.LeasedThread, "view", "  driver: read the thread's checkpoint")
    _timed(answers.AnswerPlanner, "record", "  driver: decide (the resolution's durable write)")
    _timed(runs.LeasedThread, "resume", "  driver: the second invoke")
    actor = bench_gate.ACTOR
    per_trip: defaultdict[str, list[float]] = defaultdict(list)
    with (
        tempfile.TemporaryDirectory(prefix="bench_approval_cost_phases_") as tmp,
        bench_gate.backend(kind, Path(tmp)) as (saver, authority),
    ):
        gated = bench_gate.gated_graph(saver, authority)
        bare = bench_gate.bare_interrupt_graph(saver)

        def bare_trip(config: Any) -> None:
            _clock("bare: first invoke (pauses)", lambda: bare.invoke({"command": "ls"}, config))
            _clock("bare: second invoke", lambda: bare.invoke(Command(resume="approve"), config))

        def gated_trip(config: Any) -> None:
            paused = _clock(
                "gated: first invoke (pauses)", lambda: gated.invoke({"command": "ls"}, config)
            )
            requested = ApprovalRequested.from_data(paused["__interrupt__"][0].value)
            decided = _clock(
                "gated: presenter builds the decision",
                lambda: build_decision(requested, decision="approve", actor=actor),
            )
            _clock(
                "gated: resume_with_decisions",
                lambda: resume_with_decisions(
                    gated, config, decided, actor=actor, authority=authority
                ),
            )

        for i in range(-50, trips):
            TIMES.clear()
            bare_trip({"configurable": {"thread_id": f"bare-{i}"}})
            gated_trip({"configurable": {"thread_id": f"gated-{i}"}})
            if i >= 0:  # the first 50 warm up
                for label, values in TIMES.items():
                    per_trip[label].append(sum(values))
    print(f"round trip phases, {kind}: median ms per round trip over {trips} (wall time)")
    for label, values in per_trip.items():
        print(f"  {label:<66}{statistics.median(values) * 1e3:7.3f}")

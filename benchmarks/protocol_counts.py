"""Count the protocol work of one approval: validations, I-JSON walks, digests, dumps.

Patches the protocol layer's functions in this process only, then runs SQLite approval
round trips (``request_approval`` pauses, the presenter decides, ``resume_with_decisions``
answers) and reports each count per round trip, split into the request path (up to the
pause), the presenter (parsing the interrupt, building the decision) and the answer path.
``--where`` lists the call sites of each count. ``--calls`` counts cProfile's Python
calls instead, and ``--cpu ROUNDS`` the CPU time (``time.process_time``) of batches
interleaved with a bare ``interrupt()`` round trip on the same checkpointer (nothing
patched for either).

    python benchmarks/protocol_counts.py [--trips 50] [--where] [--calls] [--cpu ROUNDS]
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import pstats
import statistics
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pydantic
from langgraph.types import Command

import bench_gate
from aais_langgraph import ApprovalRequested, build_decision, resume_with_decisions
from aais_langgraph.protocol import base as protocol_base
from aais_langgraph.protocol import digest as protocol_digest
from aais_langgraph.protocol import ijson as protocol_ijson

COUNTED = (
    "AAIS models validated",
    "I-JSON walks",
    "canonical JSON computed",
    "AAIS models dumped",
    "deep copies",
)


class Counts:
    """What the patched functions saw, by phase, with their call sites."""

    def __init__(self) -> None:
        self.phase = "warm-up"
        self.by_phase: dict[str, Counter[str]] = {}
        self.sites: dict[str, Counter[str]] = {}

    def add(self, label: str) -> None:
        self.by_phase.setdefault(self.phase, Counter())[label] += 1
        if self.phase == "warm-up":
            return
        site = "?"
        for frame in reversed(traceback.extract_stack()[:-2]):
            name = frame.filename
            if ("aais_langgraph" in name or "aais_agui" in name) and "/protocol/" not in name:
                site = f"{name.split('/wt/perf/')[-1]}:{frame.lineno} {frame.name}"
                break
        self.sites.setdefault(label, Counter())[site] += 1


def _wrap(owner: Any, name: str, label: str, counts: Counts) -> None:
    original = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        counts.add(label)
        return original(*args, **kwargs)

    setattr(owner, name, wrapper)


def patch(counts: Counts) -> None:
    """Count every call of the protocol's validating, walking, digesting and dumping."""
    validate = pydantic.BaseModel.model_validate.__func__  # type: ignore[attr-defined]

    def counted_validate(cls: Any, *args: Any, **kwargs: Any) -> Any:
        counts.add("AAIS models validated")
        return validate(cls, *args, **kwargs)

    protocol_base.AAISModel.model_validate = classmethod(counted_validate)  # type: ignore[assignment,method-assign]
    dump = pydantic.BaseModel.model_dump

    def counted_dump(self: Any, *args: Any, **kwargs: Any) -> Any:
        counts.add("AAIS models dumped")
        return dump(self, *args, **kwargs)

    protocol_base.AAISModel.model_dump = counted_dump  # type: ignore[method-assign]
    # check_ijson is imported by name wherever it is used: patch every module's binding.
    walk = protocol_ijson.check_ijson

    def counted_walk(*args: Any, **kwargs: Any) -> Any:
        counts.add("I-JSON walks")
        return walk(*args, **kwargs)

    for module in list(sys.modules.values()):
        if getattr(module, "check_ijson", None) is walk and module.__name__.startswith("aais_"):
            module.check_ijson = counted_walk  # type: ignore[attr-defined]
    _wrap(protocol_digest, "_canonical", "canonical JSON computed", counts)
    _wrap(copy, "deepcopy", "deep copies", counts)


@contextmanager
def _phase(counts: Counts, name: str) -> Iterator[None]:
    counts.phase = name
    yield
    counts.phase = "warm-up"


def run(trips: int, *, where: bool, calls: bool, cpu: int) -> None:
    counts = Counts()
    if not calls and not cpu:
        patch(counts)
    with (
        tempfile.TemporaryDirectory(prefix="protocol_counts_") as tmp,
        bench_gate.backend("sqlite", Path(tmp)) as (saver, authority),
    ):
        graph = bench_gate.gated_graph(saver, authority)
        bare = bench_gate.bare_interrupt_graph(saver)
        actor = bench_gate.ACTOR

        def trip(i: int, measured: bool) -> None:
            config = {"configurable": {"thread_id": f"c-{i}"}}
            with _phase(counts, "request path" if measured else "warm-up"):
                paused = graph.invoke({"command": f"ls {i}"}, config)
            with _phase(counts, "presenter" if measured else "warm-up"):
                requested = ApprovalRequested.from_data(paused["__interrupt__"][0].value)
                decided = build_decision(requested, decision="approve", actor=actor)
            with _phase(counts, "answer path" if measured else "warm-up"):
                resolved = resume_with_decisions(
                    graph, config, decided, actor=actor, authority=authority
                )
            assert resolved[0].approved

        def bare_trip(i: int) -> None:
            config = {"configurable": {"thread_id": f"b-{i}"}}
            bare.invoke({"command": f"ls {i}"}, config)
            assert bare.invoke(Command(resume="approve"), config)["out"].startswith("ran ")

        for i in range(10):
            trip(-1 - i, False)
            bare_trip(-1 - i)
        if cpu:
            _cpu(bare_trip, lambda i: trip(i, False), rounds=cpu, size=trips)
            return
        if calls:
            for name, fn in (
                ("bare interrupt()", bare_trip),
                ("approval", lambda i: trip(i, False)),
            ):
                total = _python_calls(fn, trips)
                print(f"Python calls per round trip, {name:<18}{total / trips:>9.0f}")
            return
        for i in range(trips):
            trip(i, True)
        phases = ("request path", "presenter", "answer path")
        print(f"protocol work per SQLite approval round trip ({trips} trips)")
        print(f"  {'':<26}" + "".join(f"{p:>14}" for p in phases) + f"{'whole':>10}")
        for label in COUNTED:
            row = [counts.by_phase.get(p, Counter())[label] / trips for p in phases]
            print(f"  {label:<26}" + "".join(f"{v:>14.2f}" for v in row) + f"{sum(row):>10.2f}")
        if where:
            for label in COUNTED:
                print(f"\n{label}, by call site (per round trip):")
                for site, n in counts.sites.get(label, Counter()).most_common():
                    print(f"  {n / trips:>6.2f}  {site}")


_serial = iter(range(10_000, 10**9))


def _python_calls(fn: Callable[[int], None], trips: int) -> int:
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(trips):
        fn(next(_serial))
    profiler.disable()
    return int(pstats.Stats(profiler).total_calls)  # type: ignore[attr-defined]


def _cpu(
    bare: Callable[[int], None], gated: Callable[[int], None], *, rounds: int, size: int
) -> None:
    """CPU ms per round trip of each side in alternating batches (order flipped each
    round), and the median (min-max) of the paired ratios."""

    def batch(fn: Callable[[int], None]) -> float:
        start = time.process_time()
        for _ in range(size):
            fn(next(_serial))
        return (time.process_time() - start) / size * 1e3

    bare_ms: list[float] = []
    gated_ms: list[float] = []
    for index in range(rounds):
        if index % 2:
            gated_ms.append(batch(gated))
            bare_ms.append(batch(bare))
        else:
            bare_ms.append(batch(bare))
            gated_ms.append(batch(gated))
    ratios = [g / b for g, b in zip(gated_ms, bare_ms, strict=True)]
    print(
        f"CPU per SQLite round trip ({rounds} rounds of {size}): bare "
        f"{statistics.median(bare_ms):.2f} ms, approval {statistics.median(gated_ms):.2f} ms, "
        f"ratio {statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trips", type=int, default=50)
    parser.add_argument("--where", action="store_true", help="list the call sites")
    parser.add_argument("--calls", action="store_true", help="count Python calls (cProfile)")
    parser.add_argument("--cpu", type=int, default=0, metavar="ROUNDS", help="CPU time instead")
    args = parser.parse_args()
    run(args.trips, where=args.where, calls=args.calls, cpu=args.cpu)


if __name__ == "__main__":
    main()

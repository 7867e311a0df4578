"""Profile approval round trips: count what each one costs, then cProfile them.

Run through ``python benchmarks/bench_approval_cost.py --profile TRIPS [--raw] [--top N]``.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import bench_gate


def profile(trips: int, top: int, *, raw: bool = False) -> None:
    """cProfile ``trips`` SQLite approval round trips; count what each one costs.

    ``raw``: answer with ``Command(resume={interrupt_id: decided})`` (the gate judges
    the decision itself, no run lease) instead of ``resume_with_decisions``."""
    import cProfile
    import pstats
    import threading
    import traceback
    from collections import Counter

    import pydantic
    from langgraph.types import Command

    from aais_langgraph import ApprovalRequested, build_decision, resume_with_decisions
    from aais_langgraph.ledger import SqliteLedger
    from aais_langgraph.protocol import base as protocol_base

    counts: Counter[str] = Counter()

    def counting(owner: Any, name: str, label: str) -> None:
        original = getattr(owner, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            counts[label] += 1
            return original(*args, **kwargs)

        setattr(owner, name, wrapper)

    write = SqliteLedger._write

    def counted_write(self: Any, *, durable: bool = True) -> Any:
        counts["ledger writes, fsync'd" if durable else "ledger writes, no fsync"] += 1
        return write(self, durable=durable)

    SqliteLedger._write = counted_write  # type: ignore[method-assign]
    counting(SqliteLedger, "_snapshot", "ledger snapshot reads")
    counting(SqliteLedger, "_read", "ledger single reads")
    start = threading.Thread.start

    def counted_start(self: threading.Thread) -> None:
        # Who asked for the thread: the innermost caller outside the standard library.
        callers = [
            frame.filename
            for frame in traceback.extract_stack()[:-1]
            if "site-packages" in frame.filename or "aais_langgraph" in frame.filename
        ]
        ours = bool(callers) and "aais_langgraph" in callers[-1]
        counts["threads started by aais_langgraph" if ours else "threads started by LangGraph"] += 1
        start(self)

    threading.Thread.start = counted_start  # type: ignore[method-assign]
    counting(pydantic.TypeAdapter, "__init__", "TypeAdapters (interrupt() makes one)")
    counting(pydantic.TypeAdapter, "json_schema", "JSON Schemas generated")
    validate = pydantic.BaseModel.model_validate.__func__  # type: ignore[attr-defined]

    def counted_validate(cls: Any, *args: Any, **kwargs: Any) -> Any:
        counts["AAIS models validated"] += 1
        return validate(cls, *args, **kwargs)

    protocol_base.AAISModel.model_validate = classmethod(counted_validate)  # type: ignore[assignment,method-assign]
    with (
        tempfile.TemporaryDirectory(prefix="bench_approval_cost_profile_") as tmp,
        bench_gate.backend("sqlite", Path(tmp)) as (saver, authority),
    ):
        graph = bench_gate.gated_graph(saver, authority)
        actor = bench_gate.ACTOR

        def trip(i: int) -> None:
            config = {"configurable": {"thread_id": f"p-{i}"}}
            paused = graph.invoke({"command": f"ls {i}"}, config)
            requested = ApprovalRequested.from_data(paused["__interrupt__"][0].value)
            decided = build_decision(requested, decision="approve", actor=actor)
            if raw:
                answer = {paused["__interrupt__"][0].id: decided.to_json()}
                assert graph.invoke(Command(resume=answer), config)["out"].startswith("ran ")
                return
            resolved = resume_with_decisions(
                graph, config, decided, actor=actor, authority=authority
            )
            assert resolved[0].approved

        for i in range(10):
            trip(-1 - i)
        counts.clear()
        profiler = cProfile.Profile()
        started = time.perf_counter()
        profiler.enable()
        for i in range(trips):
            trip(i)
        profiler.disable()
        wall = time.perf_counter() - started
    counts.setdefault("threads started by aais_langgraph", 0)
    how = "Command(resume=decided)" if raw else "resume_with_decisions"
    print(
        f"profile: {trips} SQLite approval round trips ({how}), "
        f"{wall / trips * 1e3:.2f} ms each (profiled)"
    )
    for label, n in sorted(counts.items()):
        print(f"  {label:<32}{n / trips:>7.2f} per round trip")
    stats = pstats.Stats(profiler)
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(top)

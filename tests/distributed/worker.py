"""One replica of a gated graph, as a separate OS process, for the crash, lease and race tests.

Run as ``python -m tests.distributed.worker`` from the repository root with one JSON
job on stdin. The job names a backend (``db``: a SQLite file shared by checkpointer
and ledger, or a ``postgresql://`` URL for ``PostgresSaver`` + ``PostgresLedger``),
a thread, and a mode:

``start``    run the graph until its approval interrupt
``resume``   ``resume_with_decisions`` with ``decisions`` (one presenter: the answer
             arrives with the resume, and the gate records it in one write); with
             ``"channel": "record"`` a presenter that records first, as the
             asynchronous channels do: under the thread's lease the planner records
             the decision, then the thread is resumed with what is recorded
``race``     ``presenters`` threads, each ``resume_with_decisions`` with its own decision
``hold``     take the thread's run lease and stop (for the lease-expiry test)

``crash_at`` makes the process stop at one point and wait there to be killed: it
writes ``<markers>/<point>`` (the time, as text) and sleeps. Points:

``interrupt_saved``  the checkpointer has just stored the interrupt (before invoke returns)
``after_decide``     (``"channel": "record"``) the authority recorded the resolution; the
                     graph has not resumed
``before_record``    the planner authorized the answer and the resumed run's gate has it;
                     the one write (resolution, claim, settled resume work) has not happened
``after_record``     that one write committed; the node has not got its answer yet
``after_claim``      the gate claimed the approval's execution; the node has not got it yet
``before_action``    the node got its approval back; the action has not started
``mid_effects``      the plain effect is applied, the keyed one not yet
``in_action``        the action has applied its effects and is still running
``body_returned``    (node ``wrapped``) the body returned and the gate recorded it executed
``writes_saved``     the checkpointer stored the node's result writes (no checkpoint yet)
``checkpoint_saved`` the checkpointer stored the final checkpoint (invoke has not returned)
``lease_held``       (mode ``hold``) the run lease is held

``node`` picks the gated node: ``plain`` (default) calls ``request_approval`` and acts
inline; ``wrapped`` is a ``requires_approval`` node whose body acts. ``idempotent``
declares the action idempotent.

The action writes the marker ``action_applied`` after its effects, then sleeps
``action_seconds`` (default 0: a slow action). It applies two effects so one run
shows both kinds: it appends
``<request id> <command>`` to ``effects`` (not idempotent), and creates
``<keyed>/<request id>`` with ``O_EXCL`` (idempotent: keyed by the request id the
gate returns, which is the same on every re-execution of the node).

With ``"barrier": true`` the worker prints ``ready`` once set up and waits for a
``go`` line. The result is one JSON line on stdout.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph

from aais_langgraph import (
    ApprovalAuthority,
    Ledger,
    SqliteLedger,
    ThreadDriver,
    request_approval,
    requires_approval,
    resume_with_decisions,
)
from aais_langgraph.authority import run_lease
from aais_langgraph.gate import approval_key
from aais_langgraph.protocol import ApprovalDecided

HUMAN = {"id": "user_alex", "type": "human"}
INTERRUPT = "__interrupt__"  # the checkpoint channel of interrupts (langgraph.constants)
PARK_SECONDS = 120.0  # a crash point waits this long for its kill (the tests kill in < 10 s)


class State(TypedDict, total=False):
    command: str
    outcome: str
    request_id: str


@dataclass
class Backend:
    saver: Any
    ledger: Ledger
    authority: ApprovalAuthority


def is_postgres(db: str) -> bool:
    return db.startswith(("postgres://", "postgresql://"))


@contextmanager
def open_backend(db: str, *, setup: bool = False, pool_size: int = 8) -> Iterator[Backend]:
    """Checkpointer and ledger on one SQLite file or one Postgres schema."""
    with ExitStack() as stack:
        if is_postgres(db):
            from langgraph.checkpoint.postgres import PostgresSaver
            from psycopg.rows import dict_row
            from psycopg_pool import ConnectionPool

            from aais_langgraph.ledger.postgres import PostgresLedger

            pool: ConnectionPool = stack.enter_context(
                ConnectionPool(
                    db,
                    min_size=1,
                    max_size=pool_size,
                    kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
                    open=True,
                )
            )
            saver: Any = PostgresSaver(pool)  # type: ignore[arg-type]
            ledger: Ledger = PostgresLedger(pool)
        else:
            from langgraph.checkpoint.sqlite import SqliteSaver

            conn = sqlite3.connect(db, check_same_thread=False, timeout=30)
            stack.callback(conn.close)
            saver = SqliteSaver(conn)
            ledger = stack.enter_context(SqliteLedger.from_path(db))
        if setup:
            ledger.setup()
            saver.setup()
        yield Backend(saver, ledger, ApprovalAuthority(ledger))


def mark(job: dict[str, Any], point: str) -> None:
    """Leave ``<markers>/<point>`` holding the time (the test polls for it)."""
    marker = Path(job["markers"]) / point
    marker.write_text(f"{time.time()}", encoding="utf-8")


def stop_here(job: dict[str, Any], point: str) -> None:
    """If the job crashes at ``point``: leave a marker and wait to be killed."""
    if job.get("crash_at") != point:
        return
    mark(job, point)
    time.sleep(PARK_SECONDS)
    raise SystemExit(f"{point}: nobody killed this worker")


def apply_effects(job: dict[str, Any], request_id: str, command: str) -> None:
    with open(job["effects"], "a", encoding="utf-8") as log:
        log.write(f"{request_id} {command}\n")
        log.flush()
        os.fsync(log.fileno())
    stop_here(job, "mid_effects")
    keyed = Path(job["keyed"])
    try:
        fd = os.open(keyed / request_id, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return  # done before under this key: the idempotent effect is not repeated
    os.write(fd, command.encode())
    os.fsync(fd)
    os.close(fd)


def action(state: State) -> dict[str, Any]:
    return {
        "kind": "process.exec",
        "name": "shell.exec",
        "summary": "Run a shell command",
        "arguments": {"command": state["command"]},
    }


def perform(job: dict[str, Any], request_id: str, command: str) -> None:
    stop_here(job, "before_action")
    apply_effects(job, request_id, command)
    mark(job, "action_applied")
    time.sleep(float(job.get("action_seconds", 0.0)))  # the rest of a slow action
    stop_here(job, "in_action")


def build(job: dict[str, Any], backend: Backend) -> Any:
    idempotent = bool(job.get("idempotent", False))

    def plain(state: State) -> dict[str, Any]:
        resolved = request_approval(
            action(state), authority=backend.authority, idempotent=idempotent
        )
        request_id = resolved.resolution.request_id
        if resolved.approved:
            perform(job, request_id, state["command"])
        return {"outcome": resolved.resolution.outcome, "request_id": request_id}

    @requires_approval(
        action,
        authority=backend.authority,
        idempotent=idempotent,
        on_reject=lambda state, resolved: {
            "outcome": resolved.resolution.outcome,
            "request_id": resolved.resolution.request_id,
        },
    )
    def wrapped(state: State) -> dict[str, Any]:
        perform(job, approval_key(), state["command"])
        return {"outcome": "approved", "request_id": approval_key()}

    act = wrapped if job.get("node") == "wrapped" else plain
    builder = StateGraph(State)
    builder.add_node("act", act)
    builder.add_edge(START, "act")
    builder.add_edge("act", END)
    return builder.compile(checkpointer=backend.saver)


def arm(job: dict[str, Any], backend: Backend) -> None:
    """Install the crash hooks that sit outside the node (checkpointer, authority)."""
    if job.get("crash_at") == "interrupt_saved":
        put_writes = backend.saver.put_writes

        def writes_then_stop(config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
            put_writes(config, writes, task_id, task_path)
            if any(channel == INTERRUPT for channel, _ in writes):
                stop_here(job, "interrupt_saved")

        backend.saver.put_writes = writes_then_stop
    if job.get("crash_at") == "after_decide":
        decide = backend.authority.decide

        def decide_then_stop(*args: Any, **kwargs: Any) -> Any:
            resolved = decide(*args, **kwargs)
            stop_here(job, "after_decide")
            return resolved

        backend.authority.decide = decide_then_stop  # type: ignore[method-assign]
    if job.get("crash_at") in ("before_record", "after_record"):
        # The gate records a handed answer with decide_claiming and its actor; the
        # planner's own records go through decide (which calls decide_claiming too).
        record, planner_decide = backend.authority.decide_claiming, backend.authority.decide
        deciding = threading.local()

        def decide_outside(*args: Any, **kwargs: Any) -> Any:
            deciding.active = True
            try:
                return planner_decide(*args, **kwargs)
            finally:
                deciding.active = False

        def record_and_stop(*args: Any, **kwargs: Any) -> Any:
            handed = kwargs.get("actor") is not None and not getattr(deciding, "active", False)
            if handed:
                stop_here(job, "before_record")
            recorded = record(*args, **kwargs)
            if handed:
                stop_here(job, "after_record")
            return recorded

        backend.authority.decide = decide_outside  # type: ignore[method-assign]
        backend.authority.decide_claiming = record_and_stop  # type: ignore[method-assign]
    if job.get("crash_at") in ("after_claim", "body_returned"):
        update = backend.ledger.update_execution
        wanted = "executing" if job["crash_at"] == "after_claim" else "executed"

        def update_then_stop(request_id: str, change: Any, **options: Any) -> Any:
            record = update(request_id, change, **options)
            if record is not None and record.state == wanted:
                stop_here(job, job["crash_at"])
            return record

        backend.ledger.update_execution = update_then_stop  # type: ignore[method-assign]
    if job.get("crash_at") == "writes_saved":
        saved = backend.saver.put_writes

        def result_then_stop(config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
            saved(config, writes, task_id, task_path)
            if any(channel == "outcome" for channel, _ in writes):
                stop_here(job, "writes_saved")

        backend.saver.put_writes = result_then_stop
    if job.get("crash_at") == "checkpoint_saved":
        put = backend.saver.put

        def checkpoint_then_stop(config: Any, checkpoint: Any, *args: Any, **kwargs: Any) -> Any:
            stored = put(config, checkpoint, *args, **kwargs)
            if "outcome" in (checkpoint.get("channel_values") or {}):
                stop_here(job, "checkpoint_saved")
            return stored

        backend.saver.put = checkpoint_then_stop


def config(job: dict[str, Any]) -> Any:
    return {"configurable": {"thread_id": job["thread"]}}


def present(job: dict[str, Any], graph: Any, backend: Backend, decision: Any) -> dict[str, Any]:
    """One presenter: answer the thread's approval and report what it was told."""
    lease_ttl = float(job.get("lease_ttl", 60.0))
    lease_wait = float(job.get("lease_wait", 30.0))
    try:
        if job.get("channel") == "record":
            driver = ThreadDriver(
                graph, backend.authority, lease_ttl=lease_ttl, lease_wait=lease_wait
            )
            planner = driver.planner
            answers = planner.parse(job["thread"], [ApprovalDecided.from_data(decision)])

            def plan(view: Any) -> tuple[dict[str, Any], list[Any]]:
                results, resume = planner.record(answers, view, HUMAN)
                return resume, results

            [resolved] = driver.drive(config(job), plan)
        else:
            [resolved] = resume_with_decisions(
                graph,
                config(job),
                [decision],
                actor=HUMAN,
                authority=backend.authority,
                lease_ttl=lease_ttl,
                lease_wait=lease_wait,
            )
    except Exception as error:  # reported: the test decides what is acceptable
        return {"error": type(error).__name__, "message": str(error)[:300]}
    return {
        "outcome": resolved.resolution.outcome,
        "resolution_id": resolved.resolution.id,
        "decision_id": decision["decision"]["id"],
    }


def race(job: dict[str, Any], graph: Any, backend: Backend) -> list[dict[str, Any]]:
    decisions = job["presenters"]
    go = threading.Barrier(len(decisions) + 1)
    results: list[dict[str, Any]] = [{} for _ in decisions]

    def presenter(index: int) -> None:
        go.wait()
        results[index] = present(job, graph, backend, decisions[index])

    threads = [threading.Thread(target=presenter, args=(i,)) for i in range(len(decisions))]
    for thread in threads:
        thread.start()
    wait_for_go(job)
    go.wait()
    for thread in threads:
        thread.join(timeout=90)
    return results


def wait_for_go(job: dict[str, Any]) -> None:
    if job.get("barrier"):
        print("ready", flush=True)
        if sys.stdin.readline().strip() != "go":
            raise SystemExit("no go")


def act(job: dict[str, Any], graph: Any, backend: Backend) -> Any:
    mode = job["mode"]
    if mode == "start":
        wait_for_go(job)
        result = graph.invoke({"command": job["command"]}, config(job))
        return [{"interrupt_id": i.id, "value": i.value} for i in result["__interrupt__"]]
    if mode == "resume":
        wait_for_go(job)
        return present(job, graph, backend, job["decisions"][0])
    if mode == "race":
        return race(job, graph, backend)
    if mode == "hold":
        wait_for_go(job)
        with run_lease(backend.ledger, job["thread"], ttl=float(job["lease_ttl"])):
            stop_here(job, "lease_held")
        return None
    raise SystemExit(f"unknown mode {mode}")


def main() -> None:
    job = json.loads(sys.stdin.readline())
    with open_backend(job["db"], pool_size=int(job.get("pool_size", 8))) as backend:
        arm(job, backend)
        graph = build(job, backend)
        try:
            result: Any = {"ok": act(job, graph, backend)}
        except Exception as error:  # reported to the test, which decides what is acceptable
            result = {"error": type(error).__name__, "message": str(error)[:500]}
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()

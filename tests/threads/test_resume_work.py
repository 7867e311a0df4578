"""Durable resume work: an answer recorded outside a run is resumed by whoever serves the graph."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command

from aais_langgraph import request_approval
from aais_langgraph.authority import holder_is_dead, holder_origin, new_holder
from aais_langgraph.cli import main as cli_main
from aais_langgraph.ledger import RESUME
from aais_langgraph.threads import RESUMING_EXTENSION, ThreadDriver, waiting_resumes
from gate.support import (
    HUMAN,
    Backend,
    Effects,
    FakeClock,
    State,
    config,
    decide,
    gated_graph,
    open_backend,
    paused,
    requested_of,
    shell_action,
)


def _pause(backend: Backend, effects: Effects, thread: str = "t-1") -> tuple[Any, Any]:
    graph = gated_graph(backend, effects)
    result = graph.invoke({"command": "ls -la"}, config(thread))
    (pending,) = paused(result)
    return graph, requested_of(pending)


def test_an_answer_recorded_outside_a_run_leaves_due_resume_work(
    backend: Backend, effects: Effects
) -> None:
    graph, requested = _pause(backend, effects)
    backend.authority.decide(decide(requested), actor=HUMAN)

    work = backend.authority.ledger.get_work(RESUME, requested.request.id)
    assert work is not None and work.state == "due" and work.thread_id == "t-1"
    assert effects.ran == []

    report = ThreadDriver(graph, backend.authority).resume_due()

    assert report.resumed == [requested.request.id]
    assert effects.ran == ["ls -la"]
    assert backend.authority.ledger.get_work(RESUME, requested.request.id).state == "done"
    assert backend.authority.ledger.list_work(RESUME) == []
    again = ThreadDriver(graph, backend.authority).resume_due()
    assert again.resumed == [] and effects.ran == ["ls -la"]


def test_an_answer_the_paused_run_records_itself_leaves_no_resume_work(
    backend: Backend, effects: Effects
) -> None:
    graph, requested = _pause(backend, effects)
    decided = decide(requested).to_json()
    graph.invoke(Command(resume=decided), config("t-1"))

    assert effects.ran == ["ls -la"]
    assert backend.authority.ledger.get_work(RESUME, requested.request.id) is None


def test_resume_with_decisions_marks_its_work_done(backend: Backend, effects: Effects) -> None:
    graph, requested = _pause(backend, effects)
    driver = ThreadDriver(graph, backend.authority)
    driver.resume_with_decisions(config("t-1"), decide(requested), actor=HUMAN)

    assert effects.ran == ["ls -la"]
    assert backend.authority.ledger.get_work(RESUME, requested.request.id).state == "done"
    assert waiting_resumes(backend.authority) == []


def test_a_lease_held_elsewhere_defers_the_work_until_it_expires(
    backend: Backend, effects: Effects
) -> None:
    graph, requested = _pause(backend, effects)
    ledger = backend.authority.ledger
    lease = ledger.acquire_lease("t-1", "holder_on_another_host", ttl=1.0, now=time.time())
    assert lease is not None
    backend.authority.decide(decide(requested), actor=HUMAN)
    driver = ThreadDriver(graph, backend.authority)

    first = driver.resume_due()

    assert first.deferred == [requested.request.id] and effects.ran == []
    work = ledger.get_work(RESUME, requested.request.id)
    assert work.attempts == 1 and work.state == "due"
    assert "lease" in (work.last_error or "")
    assert work.next_at <= lease.expires_at + 1e-6
    (listed,) = waiting_resumes(backend.authority)
    assert listed["attempts"] == 1 and listed["lease_holder"] == "another process"
    assert listed["outcome"] == "approved"
    snapshot = driver.pending_approvals()
    assert snapshot.snapshot.pending == []
    assert [item["request_id"] for item in snapshot.extensions[RESUMING_EXTENSION]] == [
        requested.request.id
    ]

    time.sleep(max(0.0, lease.expires_at - time.time()) + 0.05)
    second = driver.resume_due()

    assert second.resumed == [requested.request.id]
    assert effects.ran == ["ls -la"]
    assert waiting_resumes(backend.authority) == []


def test_a_failing_resume_counts_attempts_backs_off_and_is_kept(
    backend: Backend, effects: Effects
) -> None:
    failures = {"left": 0}

    def act(state: State) -> dict[str, Any]:
        if failures["left"] > 0:  # e.g. a service the node reads first is down
            failures["left"] -= 1
            raise RuntimeError("the service is down: sk-live-not-echoed")
        resolved = request_approval(shell_action(state["command"]), authority=backend.authority)
        if resolved.approved:
            effects.run(state["command"])
        return {"outcome": resolved.resolution.outcome}

    builder = StateGraph(State)
    builder.add_node("act", act)
    builder.add_edge(START, "act")
    builder.add_edge("act", END)
    graph = builder.compile(checkpointer=backend.saver)
    (pending,) = paused(graph.invoke({"command": "ls -la"}, config("t-1")))
    requested = requested_of(pending)
    backend.authority.decide(decide(requested), actor=HUMAN)
    failures["left"] = 2
    driver = ThreadDriver(graph, backend.authority)
    ledger = backend.authority.ledger

    assert driver.resume_due().deferred == [requested.request.id]
    work = ledger.get_work(RESUME, requested.request.id)
    assert work.attempts == 1 and work.last_error == "resuming failed: RuntimeError"
    assert "sk-live" not in str(waiting_resumes(backend.authority))
    assert work.next_at > time.time()
    assert driver.resume_due().deferred == []  # backing off: not due yet

    later = work.next_at + 0.01
    assert driver.resume_due(now=later).deferred == [requested.request.id]
    second = ledger.get_work(RESUME, requested.request.id)
    assert second.attempts == 2 and second.next_at - later > work.next_at - work.updated_at
    assert driver.resume_due(now=later + 60).resumed == [requested.request.id]
    assert effects.ran == ["ls -la"]


def test_a_denial_recorded_outside_a_run_is_resumed_too(backend: Backend, effects: Effects) -> None:
    graph, requested = _pause(backend, effects)
    backend.authority.decide(decide(requested, "deny"), actor=HUMAN)

    report = ThreadDriver(graph, backend.authority).resume_due()

    assert report.resumed == [requested.request.id]
    assert effects.ran == []
    state = graph.get_state(config("t-1"))
    assert state.values["outcome"] == "denied" and not state.next


def test_work_for_a_thread_that_moved_on_is_settled_without_a_resume(
    backend: Backend, effects: Effects
) -> None:
    graph, requested = _pause(backend, effects)
    backend.authority.decide(decide(requested), actor=HUMAN)
    # The thread is resumed by a path that knows nothing of resume work (a raw Command).
    recorded = backend.authority.get_resolution(requested.request.id)
    graph.invoke(Command(resume=recorded.to_json()), config("t-1"))
    assert effects.ran == ["ls -la"]

    report = ThreadDriver(graph, backend.authority).resume_due()

    assert report.settled == [requested.request.id] and report.resumed == []
    assert effects.ran == ["ls -la"]
    assert backend.authority.ledger.get_work(RESUME, requested.request.id).state == "done"


# -- leases held by processes that died -------------------------------------------------


def test_a_holder_name_records_where_it_runs() -> None:
    origin = holder_origin(new_holder())
    assert origin is not None and origin.pid == os.getpid()
    assert not holder_is_dead(new_holder())
    assert holder_origin("holder_plain") is None
    assert not holder_is_dead("holder_plain")
    assert not holder_is_dead("holder_x@some-other-host/boot/1/1")


_PRINT_HOLDER = "from aais_langgraph.authority import new_holder; print(new_holder())"


def _dead_child_holder() -> str:
    child = subprocess.run(
        [
            sys.executable,
            "-c",
            "from aais_langgraph.authority import new_holder; print(new_holder())",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return child.stdout.strip()


def test_a_holder_whose_process_ended_is_dead() -> None:
    holder = _dead_child_holder()
    assert holder_origin(holder) is not None
    assert holder_is_dead(holder)


def test_a_holder_whose_pid_was_reused_is_dead() -> None:
    parent = holder_origin(new_holder())
    assert parent is not None
    # The parent process is alive, but it started at another moment than this name says.
    name = f"holder_x@{parent.host}/{parent.boot}/{os.getppid()}/1"
    assert holder_is_dead(name)
    started = Path(f"/proc/{os.getppid()}/stat").read_text().rsplit(")", 1)[1].split()[19]
    assert not holder_is_dead(f"holder_x@{parent.host}/{parent.boot}/{os.getppid()}/{started}")


_TAKE_LEASE_AND_DIE = textwrap.dedent(
    """
    import os, sys, time
    from aais_langgraph.authority import new_holder
    from aais_langgraph.ledger import SqliteLedger
    ledger = SqliteLedger(sys.argv[1])
    lease = ledger.acquire_lease(sys.argv[2], new_holder(), ttl=600.0, now=time.time())
    assert lease is not None
    print("held", flush=True)
    os._exit(9)
    """
)


@pytest.fixture
def live_backend(tmp_path: Path) -> Iterator[Backend]:
    """A SQLite backend on today's clock (the CLI judges expiry by the real one)."""
    with open_backend("sqlite", tmp_path, FakeClock(datetime.now(timezone.utc))) as opened:
        yield opened


def test_an_approval_recorded_while_a_dead_local_process_holds_the_lease_runs_at_once(
    live_backend: Backend, effects: Effects
) -> None:
    backend = live_backend
    graph, requested = _pause(backend, effects)
    assert backend.path is not None
    died = subprocess.run(
        [sys.executable, "-c", _TAKE_LEASE_AND_DIE, str(backend.path), "t-1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert died.returncode == 9 and "held" in died.stdout
    held = backend.authority.ledger.get_lease("t-1")
    assert held is not None and held.expires_at > time.time() + 500

    code = cli_main(
        ["--db", str(backend.path), "approve", requested.request.id, "--yes"],
        stdin=io.StringIO(""),
        stdout=io.StringIO(),
    )
    assert code == 0

    report = ThreadDriver(graph, backend.authority).resume_due()

    assert report.resumed == [requested.request.id]
    assert effects.ran == ["ls -la"]
    assert backend.authority.ledger.get_lease("t-1") is None


def test_pending_and_show_list_an_answer_waiting_to_resume(
    live_backend: Backend, effects: Effects
) -> None:
    backend = live_backend
    graph, requested = _pause(backend, effects)
    backend.authority.ledger.acquire_lease("t-1", "holder_remote", ttl=30.0, now=time.time())
    backend.authority.decide(decide(requested), actor=HUMAN)
    ThreadDriver(graph, backend.authority).resume_due()
    assert backend.path is not None

    listed = io.StringIO()
    cli_main(["--db", str(backend.path), "pending"], stdin=io.StringIO(""), stdout=listed)
    shown = io.StringIO()
    cli_main(
        ["--db", str(backend.path), "show", requested.request.id],
        stdin=io.StringIO(""),
        stdout=shown,
    )

    text = listed.getvalue()
    assert f"RESUMING {requested.request.id} thread t-1 approved" in text
    assert "attempts 1" in text and "lease is held" in text
    assert "1 answered, waiting to resume" in text
    assert "resume    due since" in shown.getvalue()
    assert "attempts 1" in shown.getvalue()


@pytest.mark.parametrize("twin", ["sync", "async"])
async def test_the_async_twin_resumes_the_same_way(
    backend: Backend, effects: Effects, twin: str
) -> None:
    graph, requested = _pause(backend, effects)
    backend.authority.decide(decide(requested), actor=HUMAN)
    driver = ThreadDriver(graph, backend.authority)
    if twin == "sync":
        report = driver.resume_due()
    else:
        if backend.name == "sqlite":
            pytest.skip("SqliteSaver has no async methods; the async twin is covered in memory")
        report = await driver.aresume_due()
    assert report.resumed == [requested.request.id]
    assert effects.ran == ["ls -la"]


def test_a_graph_never_settles_or_cancels_another_graphs_thread(
    memory_backend: Backend, effects: Effects
) -> None:
    """One ledger may serve several graphs, each with its own checkpointer: a thread this
    graph has no checkpoint of is not one it may settle, resume or cancel."""
    other = Backend("memory", InMemorySaver(), memory_backend.authority, memory_backend.clock)
    graph_b, requested = _pause(other, effects, thread="b-1")
    graph_a = gated_graph(memory_backend, effects)
    waiting = requested.request.id

    assert ThreadDriver(graph_a, memory_backend.authority).cancel_orphans() == []
    assert waiting in [r.id for r in memory_backend.authority.snapshot().snapshot.pending]

    memory_backend.authority.decide(decide(requested), actor=HUMAN)
    report_a = ThreadDriver(graph_a, memory_backend.authority).resume_due()
    assert report_a.settled == [] and report_a.resumed == []
    assert memory_backend.authority.ledger.get_work(RESUME, waiting).state == "due"

    report_b = ThreadDriver(graph_b, memory_backend.authority).resume_due(now=time.time() + 60)
    assert report_b.resumed == [waiting]
    assert effects.ran == ["ls -la"]


@pytest.mark.parametrize("twin", ["sync", "async"])
async def test_a_request_just_recorded_is_not_taken_for_an_orphan_within_the_grace(
    memory_backend: Backend, effects: Effects, twin: str
) -> None:
    """A gate records its request before LangGraph has stored the checkpoint that shows
    its task; another process's sweep in that moment sees a thread that does not wait on
    it. A request younger than ``settled_for`` seconds is not cancelled."""
    graph, _ = _pause(memory_backend, effects)
    authority = memory_backend.authority
    raced = authority.request(
        {"kind": "process.exec", "name": "shell.exec", "summary": "Run ls", "arguments": {}},
        origin={"harness": "tests", "session_id": "t-1"},
        thread_id="t-1",
        context={"checkpoint_ns": "act:not-stored-yet", "node": "act", "call_index": 0},
    )
    driver = ThreadDriver(graph, authority)

    async def sweep(settled_for: float) -> list[str]:
        if twin == "sync":
            found = driver.cancel_orphans(settled_for=settled_for)
        else:
            found = await driver.acancel_orphans(settled_for=settled_for)
        return [resolved.resolution.request_id for resolved in found]

    assert await sweep(60.0) == []
    memory_backend.clock.advance(59)
    assert await sweep(60.0) == []
    assert authority.get_resolution(raced.request.id) is None
    memory_backend.clock.advance(2)
    assert await sweep(60.0) == [raced.request.id]
    assert authority.get_resolution(raced.request.id).resolution.outcome == "cancelled"  # type: ignore[union-attr]

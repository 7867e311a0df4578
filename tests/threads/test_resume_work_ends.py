"""Resume work always ends: done, or settled ``unknown`` with a named reason and listed.

The crashes are made deterministic with a checkpointer that refuses the writes a
killed process would not have stored: the next checkpoint after the answered step
(its task's writes are stored), or the interrupt of a task that asked.
"""

from __future__ import annotations

import contextlib
from typing import Any

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

from aais_langgraph import request_approval
from aais_langgraph.ledger import RESUME
from aais_langgraph.threads import ThreadDriver, waiting_resumes
from aais_langgraph.threads.driver import MAX_RESUME_ATTEMPTS
from gate.support import (
    HUMAN,
    Backend,
    Effects,
    State,
    config,
    decide,
    paused,
    requested_of,
    shell_action,
)


class Killed(Exception):
    """What the refusing checkpointer raises where the process would have died."""


class RefusingSaver(SqliteSaver):
    """``SqliteSaver`` that refuses every new checkpoint (``puts``) or every interrupt
    write (``interrupts``), as a process killed at that moment never stores them."""

    refuse: str = ""

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        if self.refuse == "puts":
            raise Killed("killed before the next checkpoint")
        return super().put(config, checkpoint, metadata, new_versions)

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        if self.refuse == "interrupts" and any(channel == "__interrupt__" for channel, _ in writes):
            raise Killed("killed before the interrupt was stored")
        super().put_writes(config, writes, task_id, task_path)


def _graph(backend: Backend, effects: Effects, saver: SqliteSaver, *, dead: bool = False) -> Any:
    """START -> act -> after -> END; ``act`` gates a command, ``after`` notes it ran (in a
    ``dead`` process nothing after the kill runs: ``after`` raises)."""

    def act(state: State) -> dict[str, Any]:
        resolved = request_approval(shell_action(state["command"]), authority=backend.authority)
        if resolved.approved:
            effects.run(state["command"])
        return {"outcome": resolved.resolution.outcome}

    def after(state: State) -> dict[str, Any]:
        if dead:
            raise Killed("the process is gone")
        effects.run("after")
        return {}

    builder = StateGraph(State)
    builder.add_node("act", act)
    builder.add_node("after", after)
    builder.add_edge(START, "act")
    builder.add_edge("act", "after")
    builder.add_edge("after", END)
    return builder.compile(checkpointer=saver)


def _refusing(backend: Backend) -> RefusingSaver:
    saver = RefusingSaver(backend.saver.conn)
    saver.setup()
    return saver


def test_a_resume_killed_between_the_steps_writes_and_the_next_checkpoint_is_driven_on(
    sqlite_backend: Backend, effects: Effects
) -> None:
    backend = sqlite_backend
    graph = _graph(backend, effects, backend.saver)
    (pending,) = paused(graph.invoke({"command": "rm -rf /tmp/x"}, config("t-1")))
    requested = requested_of(pending)
    backend.authority.decide(decide(requested, "deny"), actor=HUMAN)

    saver = _refusing(backend)
    saver.refuse = "puts"
    crashed = ThreadDriver(
        _graph(backend, effects, saver, dead=True), backend.authority
    ).resume_due()
    assert crashed.deferred == [requested.request.id]
    latest = backend.saver.get_tuple(config("t-1"))
    assert latest is not None and any(
        channel == "outcome" for _, channel, _ in latest.pending_writes or ()
    ), "the answered step's writes are stored, the next checkpoint is not"
    assert effects.ran == [], "the run stopped before its next step"

    report = ThreadDriver(graph, backend.authority).resume_due(now=latest_moment())

    work = backend.authority.ledger.get_work(RESUME, requested.request.id)
    assert work is not None and work.state == "done"
    assert report.deferred == []
    state = graph.get_state(config("t-1"))
    assert state.next == () and state.values["outcome"] == "denied"
    assert effects.ran == ["after"], "the denied command never ran; the run went on past it"
    assert waiting_resumes(backend.authority) == []


def test_work_whose_thread_never_pauses_on_its_request_is_settled_with_its_reason(
    sqlite_backend: Backend, effects: Effects
) -> None:
    backend = sqlite_backend
    saver = _refusing(backend)
    saver.refuse = "interrupts"
    crashing = _graph(backend, effects, saver)
    with contextlib.suppress(Killed):
        crashing.invoke({"command": "ls"}, config("t-1"))
    [stored] = backend.authority.ledger.list_pending()
    requested = backend.authority.get_request(stored.request_id)
    assert requested is not None
    backend.authority.decide(decide(requested, "deny"), actor=HUMAN)
    graph = _graph(backend, effects, backend.saver)
    driver = ThreadDriver(graph, backend.authority)

    stalled: list[str] = []
    moment = latest_moment()
    for attempt in range(MAX_RESUME_ATTEMPTS + 5):
        report = driver.resume_due(now=moment + 60.0 * attempt)
        stalled += report.stalled
        if not report.deferred:
            break

    assert stalled == [stored.request_id]
    work = backend.authority.ledger.get_work(RESUME, stored.request_id)
    assert work is not None and work.state == "unknown"
    assert work.last_error.startswith("the thread has not paused on the request yet after ")
    [listed] = waiting_resumes(backend.authority)
    assert listed["request_id"] == stored.request_id and listed["state"] == "unknown"
    assert driver.resume_due(now=moment + 1e6).deferred == [], "never due again"
    assert effects.ran == []


def latest_moment() -> float:
    """A moment past every backoff a test's earlier attempts set."""
    import time

    return time.time() + 3600.0

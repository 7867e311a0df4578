"""kill -9 a process serving the deep agent around its subagent's pause, then recover here.

Each case starts the agent (``deep_agent.py``: ``mailer`` with the gated ``send_email``
and the ungated ``look_up``, ``researcher`` with ``search``, the parent's own
``take_note``) in this process or in a worker (``worker.py``), kills the worker with
SIGKILL at one point, and recovers the thread from this process on the same backend (a
SQLite file, or a Postgres schema), the documented way: a pending approval is answered
again; recorded answers are resumed by the durable resume work
(``ThreadDriver.resume_due``); a run killed before its pause reached the parent's
checkpoint is continued (``invoke(None)``).

Counted from the effects log: the gated tool runs at most once (exactly once for an
approval that reached the tool, zero for a denial), every ungated sibling exactly
once, and no approval is lost (each request of the thread ends resolved, or is listed
pending while the thread waits on it). Each case adds a row to the hostile-input table.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from aais_langgraph import (
    ApprovalRequested,
    ThreadDriver,
    build_decision,
    pending_approvals,
    resume_with_decisions,
)
from aais_langgraph.gate import reconcile_execution, unknown_executions
from aais_langgraph.ledger import RESUME
from hostile.report import record

from .deep_agent import EDITED, GATED, RECIPIENT, SIBLINGS, EffectLog, build_deep_agent

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parents[2]
HUMAN = {"id": "user_alex", "type": "human"}
TTL = 2.0  # the crashing run's lease; its execution claim lives half of it
MARKER_TIMEOUT = 60.0
RECOVERY_SECONDS = 30.0
CATEGORY = "kill -9, deep agent subagent"


@dataclass
class Scene:
    """One backend (a SQLite file, or a Postgres schema) holding the checkpoints and the
    ledger, and the effects log of one case."""

    folder: Path
    db: str
    thread: str = "deep-kill"
    processes: list[subprocess.Popen[str]] = field(default_factory=list)

    @property
    def effects(self) -> EffectLog:
        return EffectLog(self.folder / "effects.log")

    @property
    def config(self) -> dict[str, Any]:
        return {"configurable": {"thread_id": self.thread}}

    def job(self, **fields: Any) -> dict[str, Any]:
        return {
            "db": self.db,
            "effects": str(self.effects.path),
            "markers": str(self.folder / "markers"),
            "thread": self.thread,
            "lease_ttl": TTL,
            **fields,
        }

    def crash(self, point: str, **fields: Any) -> None:
        """A worker that stops at ``point``, killed there with SIGKILL."""
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.subagents.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        self.processes.append(process)
        assert process.stdin is not None
        process.stdin.write(json.dumps(self.job(crash_at=point, **fields)) + "\n")
        process.stdin.flush()
        marker = self.folder / "markers" / point
        deadline = time.monotonic() + MARKER_TIMEOUT
        while not marker.exists() or not marker.read_text():
            if process.poll() is not None:
                _, err = process.communicate()
                raise AssertionError(f"worker exited before {point}:\n{err[-3000:]}")
            assert time.monotonic() < deadline, f"worker did not reach {point}"
            time.sleep(0.02)
        kill9(process)

    @contextmanager
    def replica(self) -> Iterator[tuple[Any, Any]]:
        """The same agent served from this process (the process that recovers)."""
        from tests.distributed.worker import open_backend

        with open_backend(self.db, setup=True) as backend:
            agent = build_deep_agent(self.effects, backend.saver, authority=backend.authority)
            yield agent, backend.authority

    def start_paused(self) -> ApprovalRequested:
        with self.replica() as (agent, _):
            agent.invoke({"messages": [("user", "Email Bob and research X")]}, self.config)
            [interrupt] = agent.get_state(self.config).interrupts
        return ApprovalRequested.from_data(interrupt.value)


def kill9(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        os.kill(process.pid, signal.SIGKILL)
    with suppress(subprocess.TimeoutExpired, ValueError):
        process.communicate(timeout=10)


@pytest.fixture(params=["sqlite", "postgres"])
def scene(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Scene]:
    if request.param == "postgres":
        db = request.getfixturevalue("postgres_url")
    else:
        db = str(tmp_path / "agent.db")
    opened = Scene(tmp_path, db)
    try:
        yield opened
    finally:
        for process in opened.processes:
            kill9(process)


def answer(scene: Scene, kind: str) -> None:
    """Answer the thread's pending approval from this process (the request is listed)."""
    with scene.replica() as (agent, authority):
        [listed] = pending_approvals(authority, agent).snapshot.pending
        [interrupt] = agent.get_state(scene.config).interrupts
        assert interrupt.value["request"]["id"] == listed.id
        decided = build_decision(interrupt.value, decision=kind, scope="once", actor=HUMAN)
        resume_with_decisions(
            agent, scene.config, [decided], actor=HUMAN, authority=authority, lease_wait=TTL + 5
        )


def resume_due(scene: Scene) -> None:
    """Run the durable resume work until none of the thread's is due (the crashed run's
    lease expires first)."""
    deadline = time.monotonic() + RECOVERY_SECONDS
    with scene.replica() as (agent, authority):
        driver = ThreadDriver(agent, authority, lease_ttl=TTL)
        while any(
            work.state == "due" and work.thread_id == scene.thread
            for work in authority.ledger.list_work(RESUME, states=("due",))
        ):
            assert time.monotonic() < deadline, "resume work still due"
            driver.resume_due(now=time.time() + TTL)
            time.sleep(0.1)


@dataclass(frozen=True)
class Ending:
    """What the thread ended with, read from the effects log and the ledger."""

    counts: dict[str, int]
    edited_runs: int
    unknown: list[str]
    lost: list[str]
    finished: bool


def ending(scene: Scene) -> Ending:
    """The counts, the unknown outcomes, and the lost approvals: requests of the thread
    neither resolved nor listed while the thread waits on them."""
    with scene.replica() as (agent, authority):
        listed = {r.id for r in pending_approvals(authority, agent).snapshot.pending}
        state = agent.get_state(scene.config)
        lost = [
            stored.request_id
            for stored in authority.ledger.list_pending(thread_id=scene.thread)
            if stored.request_id not in listed
        ]
        unknown = [e.request_id for e in unknown_executions(authority, thread_id=scene.thread)]
        finished = state.next == () and not state.interrupts
    lines = scene.effects.lines()
    return Ending(scene.effects.counts(), lines.count(f"{GATED} {EDITED}"), unknown, lost, finished)


def tally(end: Ending, *, denied: bool = False) -> None:
    """One kill point in the hostile-input table: a denied tool that ran failed open; a
    tool run beyond the first is a double run; a lost approval fails the test below."""
    doubles = sum(max(count - 1, 0) for count in end.counts.values())
    record(CATEGORY, 1, failed_open=int(denied and end.counts[GATED] > 0), double_runs=doubles)


SIBLINGS_ONCE = {name: 1 for name in SIBLINGS}


@pytest.mark.parametrize("point", ["subagent_interrupt_saved", "interrupt_saved"])
def test_killed_while_pausing_the_approval_is_answered_after_recovery(
    scene: Scene, point: str
) -> None:
    scene.crash(point, mode="start")
    assert scene.effects.counts()[GATED] == 0
    with scene.replica() as (agent, authority):
        # Before any recovery the request is in the ledger, listed by the ledger alone.
        [listed] = pending_approvals(authority).snapshot.pending
        assert listed.action.name == GATED
        if not agent.get_state(scene.config).interrupts:
            # The pause had not reached the parent's checkpoint: continue the killed run.
            agent.invoke(None, scene.config)
    answer(scene, "approve")
    end = ending(scene)

    tally(end)
    assert end.counts == {GATED: 1, **SIBLINGS_ONCE}
    assert end.finished and end.lost == [] and end.unknown == []


@pytest.mark.parametrize("kind", ["approve", "deny"])
def test_killed_after_the_answer_is_recorded_the_resume_work_ends_it(
    scene: Scene, kind: str
) -> None:
    scene.start_paused()
    scene.crash("after_decide", mode="resume", kind=kind, channel="record")
    assert scene.effects.counts()[GATED] == 0
    resume_due(scene)
    end = ending(scene)

    tally(end, denied=kind == "deny")
    assert end.counts == {GATED: int(kind == "approve"), **SIBLINGS_ONCE}
    assert end.finished and end.lost == [] and end.unknown == []


def test_killed_after_an_edit_is_recorded_the_edited_call_runs_once(scene: Scene) -> None:
    requested = scene.start_paused()
    scene.crash("after_decide", mode="edit")
    resume_due(scene)
    end = ending(scene)
    with scene.replica() as (_, authority):
        original = authority.get_resolution(requested.request.id)

    tally(end)
    assert original is not None and original.resolution.outcome == "cancelled"
    assert end.counts == {GATED: 1, **SIBLINGS_ONCE} and end.edited_runs == 1
    assert end.finished and end.lost == [] and end.unknown == []


def test_killed_before_the_run_records_the_answer_leaves_it_pending(scene: Scene) -> None:
    requested = scene.start_paused()
    scene.crash("before_record", mode="resume", kind="approve")
    with scene.replica() as (_, authority):
        assert authority.get_resolution(requested.request.id) is None
    answer(scene, "approve")
    end = ending(scene)

    tally(end)
    assert end.counts == {GATED: 1, **SIBLINGS_ONCE}
    assert end.finished and end.lost == [] and end.unknown == []


@pytest.mark.parametrize("point", ["after_record", "in_action"])
def test_killed_around_the_tool_the_outcome_is_unknown_never_run_twice(
    scene: Scene, point: str
) -> None:
    """The approval, its claim and its resume work were recorded; the run died before the
    tool returned. Nothing tells that from a death mid-call: the subagent's model is told
    the outcome is unknown, the tool is not run again, a human reconciles it."""
    requested = scene.start_paused()
    scene.crash(point, mode="resume", kind="approve")
    ran = scene.effects.counts()[GATED]
    resume_due(scene)
    end = ending(scene)
    with scene.replica() as (_, authority):
        if end.unknown:
            reconcile_execution(authority, requested.request.id, "done", actor="ops")
        assert unknown_executions(authority, thread_id=scene.thread) == []

    tally(end)
    assert ran == int(point == "in_action")
    assert end.counts == {GATED: ran, **SIBLINGS_ONCE}
    assert end.unknown == [requested.request.id]
    assert end.finished and end.lost == []


@pytest.mark.parametrize("point", ["tool_writes_saved", "checkpoint_saved"])
def test_killed_after_the_tool_returned_nothing_runs_again(scene: Scene, point: str) -> None:
    scene.start_paused()
    scene.crash(point, mode="resume", kind="approve")
    assert scene.effects.counts()[GATED] == 1
    resume_due(scene)
    with scene.replica() as (agent, _):
        if agent.get_state(scene.config).next:
            agent.invoke(None, scene.config)  # the killed run's last step
    end = ending(scene)

    tally(end)
    assert end.counts == {GATED: 1, **SIBLINGS_ONCE}
    assert end.finished and end.lost == [] and end.unknown == []
    assert end.edited_runs == 0 and scene.effects.lines().count(f"{GATED} {RECIPIENT}") == 1

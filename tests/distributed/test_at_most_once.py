"""kill -9 at twelve points across an approved action, on SQLite and Postgres: none runs twice.

For each point a worker process resumes a paused thread with an approval and is
killed there; this process then recovers the thread the documented way (the
stranded-run sweep, after the dead run's lease expired) and reads what happened.
Every approval must end either executed exactly once or reported as an unknown
outcome (never run twice, never silently dropped). Unknown outcomes are then
reconciled as done, and the thread must finish without running the action.

The table (backend, kill points, double runs, unknown outcomes, lost) is printed;
run with ``-s`` to see it.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass

import pytest

from aais_langgraph import ThreadDriver, resume_with_decisions
from aais_langgraph.gate import reconcile_execution, unknown_executions
from aais_langgraph.ledger import RESUME
from aais_langgraph.threads import stranded_threads
from hostile.report import record

from .harness import Scene, decide
from .worker import HUMAN, config

pytestmark = pytest.mark.timeout(420)

TTL = 2.0  # the crashing run's lease; its execution claim lives half of it
RECOVERY_SECONDS = 20.0

# (crash point, node): the points in the order a resume passes them.
POINTS = (
    ("interrupt_saved", "wrapped"),
    ("after_decide", "wrapped"),
    ("before_record", "wrapped"),
    ("after_record", "wrapped"),
    ("after_claim", "wrapped"),
    ("before_action", "wrapped"),
    ("mid_effects", "wrapped"),
    ("in_action", "wrapped"),
    ("body_returned", "wrapped"),
    ("writes_saved", "wrapped"),
    ("checkpoint_saved", "wrapped"),
    ("in_action", "plain"),
)


@dataclass
class Cycle:
    point: str
    runs: int
    unknown: bool
    finished: bool

    @property
    def double(self) -> bool:
        return self.runs > 1

    @property
    def lost(self) -> bool:
        """Neither ran exactly once to the end nor was reported unknown."""
        return not self.unknown and not (self.runs == 1 and self.finished)


def recover(scene: Scene) -> None:
    """Sweep until the thread is no longer stranded or its outcome is reported unknown."""
    deadline = time.monotonic() + RECOVERY_SECONDS
    with scene.replica() as (graph, backend):
        while time.monotonic() < deadline:
            if not stranded_threads(graph, backend.authority):
                return
            ThreadDriver(graph, backend.authority, lease_ttl=TTL).resume_stranded()
            if unknown_executions(backend.authority, thread_id=scene.thread):
                return
            time.sleep(0.2)
    raise AssertionError(f"{scene.thread}: not recovered in {RECOVERY_SECONDS} s")


def cycle(scene: Scene, point: str, node: str) -> Cycle:
    scene.thread = f"t-{point}-{node}"
    scene.options = {"node": node}
    shutil.rmtree(scene.folder / "markers")
    (scene.folder / "markers").mkdir()
    job = {"lease_ttl": TTL}
    if point == "interrupt_saved":
        with scene.replica(setup=True):
            pass
        scene.crash(point, mode="start", **job)
        with scene.replica() as (graph, backend):
            [interrupt] = graph.get_state(config(scene.job())).interrupts
            requested = decide_for(interrupt.value)
            resume_with_decisions(
                graph, config(scene.job()), [requested], actor=HUMAN, authority=backend.authority
            )
        request_id = interrupt.value["request"]["id"]
    else:
        _, requested = scene.start_paused()
        request_id = requested.request.id
        if point in ("after_decide", "after_claim"):
            job["channel"] = "record"  # points of a presenter that records, then resumes
        scene.crash(point, mode="resume", decisions=[decide(requested).to_json()], **job)
        if point == "before_record":
            # Nothing was recorded: the request is pending, and the presenter answers again.
            with scene.replica() as (graph, backend):
                assert backend.authority.get_resolution(request_id) is None, point
                resume_with_decisions(
                    graph, config(scene.job()), [decide(requested)], actor=HUMAN,
                    authority=backend.authority, lease_wait=TTL + 5,
                )  # fmt: skip
        recover(scene)
    runs = sum(1 for line in scene.effects() if line.startswith(request_id + " "))
    with scene.replica() as (graph, backend):
        unknown = [e.request_id for e in unknown_executions(backend.authority)]
        finished = graph.get_state(config(scene.job())).next == ()
        if request_id in unknown:
            # A human reconciles it as done: the run finishes without running it again.
            assert reconcile_execution(backend.authority, request_id, "done", actor="ops")
            ThreadDriver(graph, backend.authority, lease_ttl=TTL).resume_stranded()
            final = graph.get_state(config(scene.job()))
            assert final.next == () and final.values["outcome"] == "conflict", point
    after = sum(1 for line in scene.effects() if line.startswith(request_id + " "))
    record("kill -9", 1, double_runs=max(after - 1, 0))  # one kill point on this backend
    assert after == runs, f"{point}: reconciling ran the action"
    return Cycle(f"{point}/{node}", runs, request_id in unknown, finished)


def decide_for(value: dict[str, object]) -> object:
    from aais_langgraph import ApprovalRequested

    return decide(ApprovalRequested.from_data(value))


def test_kill_9_at_twelve_points_never_runs_an_approved_action_twice(scene: Scene) -> None:
    cycles = [cycle(scene, point, node) for point, node in POINTS]

    row = (
        f"{scene.kind:<9} kill points {len(cycles):>2}  "
        f"double runs {sum(c.double for c in cycles)}  "
        f"unknown {sum(c.unknown for c in cycles)}  lost {sum(c.lost for c in cycles)}"
    )
    print("\n" + row)
    for c in cycles:
        print(f"  {c.point:<28} runs {c.runs}  unknown {c.unknown}  finished {c.finished}")
    assert [c.point for c in cycles if c.double] == []
    assert [c.point for c in cycles if c.lost] == []


LATER = 3600.0  # seconds past every claim's lifetime: what a listing then reports


@pytest.mark.parametrize("point", ["in_action", "writes_saved", "checkpoint_saved"])
def test_kill_9_on_a_bare_gate_is_unknown_only_while_its_node_had_not_finished(
    scene: Scene, point: str
) -> None:
    """A bare ``request_approval`` node killed mid-action stays unknown; killed once its
    writes (or its next checkpoint) were stored, the process that picks up the thread's
    resume work records ``executed`` and drives the run to its end, nothing run twice."""
    scene.thread = f"t-bare-{point}"
    scene.options = {"node": "plain"}
    _, requested = scene.start_paused()
    request_id = requested.request.id
    scene.crash(point, mode="resume", decisions=[decide(requested).to_json()], lease_ttl=TTL)

    with scene.replica() as (graph, backend):
        driver = ThreadDriver(graph, backend.authority, lease_ttl=TTL)
        deadline = time.monotonic() + RECOVERY_SECONDS
        while (work := backend.authority.ledger.get_work(RESUME, request_id)) is not None:
            if work.state != "due":
                break
            assert time.monotonic() < deadline, f"{point}: resume work still {work}"
            driver.resume_due(now=time.time() + TTL)
            time.sleep(0.1)
        execution = backend.authority.execution(request_id)
        unknown = [
            e.request_id for e in unknown_executions(backend.authority, now=time.time() + LATER)
        ]
        state = graph.get_state(config(scene.job()))
    runs = sum(1 for line in scene.effects() if line.startswith(request_id + " "))
    record("kill -9", 1, double_runs=max(runs - 1, 0))
    assert runs == 1, point
    assert execution is not None
    if point == "in_action":
        assert execution.state == "unknown" and unknown == [request_id]
        assert work is not None and work.state == "unknown"
    else:
        assert execution.state == "executed" and unknown == []
        assert work is not None and work.state == "done"
        assert state.next == () and state.values["outcome"] == "approved"

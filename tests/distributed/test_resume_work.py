"""Durable resume work under kill -9: an answer recorded outside a run is resumed exactly once.

Each case runs on SQLite (processes sharing one file) and on Postgres (processes
sharing one schema). A paused thread is answered from outside its run (the CLI
``aais-langgraph --db DB approve ID --yes``, or ``authority.decide`` in another
process); the ledger writes "this thread must be resumed" with the resolution. A
fresh replica process (tests/distributed/due_worker.py, mode ``due``) then loops
``ThreadDriver.resume_due()``; the effects log counts how often the action ran.

1. The answer is recorded while a process that died (``os._exit(9)``) holds the
   thread's run lease: a dead holder on this host is released at once, so the
   first pass resumes it. A holder with no local origin ("remote") is presumed
   alive: the first pass defers (one attempt, the lease named, retry no later than
   the lease's expiry) and a pass after the expiry resumes it.
2. The process that recorded the answer is killed before it resumes: by
   ``os._exit(9)`` right after ``authority.decide`` (no lease), or kill -9 at the
   harness's ``after_decide`` point (inside an asynchronous channel's presenter, which
   records, then resumes with the lease held).
   The fresh replica resumes it once. (Also: killed in the action, the replica
   does not run it again; the work goes ``unknown`` until a human reconciles it.)
3. Eight threads approved while no server ran, two replica processes looping
   ``resume_due()`` at the same time: every approval runs exactly once.

Every case prints one row (run with ``-s``): approvals told approved, ran once,
unknown, lost, double runs; and adds to the hostile-input table.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from aais_langgraph import ApprovalRequested, pending_approvals
from aais_langgraph.authority import holder_is_dead, holder_origin
from aais_langgraph.gate import reconcile_execution, unknown_executions
from aais_langgraph.ledger import RESUME
from aais_langgraph.threads import waiting_resumes
from hostile.report import record

from .harness import ROOT, Scene, decide, finish, kill9, release
from .worker import HUMAN, config

pytestmark = pytest.mark.timeout(180)

HOLD_TTL = 120.0  # a dead local holder's lease: far longer than any wait below
REMOTE_TTL = 2.0  # the "remote" holder's lease
REMOTE = "holder_remote"  # a holder name without a local origin (no '@host/boot/pid/start')
CRASH_TTL = 2.0  # the run lease of a resume killed in its action (its claim lives half)
RECOVERY = 30.0  # the longest a replica loops resume_due()
THREADS = 8

CLI = Path(sys.executable).with_name("aais-langgraph")


# -- processes ---------------------------------------------------------------------------


def spawn_due(scene: Scene, **fields: Any) -> subprocess.Popen[str]:
    """A tests.distributed.due_worker process (killed at the end of the test)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.distributed.due_worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    scene.processes.append(process)
    assert process.stdin is not None
    process.stdin.write(json.dumps(scene.job(**fields)) + "\n")
    process.stdin.flush()
    return process


def died(process: subprocess.Popen[str], timeout: float = 60.0) -> str:
    """Wait for a process that ends itself with ``os._exit(9)``; its stdout."""
    out, err = process.communicate(timeout=timeout)
    assert process.returncode == 9, f"expected os._exit(9), got {process.returncode}:\n{err}"
    return out


def served(scene: Scene, request_ids: list[str], **fields: Any) -> dict[str, Any]:
    """A fresh replica loops resume_due() until the requests' work left 'due'; its report."""
    result = finish(spawn_due(scene, mode="due", request_ids=request_ids, **fields), RECOVERY + 30)
    assert "ok" in result, result
    return result["ok"]  # type: ignore[no-any-return]


def cli(scene: Scene, *args: str) -> tuple[int, str]:
    """``aais-langgraph --db DB ...`` as its own process."""
    argv = [str(CLI)] if CLI.exists() else [sys.executable, "-m", "aais_langgraph.cli"]
    done = subprocess.run(
        [*argv, "--db", scene.db, *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )
    return done.returncode, done.stdout + done.stderr


def approve_with_cli(scene: Scene, request_id: str) -> bool:
    """Approve from the command line (no server runs); True when it said approved."""
    status, out = cli(scene, "approve", request_id, "--yes")
    assert status == 0, out
    return "approved:" in out


# -- read-outs -----------------------------------------------------------------------


@dataclass
class Row:
    point: str
    backend: str
    approved: int
    once: int
    unknown: int
    lost: int
    double: int

    def show(self) -> str:
        return (
            f"{self.point:<34} {self.backend:<9} told approved {self.approved}  "
            f"ran once {self.once}  unknown {self.unknown}  lost {self.lost}  "
            f"double runs {self.double}"
        )


def runs_of(scene: Scene, request_id: str) -> int:
    return sum(1 for line in scene.effects() if line.startswith(request_id + " "))


def tally(
    scene: Scene, point: str, approved: list[str], unknown: tuple[str, ...] | list[str] = ()
) -> Row:
    """The row of one case, read from the effects log and the ledger."""
    runs = {request_id: runs_of(scene, request_id) for request_id in approved}
    row = Row(
        point,
        scene.kind,
        len(approved),
        sum(1 for n in runs.values() if n == 1),
        sum(1 for request_id in approved if request_id in unknown),
        sum(1 for r, n in runs.items() if n == 0 and r not in unknown),
        sum(1 for n in runs.values() if n > 1),
    )
    print("\n" + row.show())
    record(
        "kill -9, resume work", len(approved), double_runs=sum(max(n - 1, 0) for n in runs.values())
    )
    return row


def work_state(backend: Any, request_id: str) -> str | None:
    work = backend.ledger.get_work(RESUME, request_id)
    return None if work is None else str(work.state)


def assert_finished(scene: Scene, request_id: str, outcome: str = "approved") -> None:
    """Ran once, the work is done, nothing is pending or waiting to resume."""
    assert scene.effects() == [f"{request_id} deploy"]
    with scene.replica() as (graph, backend):
        work = backend.ledger.get_work(RESUME, request_id)
        assert work is not None and work.state == "done", work
        assert backend.ledger.list_work(RESUME) == []
        assert waiting_resumes(backend.authority) == []
        assert pending_approvals(backend.authority, graph).snapshot.pending == []
        final = graph.get_state(config(scene.job()))
        assert final.next == () and final.values["outcome"] == outcome
    assert len(scene.resolutions(request_id)) == 1
    status, out = cli(scene, "pending")
    assert status == 0 and "0 pending" in out and "waiting to resume" not in out, out


def first_resumed(report: dict[str, Any], request_id: str) -> dict[str, Any]:
    """The one pass that resumed ``request_id``."""
    [resumed] = [r for r in report["reports"] if request_id in r.get("resumed", [])]
    return resumed


# -- 1. recorded while a dead process holds the lease ----------------------------------


def test_1_approved_while_a_dead_local_process_holds_the_lease(scene: Scene) -> None:
    _, requested = scene.start_paused()
    request_id = requested.request.id
    holder = spawn_due(scene, mode="hold_and_die", lease_ttl=HOLD_TTL)
    died(holder)  # reaped: the PID is gone

    with scene.replica() as (_, backend):
        lease = backend.ledger.get_lease(scene.thread)
        assert lease is not None, "the dead process's lease row is gone"
        origin = holder_origin(lease.holder)
        assert origin is not None and origin.pid == holder.pid
        assert lease.expires_at > time.time() + HOLD_TTL / 2
        assert holder_is_dead(lease.holder)

    approved = approve_with_cli(scene, request_id)
    assert approved and scene.effects() == []
    with scene.replica() as (_, backend):
        [waiting] = waiting_resumes(backend.authority)
    assert (waiting["request_id"], waiting["state"], waiting["outcome"]) == (
        request_id, "due", "approved",
    )  # fmt: skip
    assert waiting["lease_holder"] == origin.label()

    started = time.time()
    report = served(scene, [request_id])
    first = report["reports"][0]
    assert first["resumed"] == [request_id], report  # the very first pass, no wait for the TTL
    assert first["at"] - started < HOLD_TTL / 4
    assert report["work"][request_id]["attempts"] == 0
    assert_finished(scene, request_id)
    row = tally(scene, "1 dead local lease holder", [request_id])
    assert (row.once, row.lost, row.double) == (1, 0, 0)


def test_1_approved_while_a_remote_holder_has_the_lease_waits_for_its_expiry(
    scene: Scene,
) -> None:
    _, requested = scene.start_paused()
    request_id = requested.request.id
    assert approve_with_cli(scene, request_id)

    replica = spawn_due(
        scene, mode="due", request_ids=[request_id], barrier=True, deadline=RECOVERY, interval=0.05
    )
    assert replica.stdout is not None and replica.stdin is not None
    with scene.replica() as (_, backend):
        assert replica.stdout.readline().strip() == "ready"
        lease = backend.ledger.acquire_lease(scene.thread, REMOTE, ttl=REMOTE_TTL, now=time.time())
        assert lease is not None and holder_origin(REMOTE) is None
        replica.stdin.write("go\n")
        replica.stdin.flush()
    result = finish(replica, RECOVERY + 30)
    report = result["ok"]

    first, *later = report["reports"]
    assert first["deferred"] == [request_id] and first["resumed"] == [], report
    assert first["at"] < lease.expires_at, "the first pass came after the lease expired"
    deferred = first["work"][request_id]
    assert deferred["state"] == "due" and deferred["attempts"] == 1
    assert "lease" in (deferred["last_error"] or ""), deferred
    assert deferred["next_at"] <= lease.expires_at + 1e-6, (deferred, lease)

    resumed = first_resumed(report, request_id)
    assert resumed["at"] >= lease.expires_at, "resumed while the remote holder had the lease"
    assert resumed["at"] - lease.expires_at < 3.0, "not retried soon after the lease expired"
    for earlier in later[: later.index(resumed)]:
        assert earlier["deferred"] == [request_id] and earlier["resumed"] == [], earlier
    assert report["work"][request_id]["state"] == "done"
    assert_finished(scene, request_id)
    row = tally(scene, "1 remote lease holder (TTL 2 s)", [request_id])
    assert (row.once, row.lost, row.double) == (1, 0, 0)


# -- 2. killed between recording the answer and resuming ------------------------------


def test_2_killed_right_after_authority_decide(scene: Scene) -> None:
    _, requested = scene.start_paused()
    request_id = requested.request.id
    decider = spawn_due(scene, mode="decide_and_die", decision=decide(requested).to_json())
    told = json.loads(died(decider).splitlines()[-1])
    assert told == {"outcome": "approved"}

    assert scene.effects() == []
    with scene.replica() as (graph, backend):
        assert pending_approvals(backend.authority, graph).snapshot.pending == []
        [waiting] = waiting_resumes(backend.authority)
        assert (waiting["request_id"], waiting["state"], waiting["lease_holder"]) == (
            request_id, "due", None,
        )  # fmt: skip
        assert len(graph.get_state(config(scene.job())).interrupts) == 1  # still paused

    report = served(scene, [request_id])
    assert report["reports"][0]["resumed"] == [request_id], report
    assert_finished(scene, request_id)
    row = tally(scene, "2 os._exit(9) after decide", [request_id])
    assert (row.once, row.lost, row.double) == (1, 0, 0)


def test_2_killed_at_after_decide_inside_the_presenters_resume(scene: Scene) -> None:
    """kill -9 at the harness's ``after_decide`` point of a presenter that records, then
    resumes: the resolution is recorded and the dead presenter still holds the thread's
    run lease (TTL far beyond the test)."""
    _, requested = scene.start_paused()
    request_id = requested.request.id
    decision = decide(requested).to_json()
    scene.crash(
        "after_decide", mode="resume", channel="record", decisions=[decision], lease_ttl=HOLD_TTL
    )

    [recorded] = scene.resolutions(request_id)
    assert recorded["resolution"]["outcome"] == "approved"
    assert scene.effects() == []
    with scene.replica() as (_, backend):
        lease = backend.ledger.get_lease(scene.thread)
        assert lease is not None and lease.expires_at > time.time() + HOLD_TTL / 2
        assert work_state(backend, request_id) == "due"

    report = served(scene, [request_id])
    assert report["reports"][0]["resumed"] == [request_id], report
    assert_finished(scene, request_id)
    row = tally(scene, "2 kill -9 at after_decide", [request_id])
    assert (row.once, row.lost, row.double) == (1, 0, 0)


def test_2_killed_in_the_action_is_not_run_again_by_resume_due(scene: Scene) -> None:
    """Past the point of the brief, for the unknown column: killed while the action runs,
    the replica does not run it again; the work turns ``unknown`` until a human reconciles
    it, then ``done`` without a second run."""
    _, requested = scene.start_paused()
    request_id = requested.request.id
    decision = decide(requested).to_json()
    scene.crash("in_action", mode="resume", decisions=[decision], lease_ttl=CRASH_TTL)
    assert scene.effects() == [f"{request_id} deploy"]

    report = served(scene, [request_id])
    assert [r for r in report["reports"] if r.get("resumed")] == [], report
    assert any(request_id in r.get("unknown", []) for r in report["reports"]), report
    assert report["work"][request_id]["state"] == "unknown"
    assert scene.effects() == [f"{request_id} deploy"]
    with scene.replica() as (_, backend):
        [unknown] = unknown_executions(backend.authority)
        assert unknown.request_id == request_id
        assert reconcile_execution(backend.authority, request_id, "done", actor="ops")
        assert work_state(backend, request_id) == "due"  # handed back to the resume work
    row = tally(scene, "2 kill -9 in the action (extra)", [request_id], unknown=[request_id])

    again = served(scene, [request_id])
    assert again["work"][request_id]["state"] == "done", again
    assert_finished(scene, request_id, outcome="conflict")  # finished, not run again
    assert (row.once, row.unknown, row.lost, row.double) == (1, 1, 0, 0)


# -- 3. two replicas over threads approved while no server ran -----------------------


def test_3_two_replicas_resume_every_approval_exactly_once(scene: Scene) -> None:
    scene.options = {"action_seconds": 0.1}  # a short action: the replicas overlap
    requests: dict[str, ApprovalRequested] = {}
    for index in range(THREADS):
        scene.thread = f"t-due-{index}"
        _, requested = scene.start_paused()
        requests[scene.thread] = requested
    ids = [requested.request.id for requested in requests.values()]

    with scene.replica() as (_, backend):  # no server runs: approvals are only recorded
        told = [
            backend.authority.decide(decide(requested), actor=HUMAN).resolution.outcome
            for requested in requests.values()
        ]
        due = backend.ledger.list_work(RESUME, states=("due",))
    assert told == ["approved"] * THREADS
    assert sorted(work.request_id for work in due) == sorted(ids)
    assert scene.effects() == []

    replicas = [
        spawn_due(scene, mode="due", request_ids=ids, barrier=True, deadline=RECOVERY)
        for _ in range(2)
    ]
    release(replicas)
    reports = [finish(replica, RECOVERY + 30)["ok"] for replica in replicas]

    resumed = [
        [rid for r in report["reports"] for rid in r.get("resumed", [])] for report in reports
    ]
    deferred = [sum(len(r.get("deferred", [])) for r in report["reports"]) for report in reports]
    errors = [r["error"] for report in reports for r in report["reports"] if "error" in r]
    print(
        f"\n{scene.kind}: replica A resumed {len(resumed[0])} deferred {deferred[0]}, "
        f"replica B resumed {len(resumed[1])} deferred {deferred[1]}, pass errors {errors}"
    )
    row = tally(scene, "3 two replicas, 8 threads", ids)
    assert sorted(resumed[0] + resumed[1]) == sorted(ids), "an approval was not resumed once"
    assert set(resumed[0]).isdisjoint(resumed[1])
    assert (row.once, row.lost, row.double) == (THREADS, 0, 0)
    with scene.replica() as (graph, backend):
        assert backend.ledger.list_work(RESUME) == []
        assert all(backend.ledger.get_work(RESUME, rid).state == "done" for rid in ids)  # type: ignore[union-attr]
        for thread in requests:
            final = graph.get_state({"configurable": {"thread_id": thread}})
            assert final.next == () and final.values["outcome"] == "approved", thread
    assert sorted(scene.effects()) == sorted(f"{rid} deploy" for rid in ids)
    for replica in replicas:
        kill9(replica)

"""kill -9 a replica at the three dangerous moments, then recover from another process.

Each case runs on SQLite (two processes on one file) and on Postgres (two
processes on one schema). The worker that dies is a separate OS process stopped
at an exact point (a marker file tells the test it got there); the recovering
replica is this test process, with the same graph on the same backend.

(a) after the interrupt is checkpointed: the approval is still listed as pending
    and is answered normally; approved runs the action once, denied never.
(b) after an asynchronous channel recorded the resolution, before the action runs:
    nothing ran; the presenter's retry (or the stranded-run sweep) resumes the run,
    which then runs the approved action exactly once, or a denied one never. An
    answer that arrives with the resume is recorded by the run's gate in one write:
    killed before that write, the request is still pending and answerable (any
    decision); killed after it, the approval, its execution claim and its resume work
    are recorded together, so the outcome is unknown until a human reconciles it
    (never run twice).
(c) while the action runs: LangGraph re-executes the node on recovery, but the
    gate finds the dead run's execution claim and does not run the action again:
    the outcome is reported unknown until a human reconciles it. An action
    declared idempotent is run again, and applies its keyed effect once.

tests/distributed/test_at_most_once.py kills at twelve points across the action.
"""

from __future__ import annotations

import pytest

from aais_langgraph import (
    ApprovalRequested,
    ExecutionUnknownError,
    ThreadDriver,
    pending_approvals,
    resume_with_decisions,
)
from aais_langgraph.gate import reconcile_execution, unknown_executions
from aais_langgraph.ledger import RESUME
from aais_langgraph.threads import stranded_threads
from hostile.report import record

from .harness import Scene, decide
from .worker import HUMAN, config

pytestmark = pytest.mark.timeout(120)

TTL = 2.0  # the run lease of the crashing resume, seconds


def tally(scene: Scene, *, denied: bool = False, category: str = "kill -9") -> None:
    """One kill point on this backend in the hostile-input table, read from the effects log:
    a denied action that ran failed open; every run beyond the first is a double run."""
    ran = len(scene.effects())
    record(category, 1, failed_open=int(denied and ran > 0), double_runs=max(ran - 1, 0))


@pytest.mark.parametrize("kind", ["approve", "deny"])
def test_a_killed_after_the_interrupt_is_checkpointed(scene: Scene, kind: str) -> None:
    with scene.replica(setup=True):
        pass
    scene.crash("interrupt_saved", mode="start")

    with scene.replica() as (graph, backend):
        [pending] = pending_approvals(backend.authority, graph).snapshot.pending
        [interrupt] = graph.get_state(config(scene.job())).interrupts
        assert interrupt.value["request"]["id"] == pending.id
        assert scene.effects() == []

        requested = ApprovalRequested.from_data(interrupt.value)
        [resolved] = resume_with_decisions(
            graph, config(scene.job()), [decide(requested, kind)], actor=HUMAN,
            authority=backend.authority,
        )  # fmt: skip
        final = graph.get_state(config(scene.job()))

    tally(scene, denied=kind == "deny")
    outcome = "approved" if kind == "approve" else "denied"
    assert resolved.resolution.outcome == outcome
    assert final.next == () and final.values["outcome"] == outcome
    assert len(scene.resolutions(pending.id)) == 1
    assert scene.effects() == ([f"{pending.id} deploy"] if kind == "approve" else [])


@pytest.mark.parametrize("kind", ["approve", "deny"])
def test_b_killed_after_the_resolution_is_recorded(scene: Scene, kind: str) -> None:
    """The resolution is in the ledger, the run never resumed; the presenter retries."""
    _, requested = scene.start_paused()
    decision = decide(requested, kind).to_json()
    scene.crash(
        "after_decide", mode="resume", channel="record", decisions=[decision], lease_ttl=TTL
    )

    request_id = requested.request.id
    [recorded] = scene.resolutions(request_id)
    assert scene.effects() == []
    with scene.replica() as (graph, backend):
        assert pending_approvals(backend.authority, graph).snapshot.pending == []
        assert stranded_threads(graph, backend.authority) == {scene.thread: [request_id]}
        # The presenter did not hear back and sends the same decision again.
        [retried] = resume_with_decisions(
            graph, config(scene.job()), [decision], actor=HUMAN, authority=backend.authority,
            lease_wait=TTL + 5,
        )  # fmt: skip
        final = graph.get_state(config(scene.job()))
        assert stranded_threads(graph, backend.authority) == {}

    tally(scene, denied=kind == "deny")
    assert retried.resolution.id == recorded["resolution"]["id"]
    assert final.next == () and final.values["outcome"] == recorded["resolution"]["outcome"]
    assert len(scene.resolutions(request_id)) == 1
    assert scene.effects() == ([f"{request_id} deploy"] if kind == "approve" else [])


@pytest.mark.parametrize("retry", ["approve", "deny"])
def test_b_killed_before_the_run_records_the_answer_leaves_it_pending(
    scene: Scene, retry: str
) -> None:
    """The answer arrived with the resume and was authorized; the run's gate died before
    its one write: nothing is recorded, the request is pending and takes any answer."""
    _, requested = scene.start_paused()
    decision = decide(requested).to_json()
    scene.crash("before_record", mode="resume", decisions=[decision], lease_ttl=TTL)

    request_id = requested.request.id
    assert scene.resolutions(request_id) == [] and scene.effects() == []
    with scene.replica() as (graph, backend):
        [pending] = pending_approvals(backend.authority, graph).snapshot.pending
        assert pending.id == request_id
        assert backend.ledger.get_work(RESUME, request_id) is None  # nothing to resume
        assert unknown_executions(backend.authority) == []
        [answered] = resume_with_decisions(
            graph, config(scene.job()), [decide(requested, retry)], actor=HUMAN,
            authority=backend.authority, lease_wait=TTL + 5,
        )  # fmt: skip
        final = graph.get_state(config(scene.job()))

    tally(scene, denied=retry == "deny")
    outcome = "approved" if retry == "approve" else "denied"
    assert answered.resolution.outcome == outcome
    assert final.next == () and final.values["outcome"] == outcome
    assert len(scene.resolutions(request_id)) == 1
    assert scene.effects() == ([f"{request_id} deploy"] if retry == "approve" else [])


def test_b_killed_right_after_the_run_records_the_answer_is_not_run(scene: Scene) -> None:
    """The gate's one write committed (the approval, its execution claim, its resume
    work) and the run died before the node got its answer. Nothing in the ledger tells
    that from a death mid-action, so the outcome is unknown, never run twice; a human's
    ``done`` finishes the run without running it."""
    _, requested = scene.start_paused()
    decision = decide(requested).to_json()
    scene.crash("after_record", mode="resume", decisions=[decision], lease_ttl=TTL)

    request_id = requested.request.id
    [recorded] = scene.resolutions(request_id)
    assert recorded["resolution"]["outcome"] == "approved" and scene.effects() == []
    with scene.replica() as (graph, backend):
        work = backend.ledger.get_work(RESUME, request_id)
        assert work is not None and work.state == "due"  # recorded in the same write
        execution = backend.authority.execution(request_id)
        assert execution is not None and execution.state == "executing"
        report = ThreadDriver(graph, backend.authority, lease_ttl=TTL).resume_due()
        assert report.unknown == [request_id] and report.resumed == []
        [unknown] = unknown_executions(backend.authority)
        assert unknown.request_id == request_id
        reconcile_execution(backend.authority, request_id, "done", actor="ops")
        ThreadDriver(graph, backend.authority, lease_ttl=TTL).resume_stranded()
        final = graph.get_state(config(scene.job()))

    tally(scene)
    assert final.next == () and final.values["outcome"] == "conflict"  # not approved
    assert scene.effects() == []
    assert len(scene.resolutions(request_id)) == 1


def test_b_killed_after_the_node_got_its_approval_is_retried_with_a_fresh_request(
    scene: Scene,
) -> None:
    """The node had its approval (and the claim), the action had not started. Nothing
    in the ledger can tell that from a crash mid-action, so the outcome is unknown;
    a human's ``retry`` makes the run ask again, and the new approval runs it once."""
    _, requested = scene.start_paused()
    decision = decide(requested).to_json()
    scene.crash("before_action", mode="resume", decisions=[decision], lease_ttl=TTL)

    request_id = requested.request.id
    assert scene.effects() == []
    with scene.replica() as (graph, backend):
        assert stranded_threads(graph, backend.authority) == {scene.thread: [request_id]}
        assert ThreadDriver(graph, backend.authority, lease_ttl=TTL).resume_stranded() == []
        [unknown] = unknown_executions(backend.authority)
        assert unknown.request_id == request_id

        reconcile_execution(backend.authority, request_id, "retry", actor="ops")
        assert ThreadDriver(graph, backend.authority, lease_ttl=TTL).resume_stranded() == [
            backend.authority.get_resolution(request_id)
        ]
        [fresh] = pending_approvals(backend.authority, graph).snapshot.pending
        assert fresh.id != request_id and fresh.action_digest == requested.request.action_digest
        [again] = resume_with_decisions(
            graph, config(scene.job()),
            [decide(ApprovalRequested(**{**requested.model_dump(), "request": fresh}))],
            actor=HUMAN, authority=backend.authority,
        )  # fmt: skip
        final = graph.get_state(config(scene.job()))
        assert unknown_executions(backend.authority) == []

    tally(scene)
    assert again.approved and final.next == () and final.values["outcome"] == "approved"
    assert scene.effects() == [f"{fresh.id} deploy"]


def test_c_killed_while_the_action_runs_is_not_run_again(scene: Scene) -> None:
    """The worker dies after the action applied its effects but before the node
    returned. Before: recovery ran the action again (at-least-once, 2 effects).
    Now the recovered run finds the dead run's claim and reports the outcome as
    unknown; the thread stays paused until a human reconciles it."""
    _, requested = scene.start_paused()
    decision = decide(requested).to_json()
    scene.crash("in_action", mode="resume", decisions=[decision], lease_ttl=TTL)

    request_id = requested.request.id
    assert scene.effects() == [f"{request_id} deploy"]
    with scene.replica() as (graph, backend):
        assert ThreadDriver(graph, backend.authority, lease_ttl=TTL).resume_stranded() == []
        with pytest.raises(ExecutionUnknownError):  # the presenter's retry hears it too
            resume_with_decisions(
                graph, config(scene.job()), [decision], actor=HUMAN,
                authority=backend.authority, lease_wait=TTL + 5,
            )  # fmt: skip
        [unknown] = unknown_executions(backend.authority)
        assert (unknown.request_id, unknown.thread_id) == (request_id, scene.thread)
        assert stranded_threads(graph, backend.authority) == {}  # it waits for a human
        snapshot = pending_approvals(backend.authority, graph).to_json()
        [listed] = snapshot["extensions"]["aais-langgraph.org/unknown_executions"]
        assert snapshot["snapshot"]["pending"] == [] and listed["request_id"] == request_id
        assert len(graph.get_state(config(scene.job())).interrupts) == 1  # still paused

        reconcile_execution(backend.authority, request_id, "done", actor="ops")
        ThreadDriver(graph, backend.authority, lease_ttl=TTL).resume_stranded()
        final = graph.get_state(config(scene.job()))

    tally(scene)
    assert final.next == () and final.values["outcome"] == "conflict"  # not approved
    assert len(scene.resolutions(request_id)) == 1
    assert scene.resolutions(request_id)[0]["resolution"]["outcome"] == "approved"  # unchanged
    assert scene.effects() == [f"{request_id} deploy"]


def test_c_an_idempotent_action_killed_while_it_runs_is_run_again(scene: Scene) -> None:
    """Declared idempotent: recovery re-executes it, and its keyed effect applies once."""
    scene.options = {"idempotent": True}
    _, requested = scene.start_paused()
    decision = decide(requested).to_json()
    scene.crash("in_action", mode="resume", decisions=[decision], lease_ttl=TTL)

    request_id = requested.request.id
    with scene.replica() as (graph, backend):
        [resumed] = ThreadDriver(graph, backend.authority, lease_ttl=TTL).resume_stranded()
        final = graph.get_state(config(scene.job()))

    # Declared idempotent: running it again is the documented retry, in a row of its own.
    tally(scene, category="kill -9, idempotent (opt-in)")
    assert resumed.approved and final.next == ()
    assert final.values["request_id"] == request_id  # the key the action was handed
    assert scene.effects() == [f"{request_id} deploy"] * 2
    assert scene.keyed() == [request_id]

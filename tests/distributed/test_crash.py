"""kill -9 a replica at the three dangerous moments, then recover from another process.

Each case runs on SQLite (two processes on one file) and on Postgres (two
processes on one schema). The worker that dies is a separate OS process stopped
at an exact point (a marker file tells the test it got there); the recovering
replica is this test process, with the same graph on the same backend.

(a) after the interrupt is checkpointed: the approval is still listed as pending
    and is answered normally; approved runs the action once, denied never.
(b) after the resolution is recorded but before the action runs: nothing ran;
    the presenter's retry (or the stranded-run sweep) resumes the run, which then
    runs the approved action exactly once, or a denied one never.
(c) while the action runs: LangGraph re-executes the node on recovery, so the
    action itself runs again (at-least-once); an action that keys its effect by
    the request id applies it once.
"""

from __future__ import annotations

import pytest

from aais_langgraph import ApprovalRequested, pending_approvals, resume_with_decisions
from aais_langgraph.gate import resume_stranded, stranded_threads

from .harness import Scene, decide
from .worker import HUMAN, config

pytestmark = pytest.mark.timeout(120)

TTL = 2.0  # the run lease of the crashing resume, seconds


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
    scene.crash("after_decide", mode="resume", decisions=[decision], lease_ttl=TTL)

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

    assert retried.resolution.id == recorded["resolution"]["id"]
    assert final.next == () and final.values["outcome"] == recorded["resolution"]["outcome"]
    assert len(scene.resolutions(request_id)) == 1
    assert scene.effects() == ([f"{request_id} deploy"] if kind == "approve" else [])


def test_b_killed_after_the_node_got_its_approval(scene: Scene) -> None:
    """The node was re-running with the approval, the action not started; a sweep recovers."""
    _, requested = scene.start_paused()
    decision = decide(requested).to_json()
    scene.crash("before_action", mode="resume", decisions=[decision], lease_ttl=TTL)

    request_id = requested.request.id
    assert scene.effects() == []
    with scene.replica() as (graph, backend):
        assert stranded_threads(graph, backend.authority) == {scene.thread: [request_id]}
        [resumed] = resume_stranded(graph, backend.authority, lease_ttl=TTL)
        final = graph.get_state(config(scene.job()))
        again = resume_stranded(graph, backend.authority, lease_ttl=TTL)

    assert resumed.approved and again == []
    assert final.next == () and final.values["outcome"] == "approved"
    assert len(scene.resolutions(request_id)) == 1
    assert scene.effects() == [f"{request_id} deploy"]
    assert scene.keyed() == [request_id]


def test_c_killed_while_the_action_runs_is_at_least_once(scene: Scene) -> None:
    """Measured: recovery re-executes the node, so the action's effect repeats.

    The worker dies after the action applied its effects but before the node
    returned (so before LangGraph checkpointed the node's result). The recovered
    run is handed the same approval and runs the action again: the plain effect
    is applied twice. The effect keyed by the request id is applied once.
    """
    _, requested = scene.start_paused()
    decision = decide(requested).to_json()
    scene.crash("in_action", mode="resume", decisions=[decision], lease_ttl=TTL)

    request_id = requested.request.id
    assert scene.effects() == [f"{request_id} deploy"]
    with scene.replica() as (graph, backend):
        assert len(graph.get_state(config(scene.job())).interrupts) == 1  # still paused
        [resumed] = resume_stranded(graph, backend.authority, lease_ttl=TTL)
        final = graph.get_state(config(scene.job()))

    assert resumed.approved and final.next == ()
    assert final.values["request_id"] == request_id  # the key the action was handed
    assert len(scene.resolutions(request_id)) == 1
    assert scene.effects() == [f"{request_id} deploy"] * 2, "expected at-least-once"
    assert scene.keyed() == [request_id]

"""The per-thread run lease across processes: a dead holder blocks at most its TTL, and a
live holder keeps it for as long as it drives the run, however long the action takes."""

from __future__ import annotations

import time

import pytest

from aais_langgraph import LeaseHeldError, resume_with_decisions
from aais_langgraph.authority import run_lease

from .harness import Scene, decide, finish
from .worker import HUMAN, config

pytestmark = pytest.mark.timeout(120)

TTL = 2.0


def test_a_killed_lease_holder_blocks_the_thread_for_at_most_the_ttl(scene: Scene) -> None:
    _, requested = scene.start_paused()
    holder = scene.spawn(mode="hold", crash_at="lease_held", lease_ttl=TTL)
    held_at = scene.wait_marker("lease_held", holder)  # written after the lease was taken
    scene.kill_all()
    killed_at = time.time()

    with scene.replica() as (graph, backend):
        with (
            pytest.raises(LeaseHeldError),  # the dead process still holds it
            run_lease(backend.ledger, scene.thread, ttl=TTL),
        ):
            pass
        [resolved] = resume_with_decisions(
            graph, config(scene.job()), [decide(requested)], actor=HUMAN,
            authority=backend.authority, lease_wait=TTL + 10,
        )  # fmt: skip
        done_at = time.time()
        final = graph.get_state(config(scene.job()))

    # The lease expires TTL after its last renewal, which came before the kill.
    blocked = done_at - killed_at
    assert blocked <= TTL + 1.0, f"thread blocked {blocked:.2f} s after the kill, lease {TTL} s"
    assert done_at >= held_at + TTL - 0.5, "resumed before the lease expired: was it held?"
    assert resolved.approved and final.next == ()
    assert scene.effects() == [f"{requested.request.id} deploy"]


def test_a_slow_action_keeps_its_lease_past_the_ttl(scene: Scene) -> None:
    """The holder renews while it runs, so a retry arriving after the TTL cannot run it again."""
    _, requested = scene.start_paused()
    decision = decide(requested).to_json()
    first = scene.spawn(mode="resume", decisions=[decision], lease_ttl=TTL, action_seconds=3 * TTL)
    applied_at = scene.wait_marker("action_applied", first)
    time.sleep(max(0.0, applied_at + 1.5 * TTL - time.time()))  # an unrenewed lease is gone

    with scene.replica() as (graph, backend):
        # The presenter retries the same decision while the first run is still in the action.
        [retried] = resume_with_decisions(
            graph, config(scene.job()), [decision], actor=HUMAN, authority=backend.authority,
            lease_ttl=TTL, lease_wait=6 * TTL,
        )  # fmt: skip
        retried_at = time.time()
    result = finish(first)

    assert scene.effects() == [f"{requested.request.id} deploy"], "the action ran twice"
    assert result["ok"]["outcome"] == "approved" and retried.approved
    assert retried_at >= applied_at + 3 * TTL - 0.5, "the retry did not wait for the first run"

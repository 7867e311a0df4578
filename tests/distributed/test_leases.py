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


def test_a_killed_lease_holder_on_this_host_frees_the_thread_at_once(scene: Scene) -> None:
    """The holder's name records its PID and start time: a dead local holder is seen dead."""
    _, requested = scene.start_paused()
    holder = scene.spawn(mode="hold", crash_at="lease_held", lease_ttl=10 * TTL)
    scene.wait_marker("lease_held", holder)  # written after the lease was taken
    scene.kill_all()
    killed_at = time.time()

    with scene.replica() as (graph, backend):
        held = backend.ledger.get_lease(scene.thread)
        assert held is not None and held.expires_at > time.time() + 5 * TTL
        [resolved] = resume_with_decisions(
            graph, config(scene.job()), [decide(requested)], actor=HUMAN,
            authority=backend.authority, lease_wait=0,
        )  # fmt: skip
        done_at = time.time()
        final = graph.get_state(config(scene.job()))

    assert done_at - killed_at < TTL, "waited for a dead local holder's lease to expire"
    assert resolved.approved and final.next == ()
    assert scene.effects() == [f"{requested.request.id} deploy"]


def test_a_lease_held_elsewhere_blocks_the_thread_for_at_most_the_ttl(scene: Scene) -> None:
    """A holder this host cannot see (another host, or a name without an origin) is presumed
    alive: its lease blocks the thread until it expires, and no longer."""
    _, requested = scene.start_paused()
    with scene.replica() as (graph, backend):
        taken = backend.ledger.acquire_lease(
            scene.thread, "holder_on_another_host", ttl=TTL, now=time.time()
        )
        assert taken is not None
        with (
            pytest.raises(LeaseHeldError),  # the other holder still has it
            run_lease(backend.ledger, scene.thread, ttl=TTL),
        ):
            pass
        [resolved] = resume_with_decisions(
            graph, config(scene.job()), [decide(requested)], actor=HUMAN,
            authority=backend.authority, lease_wait=TTL + 10,
        )  # fmt: skip
        done_at = time.time()
        final = graph.get_state(config(scene.job()))

    assert done_at <= taken.expires_at + 1.0, "blocked past the lease's expiry"
    assert done_at >= taken.expires_at - 0.05, "resumed before the lease expired: was it held?"
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

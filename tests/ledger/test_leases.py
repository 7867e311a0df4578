"""Run leases: one holder per thread, taken over only after expiry."""

from __future__ import annotations

import pytest

from aais_langgraph.ledger import RESUME, Lease, Ledger


def test_free_lease_is_acquired(ledger: Ledger) -> None:
    lease = ledger.acquire_lease("thr_1", "worker_a", ttl=30, now=1000.0)

    assert lease == Lease("thr_1", "worker_a", 1030.0)


def test_held_lease_is_refused_to_another_holder(ledger: Ledger) -> None:
    ledger.acquire_lease("thr_1", "worker_a", ttl=30, now=1000.0)

    assert ledger.acquire_lease("thr_1", "worker_b", ttl=30, now=1029.9) is None


def test_leases_of_different_threads_are_independent(ledger: Ledger) -> None:
    ledger.acquire_lease("thr_1", "worker_a", ttl=30, now=1000.0)

    assert ledger.acquire_lease("thr_2", "worker_b", ttl=30, now=1000.0) is not None


def test_holder_reacquires_its_own_lease(ledger: Ledger) -> None:
    ledger.acquire_lease("thr_1", "worker_a", ttl=30, now=1000.0)

    lease = ledger.acquire_lease("thr_1", "worker_a", ttl=30, now=1010.0)

    assert lease == Lease("thr_1", "worker_a", 1040.0)


def test_expired_lease_is_taken_over(ledger: Ledger) -> None:
    ledger.acquire_lease("thr_1", "worker_a", ttl=30, now=1000.0)

    lease = ledger.acquire_lease("thr_1", "worker_b", ttl=30, now=1030.0)

    assert lease == Lease("thr_1", "worker_b", 1060.0)
    assert ledger.renew_lease("thr_1", "worker_a", ttl=30, now=1031.0) is None
    assert ledger.release_lease("thr_1", "worker_a") is False


def test_holder_renews_an_unexpired_lease(ledger: Ledger) -> None:
    ledger.acquire_lease("thr_1", "worker_a", ttl=30, now=1000.0)

    renewed = ledger.renew_lease("thr_1", "worker_a", ttl=60, now=1020.0)

    assert renewed == Lease("thr_1", "worker_a", 1080.0)
    assert ledger.acquire_lease("thr_1", "worker_b", ttl=30, now=1050.0) is None


def test_expired_or_foreign_lease_is_not_renewed(ledger: Ledger) -> None:
    ledger.acquire_lease("thr_1", "worker_a", ttl=30, now=1000.0)

    assert ledger.renew_lease("thr_1", "worker_b", ttl=30, now=1010.0) is None
    assert ledger.renew_lease("thr_1", "worker_a", ttl=30, now=1030.0) is None
    assert ledger.renew_lease("thr_unknown", "worker_a", ttl=30, now=1000.0) is None


def test_release_by_non_holder_fails_and_keeps_the_lease(ledger: Ledger) -> None:
    ledger.acquire_lease("thr_1", "worker_a", ttl=30, now=1000.0)

    assert ledger.release_lease("thr_1", "worker_b") is False
    assert ledger.acquire_lease("thr_1", "worker_b", ttl=30, now=1001.0) is None


def test_released_lease_is_free_for_another_holder(ledger: Ledger) -> None:
    ledger.acquire_lease("thr_1", "worker_a", ttl=30, now=1000.0)

    assert ledger.release_lease("thr_1", "worker_a") is True

    assert ledger.acquire_lease("thr_1", "worker_b", ttl=30, now=1001.0) is not None
    assert ledger.release_lease("thr_1", "worker_a") is False


@pytest.mark.parametrize("ttl", [0, -1, float("inf"), float("nan")])
def test_lease_needs_a_positive_finite_ttl(ledger: Ledger, ttl: float) -> None:
    with pytest.raises(ValueError):
        ledger.acquire_lease("thr_1", "worker_a", ttl=ttl, now=1000.0)


def test_a_release_marks_the_finished_resume_work_done_in_the_same_write(ledger: Ledger) -> None:
    from .envelopes import approval, request_envelope

    for request_id in ("apr_1", "apr_2", "apr_3"):
        requested = request_envelope(request_id)
        ledger.add_request(requested, thread_id="thr_1")
        ledger.record_resolution(approval(requested, resolution_id=f"res_{request_id}"))
    assert {w.request_id for w in ledger.list_work(RESUME)} >= {"apr_1", "apr_2", "apr_3"}
    ledger.acquire_lease("thr_1", "worker_a", ttl=30, now=1000.0)

    assert ledger.release_lease("thr_1", "worker_a", done=("apr_1", "apr_2", "apr_unknown"))

    states = {w.request_id: w.state for w in ledger.list_work(RESUME, states=("due", "done"))}
    assert states["apr_1"] == states["apr_2"] == "done"
    assert states["apr_3"] == "due"
    assert "apr_unknown" not in states
    assert ledger.get_lease("thr_1") is None
    # A lease lost meanwhile is not released, and the finished work is done all the same.
    assert ledger.release_lease("thr_1", "worker_a", done=("apr_3",)) is False
    assert ledger.get_work(RESUME, "apr_3").state == "done"  # type: ignore[union-attr]


def test_a_release_marks_the_runs_claims_executed_in_the_same_write(ledger: Ledger) -> None:
    from aais_langgraph.ledger.executions import claim_change, finish_change
    from aais_langgraph.ledger.integrity import execution_vouched

    from .envelopes import approval, request_envelope

    requested = request_envelope("apr_1")
    ledger.add_request(requested, thread_id="thr_1")
    ledger.record_resolution(approval(requested, resolution_id="res_apr_1"))
    claim = claim_change("apr_1", "w", thread_id="thr_1", ttl=30.0, now=1000.0, retry=False)
    ledger.update_execution("apr_1", claim, durable=False)
    ledger.acquire_lease("thr_1", "worker_a", ttl=30, now=1000.0)
    tip = ledger.audit_tip()

    released = ledger.release_lease(
        "thr_1", "worker_a", done=("apr_1",), executions={"apr_1": finish_change(1001.0)}
    )

    assert released
    record, entry = ledger.execution_with_entry("apr_1")
    assert record is not None and record.state == "executed"
    assert execution_vouched(record, entry) is None  # audited in the same write
    assert tip is not None and entry is not None and entry.index == tip[0] + 1
    assert ledger.get_lease("thr_1") is None
    assert ledger.get_work(RESUME, "apr_1").state == "done"  # type: ignore[union-attr]

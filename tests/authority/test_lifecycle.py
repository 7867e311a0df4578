"""Requests from creation to their one resolution: idempotency, expiry, cancel, supersede."""

from __future__ import annotations

from datetime import timedelta

import pytest

from aais_langgraph.authority import ApprovalAuthority, UnknownRequestError

from .support import FakeClock, action, decision, new_request, origin


def test_request_with_same_id_is_idempotent(authority: ApprovalAuthority, clock: FakeClock) -> None:
    first = new_request(authority, request_id="apr_fixed")
    clock.advance(120)
    again = new_request(authority, request_id="apr_fixed")
    assert again == first
    assert authority.ledger.last_sequence() == 1


def test_add_of_stored_request_returns_stored_envelope(authority: ApprovalAuthority) -> None:
    stored = new_request(authority)
    assert authority.add(stored.to_json()) == stored
    assert authority.ledger.last_sequence() == 1


def test_request_is_stored_before_it_is_returned(authority: ApprovalAuthority) -> None:
    requested = new_request(authority, thread_id="thread-1")
    assert authority.get_request(requested.request.id) == requested
    stored = authority.get_stored_request(requested.request.id)
    assert stored is not None
    assert (stored.status, stored.thread_id) == ("pending", "thread-1")
    assert authority.events_after(0).events == [requested.to_json()]


def test_every_request_gets_a_finite_default_expiry(authority: ApprovalAuthority) -> None:
    requested = authority.request(action(), origin=origin())
    assert requested.request.expires_at == "2026-08-30T18:15:00.000000Z"


def test_decision_at_expiry_resolves_expired(
    authority: ApprovalAuthority, clock: FakeClock
) -> None:
    requested = new_request(authority, expires_in=60)
    clock.advance(60)
    resolved = authority.decide(decision(requested))
    assert resolved.resolution.outcome == "expired"
    assert authority.get_resolution(requested.request.id) == resolved


def test_decision_just_before_expiry_is_approved(
    authority: ApprovalAuthority, clock: FakeClock
) -> None:
    requested = new_request(authority, expires_in=60)
    clock.advance(59.999999)
    assert authority.decide(decision(requested)).resolution.outcome == "approved"


def test_expiry_uses_authority_clock_not_decided_at(
    authority: ApprovalAuthority, clock: FakeClock
) -> None:
    requested = new_request(authority, expires_in=60)
    early = decision(requested, decided_at="2026-08-30T18:00:01Z")
    clock.advance(3600)
    assert authority.decide(early).resolution.outcome == "expired"


def test_now_argument_overrides_the_clock(authority: ApprovalAuthority, clock: FakeClock) -> None:
    requested = new_request(authority, expires_in=60)
    resolved = authority.decide(decision(requested), now=clock.now + timedelta(seconds=61))
    assert resolved.resolution.outcome == "expired"


def test_naive_now_is_refused(authority: ApprovalAuthority) -> None:
    requested = new_request(authority)
    with pytest.raises(ValueError, match="timezone-aware"):
        authority.decide(decision(requested), now=authority.clock().replace(tzinfo=None))
    assert authority.get_resolution(requested.request.id) is None


def test_identical_replay_returns_same_resolution(authority: ApprovalAuthority) -> None:
    requested = new_request(authority)
    body = decision(requested)
    first = authority.decide(body)
    assert authority.decide(body) == first
    assert authority.ledger.last_sequence() == 3


def test_identical_replay_after_expiry_returns_same_resolution(
    authority: ApprovalAuthority, clock: FakeClock
) -> None:
    requested = new_request(authority, expires_in=60)
    body = decision(requested)
    first = authority.decide(body)
    clock.advance(3600)
    assert authority.decide(body) == first


def test_different_decision_after_resolution_is_conflict(authority: ApprovalAuthority) -> None:
    requested = new_request(authority)
    first = authority.decide(decision(requested))
    conflict = authority.decide(decision(requested, "deny"))
    assert conflict.resolution.outcome == "conflict"
    assert conflict.resolution.extensions == {
        "aais-langgraph.org/recorded_resolution_id": first.resolution.id
    }
    assert authority.get_resolution(requested.request.id) == first
    assert authority.ledger.last_sequence() == 3


def test_deny_is_recorded_denied(authority: ApprovalAuthority) -> None:
    requested = new_request(authority)
    resolved = authority.decide(decision(requested, "deny"))
    assert (resolved.resolution.outcome, resolved.resolution.effective_scope) == ("denied", "once")
    assert authority.get_resolution(requested.request.id) == resolved


def test_offered_cancel_decision_is_recorded_cancelled(authority: ApprovalAuthority) -> None:
    requested = new_request(
        authority,
        choices=[
            {"decision": "approve", "scope": "once", "label": "Approve"},
            {"decision": "cancel", "scope": "once", "label": "Cancel"},
        ],
    )
    resolved = authority.decide(decision(requested, "cancel"))
    assert resolved.resolution.outcome == "cancelled"
    assert resolved.resolution.effective_scope is None


def test_changed_current_action_is_recorded_stale(authority: ApprovalAuthority) -> None:
    requested = new_request(authority)
    resolved = authority.decide(decision(requested), current_action=action("node --check b.js"))
    assert resolved.resolution.outcome == "stale"
    assert authority.get_resolution(requested.request.id) == resolved
    again = authority.decide(decision(requested))
    assert again.resolution.outcome == "conflict"


def test_unchanged_current_action_approves(authority: ApprovalAuthority) -> None:
    requested = new_request(authority)
    resolved = authority.decide(decision(requested), current_action=requested.request.action)
    assert resolved.resolution.outcome == "approved"


def test_cancel_resolves_pending_request(authority: ApprovalAuthority) -> None:
    requested = new_request(authority)
    cancelled = authority.cancel(requested.request.id, reason="The run was stopped.")
    assert cancelled.resolution.outcome == "cancelled"
    assert cancelled.resolution.message == "The run was stopped."
    assert authority.get_resolution(requested.request.id) == cancelled


def test_cancel_of_resolved_request_keeps_its_resolution(authority: ApprovalAuthority) -> None:
    requested = new_request(authority)
    approved = authority.decide(decision(requested))
    assert authority.cancel(requested.request.id) == approved


def test_decision_after_cancel_is_conflict(authority: ApprovalAuthority) -> None:
    requested = new_request(authority)
    authority.cancel(requested.request.id)
    assert authority.decide(decision(requested)).resolution.outcome == "conflict"


def test_cancel_of_unknown_request_raises(authority: ApprovalAuthority) -> None:
    with pytest.raises(UnknownRequestError) as caught:
        authority.cancel("apr_missing")
    assert caught.value.pointer == "/request_id"


def test_cancel_session_cancels_only_that_sessions_pending_requests(
    authority: ApprovalAuthority,
) -> None:
    mine = [new_request(authority, session_id="s-1") for _ in range(2)]
    other = new_request(authority, session_id="s-2")
    done = new_request(authority, session_id="s-1")
    authority.decide(decision(done))
    cancelled = authority.cancel_session("s-1")
    assert [r.resolution.request_id for r in cancelled] == [r.request.id for r in mine]
    assert authority.get_resolution(other.request.id) is None
    assert authority.get_resolution(done.request.id).resolution.outcome == "approved"  # type: ignore[union-attr]


def test_cancel_thread_cancels_only_that_threads_pending_requests(
    authority: ApprovalAuthority,
) -> None:
    mine = new_request(authority, thread_id="t-1")
    other = new_request(authority, thread_id="t-2")
    assert [r.resolution.request_id for r in authority.cancel_thread("t-1")] == [mine.request.id]
    assert authority.get_resolution(other.request.id) is None


def test_expire_due_resolves_only_requests_at_or_past_expiry(
    authority: ApprovalAuthority, clock: FakeClock
) -> None:
    due = new_request(authority, expires_in=60)
    later = new_request(authority, expires_in=120)
    expired = authority.expire_due(now=clock.now + timedelta(seconds=60))
    assert [r.resolution.request_id for r in expired] == [due.request.id]
    assert expired[0].resolution.outcome == "expired"
    assert authority.get_resolution(later.request.id) is None
    assert authority.expire_due(now=clock.now + timedelta(seconds=60)) == []


def test_expire_due_covers_requests_added_without_expiry(
    authority: ApprovalAuthority, clock: FakeClock
) -> None:
    built = new_request(authority).to_json()
    built["request"]["id"] = "apr_no_expiry"
    del built["request"]["expires_at"]
    authority.add(built)
    clock.advance(authority.default_expiry.total_seconds())
    assert "apr_no_expiry" in [r.resolution.request_id for r in authority.expire_due()]


def test_supersede_records_stale(authority: ApprovalAuthority) -> None:
    requested = new_request(authority)
    resolved = authority.supersede(requested.request.id)
    assert resolved.resolution.outcome == "stale"
    assert authority.get_resolution(requested.request.id) == resolved


def test_default_expiry_must_be_positive() -> None:
    with pytest.raises(ValueError):
        ApprovalAuthority(default_expiry=timedelta(0))

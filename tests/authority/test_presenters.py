"""What presenters read: snapshots of pending requests, the event stream, and its gaps."""

from __future__ import annotations

import pytest

from aais_langgraph.authority import ApprovalAuthority
from aais_langgraph.authority.resolutions import snapshot_envelope, snapshot_of
from aais_langgraph.protocol import AAISValidationError

from .support import FakeClock, assert_spec_valid, decision, new_request


def pending_ids(authority: ApprovalAuthority, **kwargs: str) -> list[str]:
    snapshot = authority.snapshot(**kwargs)
    assert_spec_valid(snapshot.to_json())
    return [request.id for request in snapshot.snapshot.pending]


def test_snapshot_lists_pending_requests_in_order(authority: ApprovalAuthority) -> None:
    first = new_request(authority)
    second = new_request(authority)
    assert pending_ids(authority) == [first.request.id, second.request.id]


def test_snapshot_excludes_resolved_requests(authority: ApprovalAuthority) -> None:
    approved = new_request(authority)
    cancelled = new_request(authority)
    waiting = new_request(authority)
    authority.decide(decision(approved))
    authority.cancel(cancelled.request.id)
    assert pending_ids(authority) == [waiting.request.id]


def test_snapshot_excludes_expired_requests_before_any_sweep(
    authority: ApprovalAuthority, clock: FakeClock
) -> None:
    short = new_request(authority, expires_in=30)
    long = new_request(authority, expires_in=300)
    clock.advance(30)
    assert pending_ids(authority) == [long.request.id]
    assert authority.get_resolution(short.request.id) is None


def test_snapshot_filters_by_session(authority: ApprovalAuthority) -> None:
    mine = new_request(authority, session_id="s-1")
    new_request(authority, session_id="s-2")
    assert pending_ids(authority, session_id="s-1") == [mine.request.id]


def test_snapshot_is_as_of_the_last_sequence(authority: ApprovalAuthority) -> None:
    requested = new_request(authority)
    authority.decide(decision(requested))
    snapshot = authority.snapshot(stream="inbox")
    assert snapshot.snapshot.as_of_sequence == authority.ledger.last_sequence() == 3
    assert snapshot.sequence == 3
    assert snapshot.stream == "inbox"
    assert_spec_valid(snapshot.to_json())


def test_events_after_are_in_sequence_order(authority: ApprovalAuthority) -> None:
    first = new_request(authority)
    second = new_request(authority)
    authority.decide(decision(second, "deny"))
    authority.cancel(first.request.id)
    page = authority.events_after(0)
    assert [e["sequence"] for e in page.events] == [1, 2, 3, 4, 5]
    assert [e["type"] for e in page.events] == [
        "approval.requested",
        "approval.requested",
        "approval.decided",
        "approval.resolved",
        "approval.resolved",
    ]
    assert page.last_sequence == 5
    assert page.gap is False


def test_events_after_returns_only_later_events_up_to_limit(
    authority: ApprovalAuthority,
) -> None:
    for _ in range(4):
        new_request(authority)
    page = authority.events_after(1, limit=2)
    assert [e["sequence"] for e in page.events] == [2, 3]
    assert page.last_sequence == 4


def test_events_after_reports_gap_after_compaction(authority: ApprovalAuthority) -> None:
    for _ in range(5):
        new_request(authority)
    assert authority.ledger.compact_events(4) == 3
    behind = authority.events_after(0)
    assert behind.gap is True
    assert [e["sequence"] for e in behind.events] == [4, 5]
    assert authority.events_after(3).gap is False
    assert authority.events_after(5).gap is False


def test_events_after_reports_gap_when_everything_was_compacted(
    authority: ApprovalAuthority,
) -> None:
    for _ in range(3):
        new_request(authority)
    authority.ledger.compact_events(10)
    page = authority.events_after(1)
    assert (page.events, page.gap, page.last_sequence) == ([], True, 3)
    assert authority.events_after(3).gap is False


def test_no_gap_on_an_empty_ledger(authority: ApprovalAuthority) -> None:
    page = authority.events_after(0)
    assert (page.events, page.gap, page.last_sequence) == ([], False, 0)


@pytest.mark.parametrize("sequence", [-1, True, 1.5, "3"])
def test_events_after_refuses_a_bad_sequence(
    authority: ApprovalAuthority, sequence: object
) -> None:
    with pytest.raises(AAISValidationError) as caught:
        authority.events_after(sequence)  # type: ignore[arg-type]
    assert caught.value.pointer == "/sequence"


def test_every_emitted_envelope_is_spec_valid(
    authority: ApprovalAuthority, clock: FakeClock
) -> None:
    emitted = []
    approved = new_request(authority)
    denied = new_request(authority)
    cancelled = new_request(authority)
    expired = new_request(authority, expires_in=10)
    stale = new_request(authority)
    superseded = new_request(authority)
    emitted += [r.to_json() for r in (approved, denied, cancelled, expired, stale)]
    emitted.append(authority.decide(decision(approved, scope="session")).to_json())
    emitted.append(authority.decide(decision(approved, "deny")).to_json())  # conflict
    emitted.append(authority.decide(decision(denied, "deny")).to_json())
    emitted.append(authority.decide(decision(stale, action_digest="sha256:" + "1" * 64)).to_json())
    emitted.append(authority.decide(decision(stale, scope="persistent")).to_json())
    emitted.append(authority.cancel(cancelled.request.id, reason="Run ended.").to_json())
    emitted.append(authority.supersede(superseded.request.id).to_json())
    clock.advance(10)
    emitted.append(authority.decide(decision(expired)).to_json())
    emitted += [r.to_json() for r in authority.expire_due(now=clock.advance(3600))]
    emitted.append(authority.snapshot().to_json())
    screened = authority.screen(approved.request.action, origin=approved.request.origin).resolved
    assert screened is not None
    emitted.append(screened.to_json())
    emitted += authority.events_after(0).events
    outcomes = {e["resolution"]["outcome"] for e in emitted if e["type"] == "approval.resolved"}
    assert outcomes == {
        "approved", "denied", "cancelled", "expired", "stale", "invalid", "conflict"
    }  # fmt: skip
    for envelope in emitted:
        assert_spec_valid(envelope)


def test_request_without_expiry_is_stored_with_the_default_expiry(
    authority: ApprovalAuthority,
) -> None:
    built = new_request(authority).to_json()
    built["request"]["id"] = "apr_no_expiry"
    del built["request"]["expires_at"]
    stored = authority.add(built)
    assert stored.request.expires_at == "2026-08-30T18:15:00.000000Z"
    assert_spec_valid(stored.to_json())
    assert authority.get_stored_request("apr_no_expiry").expires_at is not None  # type: ignore[union-attr]


def test_a_snapshot_of_validated_requests_is_the_validated_snapshot(
    authority: ApprovalAuthority, clock: FakeClock
) -> None:
    requests = [new_request(authority).request, new_request(authority).request]
    options = {"as_of": 7, "now": clock(), "stream": "s"}

    composed = snapshot_of(requests, **options)  # type: ignore[arg-type]
    validated = snapshot_envelope([r.to_json() for r in requests], **options)  # type: ignore[arg-type]

    assert composed.to_json() | {"id": "x"} == validated.to_json() | {"id": "x"}
    assert composed.snapshot.pending == requests
    assert_spec_valid(composed.to_json())


def test_a_snapshot_is_composed_only_of_validated_models(
    authority: ApprovalAuthority, clock: FakeClock
) -> None:
    plain = new_request(authority).request.to_json()
    with pytest.raises(TypeError, match=r"pending\[0\]"):
        snapshot_of([plain], as_of=1, now=clock(), stream=None)  # type: ignore[list-item]

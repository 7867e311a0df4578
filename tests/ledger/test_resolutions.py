"""Resolutions: the first recorded resolution wins and nothing else changes afterwards."""

from __future__ import annotations

import pytest

from aais_langgraph.ledger import Ledger, ResolutionWrite
from aais_langgraph.protocol import AAISValidationError

from .envelopes import approval, grant_for, request_envelope, resolved_envelope


def test_first_resolution_is_recorded_with_fresh_sequences(ledger: Ledger) -> None:
    requested = request_envelope("apr_1")
    ledger.add_request(requested)
    write = approval(requested, resolution_id="res_1", decision_id="dec_1")

    stored, created = ledger.record_resolution(write)

    assert created is True
    assert stored.request_id == "apr_1"
    assert stored.decision_fingerprint == "fp_dec_1"
    assert stored.envelope == {**write.resolved, "sequence": 3}
    assert ledger.get_resolution("apr_1") == stored
    assert [e["type"] for e in ledger.events_after(1)] == ["approval.decided", "approval.resolved"]
    assert [e["sequence"] for e in ledger.events_after(1)] == [2, 3]
    assert ledger.last_sequence() == 3


def test_resolution_without_decision_appends_only_the_resolved_event(ledger: Ledger) -> None:
    requested = request_envelope("apr_1")
    ledger.add_request(requested)

    stored, created = ledger.record_resolution(
        approval(requested, decision_id=None, outcome="cancelled")
    )

    assert created is True
    assert stored.decision_fingerprint is None
    assert [e["type"] for e in ledger.events_after(1)] == ["approval.resolved"]
    assert ledger.last_sequence() == 2


def test_identical_replay_returns_same_resolution(ledger: Ledger) -> None:
    requested = request_envelope("apr_1")
    ledger.add_request(requested)
    write = approval(requested)
    first, _ = ledger.record_resolution(write)

    again, created = ledger.record_resolution(write)

    assert created is False
    assert again == first


def test_second_different_resolution_returns_the_first_and_changes_nothing(
    ledger: Ledger,
) -> None:
    requested = request_envelope("apr_1")
    ledger.add_request(requested)
    first, _ = ledger.record_resolution(approval(requested, resolution_id="res_1"))
    sequence, tip = ledger.last_sequence(), ledger.audit_tip()
    events = ledger.events_after(0)

    denial = approval(requested, resolution_id="res_2", decision_id="dec_2", outcome="denied")
    again, created = ledger.record_resolution(denial)

    assert created is False
    assert again == first
    assert again.envelope["resolution"]["id"] == "res_1"
    assert ledger.get_resolution("apr_1") == first
    assert ledger.last_sequence() == sequence
    assert ledger.audit_tip() == tip
    assert ledger.events_after(0) == events


def test_resolving_an_unknown_request_raises_key_error(ledger: Ledger) -> None:
    requested = request_envelope("apr_unknown")

    with pytest.raises(KeyError):
        ledger.record_resolution(approval(requested))

    assert ledger.get_resolution("apr_unknown") is None
    assert ledger.last_sequence() == 0


def test_get_resolution_of_a_pending_request_is_none(ledger: Ledger) -> None:
    ledger.add_request(request_envelope("apr_1"))

    assert ledger.get_resolution("apr_1") is None


def test_grant_is_stored_with_the_winning_write(ledger: Ledger) -> None:
    requested = request_envelope("apr_1")
    ledger.add_request(requested)
    grant = grant_for(requested, grant_id="grt_1")

    ledger.record_resolution(approval(requested, grant=grant))

    assert ledger.list_grants() == [grant]


def test_grant_of_a_losing_write_is_not_stored(ledger: Ledger) -> None:
    requested = request_envelope("apr_1")
    ledger.add_request(requested)
    ledger.record_resolution(approval(requested, resolution_id="res_1"))

    late = approval(
        requested,
        resolution_id="res_2",
        decision_id="dec_2",
        grant=grant_for(requested, grant_id="grt_late"),
    )
    _, created = ledger.record_resolution(late)

    assert created is False
    assert ledger.list_grants(include_revoked=True) == []


def test_resolution_for_another_request_is_refused(ledger: Ledger) -> None:
    first, second = request_envelope("apr_1"), request_envelope("apr_2")
    ledger.add_request(first)
    ledger.add_request(second)
    wrong = ResolutionWrite(
        request_id="apr_1", resolved=resolved_envelope(second, resolution_id="res_x")
    )

    with pytest.raises(AAISValidationError):
        ledger.record_resolution(wrong)

    assert ledger.get_resolution("apr_1") is None
    assert ledger.last_sequence() == 2


def test_failed_write_leaves_the_request_pending(ledger: Ledger) -> None:
    requested = request_envelope("apr_1")
    ledger.add_request(requested)
    write = approval(requested)
    write.resolved["resolution"]["extensions"] = {"score": float("inf")}

    with pytest.raises(AAISValidationError):
        ledger.record_resolution(write)

    assert [r.request_id for r in ledger.list_pending()] == ["apr_1"]
    assert ledger.last_sequence() == 1
    assert len(ledger.audit_entries()) == 1

"""One expiry rule: the authority's judgement, its snapshot and the gate's inbox agree on
when a request stops being pending, to the microsecond."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from aais_langgraph.authority import ApprovalAuthority
from aais_langgraph.protocol import build_decision, parse_timestamp
from aais_langgraph.threads import pending_approvals

from .support import HUMAN, START, FakeClock, action, origin

TICK = timedelta(microseconds=1)


def _authority() -> tuple[ApprovalAuthority, FakeClock]:
    clock = FakeClock(START)
    return ApprovalAuthority(clock=clock, default_expiry=timedelta(minutes=7)), clock


def _listed(authority: ApprovalAuthority, moment: object) -> tuple[bool, bool]:
    """(in the gate's inbox, in the authority's snapshot) at ``moment``."""
    inbox = pending_approvals(authority, now=moment).snapshot.pending  # type: ignore[arg-type]
    snapshot = authority.snapshot().snapshot.pending
    return bool(inbox), bool(snapshot)


def test_inbox_and_snapshot_drop_a_request_at_the_same_moment() -> None:
    authority, clock = _authority()
    requested = authority.request(action(), origin=origin(), expires_in=timedelta(minutes=3))
    expiry = authority.expiry_of(requested.request)
    assert expiry == START + timedelta(minutes=3)
    clock.set(expiry - TICK)
    assert _listed(authority, expiry - TICK) == (True, True)
    clock.set(expiry)
    assert _listed(authority, expiry) == (False, False)


def test_a_decision_at_the_expiry_moment_is_expired() -> None:
    authority, clock = _authority()
    requested = authority.request(action(), origin=origin())
    clock.set(authority.expiry_of(requested.request))
    decided = build_decision(requested, decision="approve", actor=HUMAN)
    assert authority.decide(decided).resolution.outcome == "expired"


def test_a_stored_row_and_its_envelope_have_one_expiry() -> None:
    authority, _ = _authority()
    requested = authority.request(action(), origin=origin())
    stored = authority.get_stored_request(requested.request.id)
    assert stored is not None
    assert authority.expiry_of(stored) == authority.expiry_of(requested.request)
    assert authority.expiry_of(stored) == parse_timestamp(str(requested.request.expires_at))


def test_a_row_without_an_expiry_column_expires_after_the_default_lifetime() -> None:
    authority, _ = _authority()
    requested = authority.request(action(), origin=origin())
    stored = authority.get_stored_request(requested.request.id)
    assert stored is not None
    legacy = dataclasses.replace(stored, expires_at=None)
    assert authority.expiry_of(legacy) == START + timedelta(minutes=7)

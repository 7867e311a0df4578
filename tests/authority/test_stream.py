"""SPEC §3: durable bindings MUST provide `stream`; every envelope the authority emits names it."""

from __future__ import annotations

import pytest

from aais_langgraph.authority import DEFAULT_STREAM, ApprovalAuthority, ReplyStream
from aais_langgraph.ledger import Ledger
from aais_langgraph.protocol import build_request

from .support import (
    SCOPED_CHOICES,
    FakeClock,
    action,
    assert_spec_valid,
    decision,
    new_request,
    origin,
)


def test_every_stored_event_and_the_snapshot_name_the_authority_stream(
    authority: ApprovalAuthority,
) -> None:
    approved = new_request(authority)
    denied = new_request(authority, command="node --check other.js")
    waiting = new_request(authority, command="node --check third.js")
    authority.decide(decision(approved))
    authority.decide(decision(denied, "deny"))
    authority.cancel(new_request(authority, command="node --check fourth.js").request.id)
    snapshot = authority.snapshot()
    assert snapshot.stream == DEFAULT_STREAM
    assert [request.id for request in snapshot.snapshot.pending] == [waiting.request.id]
    events = authority.events_after(0).events
    assert {event["type"] for event in events} == {
        "approval.requested",
        "approval.decided",
        "approval.resolved",
    }
    for envelope in [*events, snapshot.to_json()]:
        assert_spec_valid(envelope)
        assert envelope["stream"] == DEFAULT_STREAM


def test_conflicts_and_standing_resolutions_name_the_stream(authority: ApprovalAuthority) -> None:
    requested = new_request(authority)
    authority.decide(decision(requested, "approve", "session"))
    conflict = authority.decide(decision(requested, "deny"))
    assert conflict.resolution.outcome == "conflict" and conflict.stream == DEFAULT_STREAM
    screening = authority.screen(action("node --check script.js"), origin=origin())
    assert screening.resolved is not None and screening.resolved.stream == DEFAULT_STREAM


def test_a_request_added_with_another_stream_is_stored_in_the_authority_stream(
    authority: ApprovalAuthority, clock: FakeClock
) -> None:
    foreign = build_request(
        action(), origin=origin(), choices=SCOPED_CHOICES, created_at=clock(), stream="agent-7"
    )
    stored = authority.add(foreign)
    assert stored.stream == DEFAULT_STREAM
    assert authority.events_after(0).events[0]["stream"] == DEFAULT_STREAM


def test_an_authority_may_name_its_stream(ledger: Ledger, clock: FakeClock) -> None:
    authority = ApprovalAuthority(ledger, clock=clock, stream="approvals.prod-eu")
    requested = new_request(authority)
    assert requested.stream == "approvals.prod-eu"
    assert authority.decide(decision(requested)).stream == "approvals.prod-eu"
    assert authority.snapshot().stream == "approvals.prod-eu"


@pytest.mark.parametrize("stream", ["", "x" * 201])
def test_a_malformed_stream_is_refused_at_construction(stream: str) -> None:
    with pytest.raises(ValueError, match="stream"):
        ApprovalAuthority(stream=stream)


def test_a_request_shown_anew_goes_on_the_bindings_own_stream(
    authority: ApprovalAuthority,
) -> None:
    requested = new_request(authority)
    stored = authority.ledger.get_request(requested.request.id)
    assert stored is not None
    own = ReplyStream("aais-langgraph.test")
    now = authority.clock()

    first = own.shown(stored.envelope, now=now)
    second = own.shown(stored.envelope, now=now)

    for shown in (first, second):
        assert_spec_valid(shown)
        assert shown["type"] == "approval.requested"
        assert shown["request"] == stored.envelope["request"]  # the same request
        assert shown["stream"] == own.stream != stored.envelope["stream"]
    assert (first["sequence"], second["sequence"]) == (1, 2)
    assert first["id"] != second["id"] != stored.envelope["id"]
    assert stored.envelope == authority.ledger.get_request(requested.request.id).envelope

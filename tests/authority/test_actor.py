"""Invariant 7: the actor comes from the authenticated channel, never from the body alone."""

from __future__ import annotations

from typing import Any

from aais_langgraph.authority import ApprovalAuthority
from aais_langgraph.protocol import Actor

from .support import HUMAN, assert_spec_valid, decision, new_request

CHANNEL = {"id": "user_sam", "type": "human", "authenticated_by": "oidc"}


def recorded_decision(authority: ApprovalAuthority, request_id: str) -> dict[str, Any]:
    events = authority.events_after(0).events
    (decided,) = [
        e
        for e in events
        if e["type"] == "approval.decided" and e["decision"]["request_id"] == request_id
    ]
    assert_spec_valid(decided)
    result: dict[str, Any] = decided["decision"]
    return result


def audited_actor_ids(authority: ApprovalAuthority, request_id: str) -> list[str]:
    return [
        entry.payload["actor_id"]
        for entry in authority.ledger.audit_entries()
        if entry.kind == "decided" and entry.payload["request_id"] == request_id
    ]


def test_authenticated_actor_replaces_body_actor_in_recorded_decision(
    authority: ApprovalAuthority,
) -> None:
    requested = new_request(authority)
    body = decision(requested)
    assert body["decision"]["actor"]["id"] == HUMAN["id"]
    resolved = authority.decide(body, actor=CHANNEL)
    assert resolved.resolution.outcome == "approved"
    assert recorded_decision(authority, requested.request.id)["actor"] == CHANNEL
    assert audited_actor_ids(authority, requested.request.id) == ["user_sam"]


def test_actor_none_keeps_body_actor(authority: ApprovalAuthority) -> None:
    requested = new_request(authority)
    authority.decide(decision(requested), actor=None)
    assert recorded_decision(authority, requested.request.id)["actor"] == HUMAN
    assert audited_actor_ids(authority, requested.request.id) == ["user_alex"]


def test_authenticated_actor_model_is_accepted(authority: ApprovalAuthority) -> None:
    requested = new_request(authority)
    authority.decide(decision(requested), actor=Actor.from_data(CHANNEL))
    assert recorded_decision(authority, requested.request.id)["actor"]["id"] == "user_sam"


def test_authenticated_actor_is_audited_on_refused_decision(authority: ApprovalAuthority) -> None:
    requested = new_request(authority)
    refused = authority.decide(decision(requested, scope="persistent"), actor=CHANNEL)
    assert refused.resolution.outcome == "invalid"
    assert audited_actor_ids(authority, requested.request.id) == ["user_sam"]


def test_replay_by_same_authenticated_actor_returns_same_resolution(
    authority: ApprovalAuthority,
) -> None:
    requested = new_request(authority)
    body = decision(requested)
    first = authority.decide(body, actor=CHANNEL)
    assert authority.decide(body, actor=CHANNEL) == first


def test_same_body_from_another_authenticated_actor_is_conflict(
    authority: ApprovalAuthority,
) -> None:
    requested = new_request(authority)
    body = decision(requested)
    first = authority.decide(body, actor=CHANNEL)
    other = authority.decide(body, actor={"id": "user_eve", "type": "human"})
    assert other.resolution.outcome == "conflict"
    assert authority.get_resolution(requested.request.id) == first
    assert recorded_decision(authority, requested.request.id)["actor"] == CHANNEL

"""``build_decision_for_request``: a decision from a request as a snapshot lists it."""

from __future__ import annotations

from typing import Any

import pytest

from aais_langgraph import (
    AAISValidationError,
    ApprovalAuthority,
    build_decision,
    build_decision_for_request,
)

ALICE = {"id": "alice", "type": "human"}
SECRET = "hunter2-do-not-echo"
ORIGIN = {"harness": "tests", "session_id": "session-1"}


def _pending(authority: ApprovalAuthority) -> Any:
    authority.request(
        {
            "kind": "fs.delete",
            "name": "delete_file",
            "summary": "Delete a report",
            "arguments": {"path": "/reports/q3.pdf", "token": SECRET},
        },
        origin=ORIGIN,
    )
    [request] = authority.snapshot().snapshot.pending
    return request


def test_a_snapshot_request_model_is_answered_and_approved() -> None:
    authority = ApprovalAuthority()
    request = _pending(authority)
    decided = build_decision_for_request(request, decision="approve", actor=ALICE)
    assert decided.decision.request_id == request.id
    assert decided.decision.action_digest == request.action_digest
    assert authority.decide(decided, actor=ALICE).resolution.outcome == "approved"


def test_the_json_of_a_snapshot_request_is_answered_like_the_model() -> None:
    authority = ApprovalAuthority()
    request = _pending(authority)
    listed = authority.snapshot().to_json()["snapshot"]["pending"][0]  # as HTTP sends it
    decided = build_decision_for_request(listed, decision="deny", actor=ALICE, scope="once")
    assert decided.decision.action_digest == request.action_digest
    assert authority.decide(decided, actor=ALICE).resolution.outcome == "denied"


def _refused(request: Any, **options: Any) -> AAISValidationError:
    with pytest.raises(AAISValidationError) as refused:
        build_decision_for_request(request, **{"decision": "approve", "actor": ALICE, **options})
    assert SECRET not in str(refused.value)
    return refused.value


@pytest.mark.parametrize("hostile", [None, "apr_1", 42, ["a"], b"{}"])
def test_what_is_not_an_object_is_refused_at_the_request(hostile: Any) -> None:
    assert str(_refused(hostile)).startswith("/request")


@pytest.mark.parametrize("field", ["id", "action_digest", "action", "choices", "status"])
def test_a_request_missing_a_field_is_refused_naming_it(field: str) -> None:
    listed = _pending(ApprovalAuthority()).to_json()
    del listed[field]
    assert f"/request/{field}" in str(_refused(listed))


def test_an_action_changed_after_the_snapshot_is_refused_at_the_digest() -> None:
    listed = _pending(ApprovalAuthority()).to_json()
    listed["action"]["arguments"]["path"] = "/etc/passwd"
    error = _refused(listed)
    assert "/request/action_digest" in str(error)
    assert "/etc/passwd" not in str(error)


def test_a_bad_decision_kind_or_actor_is_refused_naming_the_field() -> None:
    request = _pending(ApprovalAuthority())
    assert "/decision/decision" in str(_refused(request, decision="yes"))
    assert "/decision/actor" in str(_refused(request, actor={"id": SECRET}))


def test_each_builder_names_the_other_when_given_its_shape() -> None:
    authority = ApprovalAuthority()
    request = _pending(authority)
    envelope = authority.get_request(request.id)
    assert envelope is not None
    with pytest.raises(AAISValidationError, match="build_decision_for_request"):
        build_decision(request.to_json(), decision="approve", actor=ALICE)
    with pytest.raises(AAISValidationError, match="build_decision"):
        build_decision_for_request(envelope.to_json(), decision="approve", actor=ALICE)
    # and the envelope's builder still answers the same request the same way
    same = build_decision(envelope, decision="approve", actor=ALICE)
    assert same.decision.action_digest == request.action_digest

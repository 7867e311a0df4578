"""``build_request`` and ``build_decision``: valid by construction, bound by id and digest."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

import aais
import pytest

from aais_langgraph.protocol import (
    DEFAULT_EXPIRY,
    AAISValidationError,
    Action,
    Actor,
    ApprovalRequested,
    Choice,
    Origin,
    Risk,
    action_digest,
    build_decision,
    build_request,
    parse_timestamp,
)

from .conftest import FIXTURE_DIGEST, SECRET, fixture

CREATED = datetime(2026, 8, 30, 18, 0, tzinfo=timezone.utc)
ORIGIN = {"harness": "example-harness", "session_id": "s-1"}
ACTOR = {"id": "user_alex", "type": "human"}
SESSION_APPROVE = {
    "decision": "approve",
    "scope": "session",
    "label": "Allow for this session",
    "scope_constraints": {"action_name": "shell.exec"},
}
DENY = {"decision": "deny", "scope": "once", "label": "Deny"}


def shell_action() -> dict[str, Any]:
    action: dict[str, Any] = fixture("shell-approval.json")["request"]["action"]
    return action


def default_request(**options: Any) -> ApprovalRequested:
    return build_request(shell_action(), origin=ORIGIN, **{"created_at": CREATED, **options})


def refusal(**options: Any) -> AAISValidationError:
    with pytest.raises(AAISValidationError) as caught:
        default_request(**options)
    return caught.value


# --- build_request defaults --------------------------------------------------------


def test_default_expiry_is_fifteen_minutes() -> None:
    assert timedelta(minutes=15) == DEFAULT_EXPIRY


def test_default_request_expires_fifteen_minutes_after_creation() -> None:
    request = default_request().request
    assert request.expires_at is not None
    lifetime = parse_timestamp(request.expires_at) - parse_timestamp(request.created_at)
    assert lifetime == timedelta(minutes=15)


def test_request_without_a_creation_time_still_gets_a_finite_expiry() -> None:
    request = build_request(shell_action(), origin=ORIGIN).request
    assert request.expires_at is not None
    lifetime = parse_timestamp(request.expires_at) - parse_timestamp(request.created_at)
    assert lifetime == timedelta(minutes=15)


def test_default_request_offers_approve_once_and_deny() -> None:
    offered = [(choice.decision, choice.scope) for choice in default_request().request.choices]
    assert offered == [("approve", "once"), ("deny", "once")]


def test_default_request_sequence_is_zero() -> None:
    assert default_request().sequence == 0


def test_request_sequence_is_the_given_one() -> None:
    assert default_request(sequence=41).sequence == 41


def test_request_digest_is_the_action_digest() -> None:
    assert default_request().request.action_digest == FIXTURE_DIGEST


def test_request_occurs_when_it_is_created() -> None:
    envelope = default_request()
    assert envelope.occurred_at == envelope.request.created_at


def test_request_is_pending() -> None:
    assert default_request().request.status == "pending"


def test_requests_get_fresh_ids() -> None:
    first, second = default_request(), default_request()
    assert (first.id, first.request.id) != (second.id, second.request.id)


def test_built_request_passes_reference_validation() -> None:
    dumped = default_request(stream="session_s1").model_dump(mode="json")
    assert aais.validate(dumped) == dumped


def test_built_request_with_custom_choices_passes_reference_validation() -> None:
    dumped = default_request(choices=[SESSION_APPROVE, DENY]).model_dump(mode="json")
    assert aais.validate(dumped) == dumped


def test_build_request_reproduces_the_shell_approval_fixture() -> None:
    expected = fixture("shell-approval.json")
    request = expected["request"]
    built = build_request(
        request["action"],
        origin=request["origin"],
        risk=request["risk"],
        choices=request["choices"],
        request_id=request["id"],
        created_at=request["created_at"],
        expires_at=request["expires_at"],
        sequence=expected["sequence"],
        stream=expected["stream"],
        event_id=expected["id"],
    )
    assert json.dumps(built.model_dump(mode="json")) == json.dumps(expected)


# --- build_request options and refusals --------------------------------------------------


def test_expires_in_sets_the_lifetime() -> None:
    request = default_request(expires_in=timedelta(seconds=90)).request
    assert request.expires_at is not None
    assert parse_timestamp(request.expires_at) == CREATED + timedelta(seconds=90)


def test_expires_at_sets_the_expiry() -> None:
    request = default_request(expires_at="2026-08-30T18:05:00Z").request
    assert request.expires_at == "2026-08-30T18:05:00Z"


@pytest.mark.parametrize(
    "lifetime", [timedelta(0), timedelta(seconds=-1)], ids=["zero", "negative"]
)
def test_non_positive_expires_in_is_refused(lifetime: timedelta) -> None:
    assert refusal(expires_in=lifetime).pointer == "/request/expires_at"


def test_expires_at_before_creation_is_refused() -> None:
    assert refusal(expires_at="2026-08-30T17:00:00Z").pointer == "/request/expires_at"


def test_naive_creation_time_is_refused() -> None:
    assert refusal(created_at=datetime(2026, 8, 30, 18, 0)).pointer == "/request/created_at"


def test_creation_time_without_offset_is_refused() -> None:
    assert refusal(created_at="2026-08-30T18:00:00").pointer == "/request/created_at"


def test_custom_choices_without_deny_or_cancel_are_refused() -> None:
    assert refusal(choices=[SESSION_APPROVE]).pointer == "/request/choices"


def test_custom_choices_with_cancel_instead_of_deny_are_accepted() -> None:
    cancel = {"decision": "cancel", "scope": "once", "label": "Cancel"}
    assert default_request(choices=[SESSION_APPROVE, cancel]).request.offers("cancel", "once")


def test_session_choice_without_constraints_is_refused() -> None:
    bare = {"decision": "approve", "scope": "session", "label": "Allow for this session"}
    assert refusal(choices=[bare, DENY]).pointer == "/request/choices/0/scope_constraints"


def test_persistent_choice_without_constraints_is_refused() -> None:
    bare = {"decision": "approve", "scope": "persistent", "label": "Always allow"}
    assert refusal(choices=[DENY, bare]).pointer == "/request/choices/1/scope_constraints"


def test_deny_choice_with_session_scope_is_refused() -> None:
    deny = {**DENY, "scope": "session", "scope_constraints": {"action_name": "shell.exec"}}
    assert refusal(choices=[deny]).pointer == "/request/choices/0/scope"


def test_repeated_choice_pair_is_refused() -> None:
    assert refusal(choices=[DENY, {**DENY, "label": "No"}]).pointer == "/request/choices/1"


def test_empty_choices_are_refused() -> None:
    assert refusal(choices=[]).pointer == "/request/choices"


def test_invalid_action_is_refused_at_the_requestshell_action() -> None:
    action = {**shell_action(), "kind": ".bad"}
    with pytest.raises(AAISValidationError) as caught:
        build_request(action, origin=ORIGIN)
    assert caught.value.pointer == "/request/action/kind"


def test_lone_surrogate_in_a_risk_reason_is_refused() -> None:
    risk = {"level": "low", "reasons": [f"{SECRET}\ud800"]}
    error = refusal(risk=risk)
    assert (error.pointer, SECRET in str(error)) == ("/request/risk/reasons/0", False)


def test_non_namespaced_extension_is_refused() -> None:
    assert refusal(extensions={"note": SECRET}).pointer == "/request/extensions/note"


# --- models or mappings -------------------------------------------------------------


def test_build_request_accepts_models_or_mappings_alike() -> None:
    risk = {"level": "medium", "reasons": ["Executes a local process"]}
    fixed = {"request_id": "apr_1", "event_id": "evt_1", "created_at": CREATED}
    from_mappings = build_request(
        shell_action(), origin=ORIGIN, risk=risk, choices=[SESSION_APPROVE, DENY], **fixed
    )
    from_models = build_request(
        Action.model_validate(shell_action()),
        origin=Origin.model_validate(ORIGIN),
        risk=Risk.model_validate(risk),
        choices=[Choice.model_validate(SESSION_APPROVE), Choice.model_validate(DENY)],
        **fixed,
    )
    assert from_models == from_mappings


def test_build_decision_accepts_a_request_model_or_mapping_alike() -> None:
    requested = default_request()
    fixed = {"decision_id": "dec_1", "event_id": "evt_2", "decided_at": "2026-08-30T18:01:00Z"}
    from_model = build_decision(requested, decision="approve", actor=ACTOR, **fixed)
    from_mapping = build_decision(
        requested.model_dump(mode="json"),
        decision="approve",
        actor=Actor.model_validate(ACTOR),
        **fixed,
    )
    assert from_model == from_mapping


# --- build_decision -----------------------------------------------------------------


def test_decision_carries_the_request_id() -> None:
    requested = default_request()
    decided = build_decision(requested, decision="approve", actor=ACTOR)
    assert decided.decision.request_id == requested.request.id


def test_decision_carries_the_request_digest() -> None:
    requested = default_request()
    decided = build_decision(requested, decision="approve", actor=ACTOR)
    assert decided.decision.action_digest == requested.request.action_digest


def test_decision_digest_matches_the_action_recomputed() -> None:
    decided = build_decision(default_request(), decision="deny", actor=ACTOR)
    assert decided.decision.action_digest == action_digest(shell_action())


def test_decision_scope_defaults_to_once() -> None:
    assert (
        build_decision(default_request(), decision="approve", actor=ACTOR).decision.scope == "once"
    )


def test_built_decision_passes_reference_validation() -> None:
    decided = build_decision(default_request(), decision="approve", actor=ACTOR, stream="p1")
    dumped = decided.model_dump(mode="json")
    assert aais.validate(dumped) == dumped


def test_build_decision_reproduces_the_approve_once_fixture() -> None:
    expected = fixture("approve-once.json")
    body = expected["decision"]
    decided = build_decision(
        fixture("shell-approval.json"),
        decision=body["decision"],
        scope=body["scope"],
        actor=body["actor"],
        decision_id=body["id"],
        decided_at=body["decided_at"],
        sequence=expected["sequence"],
        stream=expected["stream"],
        event_id=expected["id"],
    )
    assert json.dumps(decided.model_dump(mode="json")) == json.dumps(expected)


def test_deny_decision_with_session_scope_is_refused() -> None:
    with pytest.raises(AAISValidationError) as caught:
        build_decision(default_request(), decision="deny", scope="session", actor=ACTOR)
    assert caught.value.pointer == "/decision/scope"


def test_decision_for_a_tampered_request_is_refused() -> None:
    requested = default_request().model_dump(mode="json")
    requested["request"]["action"]["arguments"]["command"] = "rm -rf /"
    with pytest.raises(AAISValidationError) as caught:
        build_decision(requested, decision="approve", actor=ACTOR)
    assert caught.value.pointer == "/request/action_digest"


def test_decision_on_a_decided_envelope_is_refused() -> None:
    with pytest.raises(AAISValidationError):
        build_decision(fixture("approve-once.json"), decision="approve", actor=ACTOR)


def test_actor_of_unknown_type_is_refused() -> None:
    with pytest.raises(AAISValidationError) as caught:
        build_decision(default_request(), decision="approve", actor={"id": "a", "type": "robot"})
    assert caught.value.pointer == "/decision/actor/type"


def test_build_request_digests_the_arguments_as_they_are_now() -> None:
    # A validated action whose arguments dict changed since: the digest binds what the
    # request carries, and a value that is not I-JSON is refused at its field.
    action = Action.from_data(shell_action())
    action.arguments["command"] = "rm -rf /"
    built = build_request(action, origin=ORIGIN, created_at=CREATED)
    assert built.request.action_digest == action_digest(
        {**shell_action(), "arguments": action.arguments}
    )
    action.arguments["n"] = float("nan")
    with pytest.raises(AAISValidationError) as caught:
        build_request(action, origin=ORIGIN, created_at=CREATED)
    assert caught.value.pointer == "/arguments/n"


def test_a_digest_taken_of_another_action_does_not_vouch_for_a_request() -> None:
    from aais_langgraph.protocol.base import TAKEN_DIGEST_CONTEXT

    built = build_request(shell_action(), origin=ORIGIN, created_at=CREATED).to_json()
    wrong = "sha256:" + "0" * 64
    built["request"]["action_digest"] = wrong
    other = Action.from_data(shell_action())
    with pytest.raises(ValueError, match="does not match the action"):
        ApprovalRequested.model_validate(built, context={TAKEN_DIGEST_CONTEXT: (other, wrong)})

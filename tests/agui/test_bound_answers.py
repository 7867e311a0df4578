"""A generic AG-UI 1.0 client answers an approval bound, knowing nothing of AAIS.

The interrupt carries the action fingerprint where AG-UI's interrupts page proposes it
(``metadata.governance.actionFingerprint``) and a ``responseSchema`` whose first branch is
``{"approved": bool, "approvedActionFingerprint": <fingerprint>}``; the resume planner
makes that payload the authenticated actor's decision with the echoed fingerprint as its
digest, so a drifted echo is ``aais.digest_mismatch`` and changes nothing.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from ag_ui.core import EventType, Interrupt, ResumeEntry
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aais_agui.agent import AAISLangGraphAgent
from aais_agui.mapping import (
    APPROVED_KEY,
    ECHO_KEY,
    FINGERPRINT_KEY,
    GOVERNANCE_KEY,
    BoundAnswer,
    bound_answer_schema,
    bound_choice,
    parse_resume_entry,
    request_to_interrupt,
)
from aais_agui.resume_plan import ResumeRejected, plan_resume
from aais_langgraph import ApprovalAuthority
from aais_langgraph.ledger import InMemoryLedger
from aais_langgraph.protocol import AAISValidationError, ApprovalRequested, build_request
from hostile.report import hostile_input, refused

from .conftest import ALICE
from .demo_graph import EffectLog
from .test_agent import paused, reoffered, request_id, run, terminal

SECRET = "s3cr3t-value-never-echoed"
DRIFTED = "sha256:" + "0" * 64
APPROVE_ONCE = {"decision": "approve", "scope": "once", "label": "Approve once"}
APPROVE_SESSION = {
    "decision": "approve",
    "scope": "session",
    "label": "Approve for the session",
    "scope_constraints": {"action_name": "send_email"},
}
DENY = {"decision": "deny", "scope": "once", "label": "Deny"}
CANCEL = {"decision": "cancel", "scope": "once", "label": "Withdraw"}


def requested(choices: list[dict[str, Any]] | None = None) -> ApprovalRequested:
    return build_request(
        {
            "kind": "tool.call",
            "name": "send_email",
            "summary": "Send the report",
            "arguments": {"to": "board@example.com", "token": SECRET},
        },
        origin={"harness": "aais-langgraph", "session_id": "thread-1"},
        choices=choices or [APPROVE_SESSION, APPROVE_ONCE, DENY],
    )


def wire(interrupt: Interrupt) -> dict[str, Any]:
    value: dict[str, Any] = interrupt.model_dump(by_alias=True, mode="json", exclude_none=True)
    return value


def generic_answer(interrupt: dict[str, Any], approved: bool = True) -> dict[str, Any]:
    """What a client that knows only AG-UI 1.0 and the interrupts page builds: the
    schema branch with ``approved``, and the fingerprint the metadata carries."""
    schema = interrupt["responseSchema"]
    [branch] = [s for s in schema["oneOf"] if APPROVED_KEY in s.get("properties", {})]
    assert set(branch["required"]) == {APPROVED_KEY, ECHO_KEY}
    fingerprint = interrupt["metadata"][GOVERNANCE_KEY][FINGERPRINT_KEY]
    return {APPROVED_KEY: approved, ECHO_KEY: fingerprint}


def entry(payload: Any, interrupt_id: str = "i1", **extra: Any) -> ResumeEntry:
    return ResumeEntry.model_validate(
        {"interruptId": interrupt_id, "status": "resolved", "payload": payload, **extra}
    )


# -- the interrupt ---------------------------------------------------------------------


def test_the_interrupt_carries_the_action_digest_as_the_proposed_fingerprint() -> None:
    request = requested()
    interrupt = wire(request_to_interrupt(request, interrupt_id="i1"))
    assert interrupt["metadata"][GOVERNANCE_KEY] == {
        "actionFingerprint": request.request.action_digest
    }


def test_the_bound_branch_comes_first_and_fixes_the_fingerprint() -> None:
    request = requested()
    schema = wire(request_to_interrupt(request, interrupt_id="i1"))["responseSchema"]
    first = schema["oneOf"][0]
    assert first["required"] == ["approved", "approvedActionFingerprint"]
    assert first["properties"]["approvedActionFingerprint"] == {
        "const": request.request.action_digest
    }
    assert first["properties"]["approved"] == {"type": "boolean"}
    assert first["additionalProperties"] is False


def test_a_request_offering_only_approval_allows_only_approved_true() -> None:
    schema = bound_answer_schema(requested([APPROVE_ONCE, CANCEL]).request)
    assert schema is not None
    assert schema["properties"]["approved"] == {"const": True}


def test_a_request_offering_neither_approve_nor_deny_has_no_bound_branch() -> None:
    request = requested([CANCEL])
    assert bound_answer_schema(request.request) is None
    schema = wire(request_to_interrupt(request, interrupt_id="i1"))["responseSchema"]
    assert all("approved" not in s.get("properties", {}) for s in schema["oneOf"])


def test_approved_takes_the_narrowest_offered_approve_scope() -> None:
    choice = bound_choice(requested([APPROVE_SESSION, APPROVE_ONCE, DENY]).request, True)
    assert choice is not None and (choice.decision, choice.scope) == ("approve", "once")
    session_only = bound_choice(requested([APPROVE_SESSION, DENY]).request, True)
    assert session_only is not None and session_only.scope == "session"


def test_not_approved_is_the_deny() -> None:
    choice = bound_choice(requested().request, False)
    assert choice is not None and (choice.decision, choice.scope) == ("deny", "once")


# -- parsing ---------------------------------------------------------------------------


def test_a_bound_payload_parses_into_a_bound_answer() -> None:
    request = requested()
    payload = generic_answer(wire(request_to_interrupt(request, interrupt_id="i1")), False)
    answer = parse_resume_entry(entry(payload), request=request.request)
    assert answer == BoundAnswer(approved=False, fingerprint=request.request.action_digest)


@pytest.mark.parametrize(
    ("payload", "pointer"),
    [
        ({"approvedActionFingerprint": DRIFTED}, "/payload/approved"),
        ({"approved": 1, "approvedActionFingerprint": DRIFTED}, "/payload/approved"),
        ({"approved": True}, f"/payload/{ECHO_KEY}"),
        ({"approved": True, "approvedActionFingerprint": SECRET}, f"/payload/{ECHO_KEY}"),
        ({"approved": True, "approvedActionFingerprint": 7}, f"/payload/{ECHO_KEY}"),
        (
            {"approved": True, "approvedActionFingerprint": DRIFTED, "verifierReceipt": {}},
            "/payload/verifierReceipt",
        ),
    ],
    ids=["no-approved", "not-bool", "no-echo", "echo-not-digest", "echo-not-text", "extra"],
)
def test_a_malformed_bound_payload_names_the_field_and_never_its_value(
    payload: dict[str, Any], pointer: str
) -> None:
    with pytest.raises(AAISValidationError) as raised:
        parse_resume_entry(entry(payload))
    assert raised.value.pointer == pointer
    assert SECRET not in str(raised.value)


def test_a_bound_payload_beside_an_envelope_in_metadata_is_refused() -> None:
    payload = {APPROVED_KEY: True, ECHO_KEY: DRIFTED}
    with pytest.raises(AAISValidationError) as raised:
        parse_resume_entry(entry(payload, metadata={"aais": {"aais": "1.0"}}))
    assert raised.value.pointer == "/metadata/aais"


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8) | st.just(SECRET),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=6,
)


@settings(max_examples=150, deadline=None)
@given(
    payload=st.dictionaries(
        st.sampled_from([APPROVED_KEY, ECHO_KEY, "verifierReceipt", "note"]),
        JSON,
        min_size=1,
        max_size=3,
    )
)
def test_any_payload_with_a_bound_member_parses_or_is_a_field_error_without_values(
    payload: dict[str, Any],
) -> None:
    try:
        answer = parse_resume_entry(entry(payload))
    except AAISValidationError as error:
        assert error.pointer.startswith("/payload")
        assert SECRET not in str(error)
    else:
        assert isinstance(answer, BoundAnswer)
        assert set(payload) == {APPROVED_KEY, ECHO_KEY}


# -- through the planner ---------------------------------------------------------------


HOSTILE = "AG-UI bound answers"


def recorded(authority: ApprovalAuthority, request: ApprovalRequested) -> Any:
    """The hostile tally's observation: the request got a resolution."""
    return lambda: authority.get_resolution(request.request.id) is not None


def decided_by(authority: ApprovalAuthority) -> list[str]:
    """The actors of the recorded ``approval.decided`` events."""
    events = authority.ledger.events_after(0)
    return [e["decision"]["actor"]["id"] for e in events if e["type"] == "approval.decided"]


def planned(payload: Any, *, actor: Any = ALICE) -> tuple[ApprovalAuthority, str, dict[str, Any]]:
    request = requested()
    authority = ApprovalAuthority(InMemoryLedger())
    authority.add(request)
    resume = plan_resume(authority, {"i1": request.to_json()}, [entry(payload)], actor=actor)
    return authority, request.request.id, resume


def bound(approved: bool = True, echo: str | None = None) -> dict[str, Any]:
    request = requested()
    return {APPROVED_KEY: approved, ECHO_KEY: echo or request.request.action_digest}


def test_an_approved_bound_answer_is_recorded_under_the_authenticated_actor() -> None:
    authority, request_id_, resume = planned(bound(True))
    resolution = authority.get_resolution(request_id_)
    assert resolution is not None
    assert resolution.resolution.outcome == "approved"
    assert resolution.resolution.effective_scope == "once"
    assert decided_by(authority) == [ALICE["id"]]
    assert resume["i1"] == resolution.to_json()


def test_a_denying_bound_answer_is_recorded_as_a_deny() -> None:
    authority, request_id_, _ = planned(bound(False))
    resolution = authority.get_resolution(request_id_)
    assert resolution is not None and resolution.resolution.outcome == "denied"


@pytest.mark.parametrize("approved", [True, False], ids=["approve", "deny"])
def test_a_drifted_fingerprint_is_a_digest_mismatch_and_the_request_stays_pending(
    approved: bool,
) -> None:
    request = requested()
    authority = ApprovalAuthority(InMemoryLedger())
    authority.add(request)
    with refused(HOSTILE, ResumeRejected, opened=recorded(authority, request)) as raised:
        plan_resume(
            authority, {"i1": request.to_json()}, [entry(bound(approved, DRIFTED))], actor=ALICE
        )
    assert raised.value.code == "aais.digest_mismatch"
    assert authority.get_resolution(request.request.id) is None
    assert [r.id for r in authority.snapshot().snapshot.pending] == [request.request.id]


def test_a_bound_answer_without_an_authenticated_actor_is_refused_and_records_nothing() -> None:
    request = requested()
    authority = ApprovalAuthority(InMemoryLedger())
    authority.add(request)
    with refused(HOSTILE, ResumeRejected, opened=recorded(authority, request)) as raised:
        plan_resume(authority, {"i1": request.to_json()}, [entry(bound(True))], actor=None)
    assert raised.value.code == "aais.unauthenticated"
    assert authority.get_resolution(request.request.id) is None


def test_a_bound_answer_the_request_does_not_offer_is_an_invalid_resume() -> None:
    request = requested([APPROVE_ONCE, CANCEL])
    authority = ApprovalAuthority(InMemoryLedger())
    authority.add(request)
    payload = {APPROVED_KEY: False, ECHO_KEY: request.request.action_digest}
    with refused(HOSTILE, ResumeRejected, opened=recorded(authority, request)) as raised:
        plan_resume(authority, {"i1": request.to_json()}, [entry(payload)], actor=ALICE)
    assert raised.value.code == "aais.invalid_resume"
    assert "/resume/0/payload/approved" in raised.value.message
    assert authority.get_resolution(request.request.id) is None


# -- the schema describes exactly what is accepted --------------------------------------


def accepted(request: ApprovalRequested, payload: Any) -> bool:
    authority = ApprovalAuthority(InMemoryLedger())
    authority.add(request)
    try:
        plan_resume(authority, {"i1": request.to_json()}, [entry(payload)], actor=ALICE)
    except ResumeRejected:
        return False
    return True


CHOICE_SETS = st.sampled_from(
    [
        [APPROVE_ONCE, DENY],
        [APPROVE_SESSION, DENY],
        [APPROVE_ONCE, CANCEL],
        [DENY],
        [CANCEL],
    ]
)
ECHOES = st.sampled_from(["digest", DRIFTED, "sha256:ABC", "", SECRET]) | st.integers() | st.none()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    choices=CHOICE_SETS,
    approved=st.booleans() | st.integers(0, 1) | st.none() | st.text(max_size=3),
    echo=ECHOES,
    extra=st.dictionaries(st.sampled_from(["verifierReceipt", "note", "aais"]), JSON, max_size=1),
    drop=st.sampled_from([None, APPROVED_KEY, ECHO_KEY]),
)
def test_a_bound_payload_validates_against_the_served_schema_exactly_when_accepted(
    choices: list[dict[str, Any]],
    approved: Any,
    echo: Any,
    extra: dict[str, Any],
    drop: str | None,
) -> None:
    request = requested(choices)
    digest = request.request.action_digest
    payload: dict[str, Any] = {
        APPROVED_KEY: approved,
        ECHO_KEY: digest if echo == "digest" else echo,
        **extra,
    }
    if drop is not None:
        payload.pop(drop)
    schema = request_to_interrupt(request, interrupt_id="i1").response_schema
    valid = jsonschema.Draft202012Validator(schema).is_valid(payload)
    assert valid == accepted(request, payload), json.dumps(payload)


# -- the served agent ------------------------------------------------------------------


async def test_a_generic_client_answers_with_only_ag_ui_fields_and_the_action_runs_once(
    agent: AAISLangGraphAgent, authority: ApprovalAuthority, effects: EffectLog
) -> None:
    thread_id, [item] = await paused(agent)
    payload = generic_answer(wire(item))
    assert jsonschema.Draft202012Validator(item.response_schema).is_valid(payload)
    resume = [ResumeEntry(interrupt_id=item.id, status="resolved", payload=payload)]
    finished = terminal(await run(agent, thread_id, resume=resume))
    assert finished.type == EventType.RUN_FINISHED
    assert len(effects.list()) == 1
    resolution = authority.get_resolution(request_id(item))
    assert resolution is not None and resolution.resolution.outcome == "approved"
    assert decided_by(authority) == [ALICE["id"]]


async def test_a_drifted_fingerprint_from_a_generic_client_is_a_run_error_and_nothing_runs(
    agent: AAISLangGraphAgent, authority: ApprovalAuthority, effects: EffectLog
) -> None:
    thread_id, [item] = await paused(agent)
    payload = {**generic_answer(wire(item)), ECHO_KEY: DRIFTED}
    resume = [ResumeEntry(interrupt_id=item.id, status="resolved", payload=payload)]
    with hostile_input(HOSTILE, lambda: bool(effects.list())):
        events = await run(agent, thread_id, resume=resume)
    refused = terminal(events)
    assert refused.type == EventType.RUN_ERROR and refused.code == "aais.digest_mismatch"
    assert [offered.id for offered in reoffered(events)] == [item.id]
    assert authority.get_resolution(request_id(item)) is None
    assert effects.list() == []


async def test_a_bound_answer_outside_a_planned_run_is_refused_and_records_nothing(
    agent: AAISLangGraphAgent, authority: ApprovalAuthority
) -> None:
    _, [item] = await paused(agent)
    answer = ResumeEntry(
        interrupt_id=item.id, status="resolved", payload=generic_answer(wire(item))
    )
    with refused(HOSTILE, RuntimeError, opened=lambda: authority.get_resolution(request_id(item))):
        agent.with_actor(ALICE)._build_command_from_agui_resume([answer])
    assert authority.get_resolution(request_id(item)) is None

"""aais_agui.mapping: AAIS requests -> AG-UI interrupts, resume entries -> AAIS answers."""

from __future__ import annotations

import copy
from typing import Any

import aais
import jsonschema
import pytest
from ag_ui.core import Interrupt, ResumeEntry
from hypothesis import given, settings
from hypothesis import strategies as st

from aais_agui.mapping import (
    APPROVAL_REASON,
    TOOL_CALL_EXTENSION,
    TOOL_CALL_REASON,
    decided_response_schema,
    interrupt_to_request,
    parse_resume_entry,
    request_to_interrupt,
    resume_entry_for,
)
from aais_langgraph.protocol import (
    AAISValidationError,
    ApprovalDecided,
    ApprovalRequested,
    build_decision,
    build_request,
)
from aais_langgraph.threads import Cancellation

SECRET = "s3cr3t-value-never-echoed"
ALICE = {"id": "alice", "type": "human"}
CHOICES = [
    {"decision": "approve", "scope": "once", "label": "Approve once"},
    {
        "decision": "approve",
        "scope": "session",
        "label": "Approve for the session",
        "scope_constraints": {"action_name": "send_email"},
    },
    {"decision": "deny", "scope": "once", "label": "Deny"},
]


def requested(*, tool_call_id: Any = None) -> ApprovalRequested:
    extensions = None if tool_call_id is None else {TOOL_CALL_EXTENSION: tool_call_id}
    return build_request(
        {
            "kind": "tool.call",
            "name": "send_email",
            "summary": "Send the quarterly report to the board",
            "arguments": {"to": "board@example.com", "token": SECRET},
        },
        origin={"harness": "aais-langgraph", "session_id": "thread-1"},
        choices=CHOICES,
        extensions=extensions,
    )


def decided(request: ApprovalRequested, **kwargs: Any) -> ApprovalDecided:
    return build_decision(request, actor=ALICE, **{"decision": "approve", **kwargs})


# -- request -> interrupt -------------------------------------------------------------


def test_interrupt_id_is_the_langgraph_interrupt_id() -> None:
    interrupt = request_to_interrupt(requested(), interrupt_id="0f" * 16)
    assert interrupt.id == "0f" * 16


def test_node_approval_has_reason_aais_approval_and_no_tool_call() -> None:
    interrupt = request_to_interrupt(requested(), interrupt_id="i1")
    assert interrupt.reason == APPROVAL_REASON == "aais:approval"
    assert interrupt.tool_call_id is None


def test_tool_approval_has_reason_tool_call_and_its_tool_call_id() -> None:
    interrupt = request_to_interrupt(requested(tool_call_id="call_42"), interrupt_id="i1")
    assert interrupt.reason == TOOL_CALL_REASON == "tool_call"
    assert interrupt.tool_call_id == "call_42"


def test_message_is_action_summary_and_expiry_is_request_expiry() -> None:
    request = requested()
    interrupt = request_to_interrupt(request, interrupt_id="i1")
    assert interrupt.message == "Send the quarterly report to the board"
    assert interrupt.expires_at == request.request.expires_at


def test_metadata_aais_is_the_complete_requested_envelope_and_validates() -> None:
    request = requested(tool_call_id="call_1")
    interrupt = request_to_interrupt(request.to_json(), interrupt_id="i1")
    assert interrupt.metadata is not None
    assert interrupt.metadata["aais"] == request.to_json()
    aais.validate(interrupt.metadata["aais"])


def test_interrupt_wire_form_is_camel_case_and_omits_absent_fields() -> None:
    wire = request_to_interrupt(requested(), interrupt_id="i1").model_dump(
        by_alias=True, mode="json"
    )
    assert {"id", "reason", "message", "responseSchema", "expiresAt", "metadata"} == set(wire)


def test_interrupt_reads_back_into_the_requested_envelope() -> None:
    request = requested()
    wire = request_to_interrupt(request, interrupt_id="i1").model_dump(by_alias=True, mode="json")
    assert interrupt_to_request(wire) == request


def test_response_schema_is_a_valid_json_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(decided_response_schema(requested().request))


def test_response_schema_accepts_every_offered_choice() -> None:
    request = requested()
    validator = jsonschema.Draft202012Validator(
        decided_response_schema(request.request), format_checker=jsonschema.FormatChecker()
    )
    for choice in CHOICES:
        validator.validate(
            decided(request, decision=choice["decision"], scope=choice["scope"]).to_json()
        )


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("decision", "scope"), "persistent"),
        (("decision", "decision"), "cancel"),
        (("decision", "request_id"), "apr_other"),
        (("decision", "action_digest"), "sha256:" + "0" * 64),
        (("decision", "actor", "role"), "admin"),
        (("type",), "approval.resolved"),
    ],
)
def test_response_schema_rejects_what_was_not_offered(path: tuple[str, ...], value: str) -> None:
    request = requested()
    document = decided(request).to_json()
    target = document
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    validator = jsonschema.Draft202012Validator(decided_response_schema(request.request))
    assert not validator.is_valid(document)


def test_non_string_tool_call_id_extension_is_rejected() -> None:
    with pytest.raises(AAISValidationError) as caught:
        request_to_interrupt(requested(tool_call_id=7), interrupt_id="i1")
    assert caught.value.pointer == "/request/extensions/aais-langgraph.org~1tool_call_id"


def test_request_with_a_wrong_digest_is_rejected() -> None:
    document = requested().to_json()
    document["request"]["action_digest"] = "sha256:" + "1" * 64
    with pytest.raises(AAISValidationError, match="/request/action_digest"):
        request_to_interrupt(document, interrupt_id="i1")


def test_other_envelope_types_are_not_interrupts() -> None:
    with pytest.raises(AAISValidationError, match="/type"):
        request_to_interrupt(decided(requested()).to_json(), interrupt_id="i1")


@pytest.mark.parametrize("interrupt_id", ["", None, 3])
def test_interrupt_needs_a_non_empty_id(interrupt_id: Any) -> None:
    with pytest.raises(AAISValidationError, match="/interrupt_id"):
        request_to_interrupt(requested(), interrupt_id=interrupt_id)


def test_interrupt_without_aais_metadata_has_no_request() -> None:
    with pytest.raises(AAISValidationError, match="/metadata/aais"):
        interrupt_to_request(Interrupt(id="i1", reason="langgraph:interrupt"))


# -- resume entry -> decided / cancellation -------------------------------------------


def wire(entry: ResumeEntry) -> dict[str, Any]:
    return entry.model_dump(by_alias=True, mode="json")


def test_decided_envelope_in_metadata_aais_is_the_answer() -> None:
    request = requested()
    decision = decided(request)
    entry = wire(resume_entry_for(decision, interrupt_id="i1"))
    assert parse_resume_entry(entry, request=request.request) == decision


def test_decided_envelope_in_payload_aais_is_accepted() -> None:
    request = requested()
    decision = decided(request)
    entry = {"interruptId": "i1", "status": "resolved", "payload": {"aais": decision.to_json()}}
    assert parse_resume_entry(entry, request=request.request) == decision


def test_metadata_and_payload_that_agree_are_accepted() -> None:
    request = requested()
    body = decided(request).to_json()
    entry = {
        "interruptId": "i1",
        "status": "resolved",
        "payload": {"aais": body},
        "metadata": {"aais": body},
    }
    assert isinstance(parse_resume_entry(entry), ApprovalDecided)


def test_metadata_and_payload_that_disagree_are_rejected() -> None:
    request = requested()
    entry = {
        "interruptId": "i1",
        "status": "resolved",
        "payload": {"aais": decided(request, decision="deny").to_json()},
        "metadata": {"aais": decided(request).to_json()},
    }
    with pytest.raises(AAISValidationError, match="disagrees"):
        parse_resume_entry(entry)


def test_resolved_entry_without_an_envelope_is_rejected() -> None:
    with pytest.raises(AAISValidationError) as caught:
        parse_resume_entry({"interruptId": "i1", "status": "resolved", "payload": {"ok": True}})
    assert caught.value.pointer == "/payload"


def test_the_envelope_itself_as_payload_is_accepted() -> None:
    # What the interrupt's responseSchema describes: resolve(decided, interrupt.id).
    request = requested()
    decision = decided(request)
    entry = {"interruptId": "i1", "status": "resolved", "payload": decision.to_json()}
    assert parse_resume_entry(entry, request=request.request) == decision


def test_an_envelope_payload_and_the_same_envelope_in_metadata_agree() -> None:
    request = requested()
    body = decided(request).to_json()
    entry = {"interruptId": "i1", "status": "resolved", "payload": body, "metadata": {"aais": body}}
    assert parse_resume_entry(entry, request=request.request).to_json() == body


def test_a_wrapper_with_other_members_is_rejected_naming_the_member() -> None:
    request = requested()
    payload = {"aais": decided(request).to_json(), "note": "hi"}
    with pytest.raises(AAISValidationError) as caught:
        parse_resume_entry({"interruptId": "i1", "status": "resolved", "payload": payload})
    assert caught.value.pointer == "/payload/note"


@pytest.mark.parametrize("version", [None, 1, ["1.0"], True])
def test_a_payload_aais_that_is_neither_envelope_nor_version_is_rejected(version: Any) -> None:
    with pytest.raises(AAISValidationError) as caught:
        parse_resume_entry(
            {"interruptId": "i1", "status": "resolved", "payload": {"aais": version}}
        )
    assert caught.value.pointer == "/payload/aais"


def test_a_payload_with_the_version_but_no_type_is_read_as_an_envelope() -> None:
    with pytest.raises(AAISValidationError) as caught:
        parse_resume_entry({"interruptId": "i1", "status": "resolved", "payload": {"aais": "1.0"}})
    assert caught.value.pointer.startswith("/payload/")
    assert not caught.value.pointer.startswith("/payload/aais")


def test_decision_for_another_request_is_rejected() -> None:
    entry = wire(resume_entry_for(decided(requested()), interrupt_id="i1"))
    with pytest.raises(AAISValidationError, match="does not name the request"):
        parse_resume_entry(entry, request=requested().request)


def test_cancelled_entry_is_an_aais_cancel_of_the_interrupts_request() -> None:
    request = requested()
    answer = parse_resume_entry(
        {"interruptId": "i1", "status": "cancelled", "payload": {"reason": "Not now"}},
        request=request.request,
    )
    assert answer == Cancellation(request_id=request.request.id, reason="Not now")


def test_cancelled_entry_may_name_its_request_by_envelope() -> None:
    request = requested()
    entry = {
        "interruptId": "i1",
        "status": "cancelled",
        "metadata": {"aais": decided(request, decision="cancel").to_json()},
    }
    assert parse_resume_entry(entry) == Cancellation(request_id=request.request.id)


def test_cancelled_entry_without_a_request_is_rejected() -> None:
    with pytest.raises(AAISValidationError, match="/interrupt_id"):
        parse_resume_entry({"interruptId": "i1", "status": "cancelled"})


@pytest.mark.parametrize(
    ("entry", "pointer"),
    [
        ("not an object", ""),
        ({"status": "resolved"}, "/interruptId"),
        ({"interruptId": "i1", "status": "maybe"}, "/status"),
        ({"interruptId": "i1", "status": "resolved", "metadata": ["aais"]}, "/metadata"),
        ({"interruptId": "i1", "status": "resolved", "metadata": {"aais": None}}, "/metadata/aais"),
        ({"interruptId": "i1", "status": "resolved", "metadata": {"aais": "{}"}}, "/metadata/aais"),
        ({"interruptId": "i1", "status": "cancelled", "payload": {"reason": 5}}, "/payload/reason"),
    ],
)
def test_malformed_entries_raise_a_pointed_error(entry: Any, pointer: str) -> None:
    with pytest.raises(AAISValidationError) as caught:
        parse_resume_entry(entry, request=requested().request)
    assert caught.value.pointer == pointer


def test_a_requested_envelope_is_not_an_answer() -> None:
    request = requested()
    entry = {"interruptId": "i1", "status": "resolved", "metadata": {"aais": request.to_json()}}
    with pytest.raises(AAISValidationError) as caught:
        parse_resume_entry(entry)
    assert caught.value.pointer == "/metadata/aais/type"


def test_errors_are_pointed_under_the_given_prefix() -> None:
    with pytest.raises(AAISValidationError) as caught:
        parse_resume_entry({"interruptId": "i1", "status": "resolved"}, pointer="/resume/3")
    assert caught.value.pointer == "/resume/3/payload"


# -- properties -----------------------------------------------------------------------

JSON_LEAVES = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
JSON = st.recursive(
    JSON_LEAVES | st.just(SECRET),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.text(max_size=6) | st.just("aais"), children, max_size=3)
    ),
    max_leaves=12,
)
DECIDED = decided(requested()).to_json()


def mutated_envelope(data: st.DataObject) -> Any:
    """The valid envelope with one member replaced by arbitrary JSON (or the secret)."""
    document = copy.deepcopy(DECIDED)
    section = data.draw(st.sampled_from(["envelope", "decision", "actor"]))
    target = {
        "envelope": document,
        "decision": document["decision"],
        "actor": document["decision"]["actor"],
    }[section]
    key = data.draw(st.sampled_from([*target, "unknown_member"]))
    target[key] = data.draw(JSON)
    return document


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_any_entry_parses_or_raises_a_value_free_validation_error(data: st.DataObject) -> None:
    envelope = data.draw(st.sampled_from(["valid", "mutated", "arbitrary"]))
    body = {
        "valid": lambda: DECIDED,
        "mutated": lambda: mutated_envelope(data),
        "arbitrary": lambda: data.draw(JSON),
    }[envelope]()
    entry: dict[str, Any] = {
        "interruptId": data.draw(st.sampled_from(["i1", "", 5, None])),
        "status": data.draw(st.sampled_from(["resolved", "cancelled", "other", None])),
    }
    placement = data.draw(st.sampled_from(["metadata", "payload", "both", "none"]))
    if placement in ("metadata", "both"):
        entry["metadata"] = {"aais": body}
    if placement in ("payload", "both"):
        entry["payload"] = {"aais": body}
    if data.draw(st.booleans()):
        entry["payload"] = data.draw(JSON)
    try:
        answer = parse_resume_entry(entry)
    except AAISValidationError as error:
        assert SECRET not in str(error)
        assert error.pointer == "" or error.pointer.startswith("/")
        return
    assert isinstance(answer, (ApprovalDecided, Cancellation))
    if isinstance(answer, ApprovalDecided):
        carried = [
            container["aais"]
            for container in (entry.get("metadata"), entry.get("payload"))
            if isinstance(container, dict) and isinstance(container.get("aais"), dict)
        ] + [entry.get("payload")]
        assert answer.to_json() in carried
        aais.validate(answer.to_json())


@settings(max_examples=100, deadline=None)
@given(
    decision=st.sampled_from([("approve", "once"), ("approve", "session"), ("deny", "once")]),
    placement=st.sampled_from(["metadata", "payload", "both", "bare", "bare+metadata"]),
)
def test_valid_decisions_round_trip_wherever_they_are_placed(
    decision: tuple[str, str], placement: str
) -> None:
    request = requested()
    body = decided(request, decision=decision[0], scope=decision[1])
    entry: dict[str, Any] = {"interruptId": "i1", "status": "resolved"}
    if placement in ("metadata", "both", "bare+metadata"):
        entry["metadata"] = {"aais": body.to_json()}
    if placement in ("payload", "both"):
        entry["payload"] = {"aais": body.to_json()}
    if placement.startswith("bare"):
        entry["payload"] = body.to_json()
    assert parse_resume_entry(entry, request=request.request) == body


def test_the_tool_call_extension_is_the_one_the_tool_gate_writes() -> None:
    from aais_langgraph.tools import TOOL_CALL_ID_EXTENSION

    assert TOOL_CALL_EXTENSION == TOOL_CALL_ID_EXTENSION

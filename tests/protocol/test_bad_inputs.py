"""Bad input through ``parse_envelope``: refused with a pointer, never echoed back."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aais
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aais_langgraph.protocol import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_DEPTH,
    AAISValidationError,
    Action,
    ApprovalRequested,
    Envelope,
    action_digest,
    build_request,
    parse_envelope,
)
from hostile.report import record, refused

from .conftest import SECRET, fixture

LIBRARY = "library"  # the hostile-input table's row (tests/hostile/report.py)

# The shell fixture with a secret-looking argument (and its digest), so every error
# below can be checked for never echoing an argument value.
ARGUMENTS = "/request/action/arguments"


def request() -> dict[str, Any]:
    document = fixture("shell-approval.json")
    document["request"]["action"]["arguments"]["api_key"] = SECRET
    document["request"]["action_digest"] = action_digest(document["request"]["action"])
    return document


def decision() -> dict[str, Any]:
    return fixture("approve-once.json")


def edit(base: Callable[[], dict[str, Any]], pointer: str, value: Any) -> dict[str, Any]:
    """``base()`` with the member at ``pointer`` set to ``value`` (or deleted for DELETE)."""
    document = base()
    *parents, last = [int(t) if t.isdigit() else t for t in pointer.split("/")[1:]]
    target: Any = document
    for token in parents:
        target = target[token]
    if value is DELETE:
        del target[last]
    else:
        target[last] = value
    return document


DELETE = object()


def request_text(old: str, new: str) -> str:
    """The request as JSON text, with one literal replacement."""
    text = json.dumps(request())
    assert old in text
    return text.replace(old, new, 1)


def nested(depth: int) -> dict[str, Any]:
    return functools.reduce(lambda inner, _: {"a": inner}, range(depth), {})


def with_arguments(arguments: dict[Any, Any]) -> dict[str, Any]:
    document = request()
    document["request"]["action"]["arguments"] = arguments
    return document


# Fewer characters than max_bytes, more UTF-8 bytes: the bound counts bytes.
UTF8_TEXT = json.dumps(edit(request, "/request/risk/reasons/0", "Grüße " * 50), ensure_ascii=False)


@dataclass
class Case:
    id: str
    data: Any
    pointer: str
    hidden: tuple[str, ...] = ()
    options: dict[str, Any] = field(default_factory=dict)
    reason: str = ""  # a word of the expected reason, for errors about the whole document


SESSION_DENY = {
    "decision": "deny",
    "scope": "session",
    "label": "Deny",
    "scope_constraints": {"k": 1},
}
CASES = [
    # --- I-JSON, in text ---
    Case(
        "dup-key-text",
        request_text('"name": "shell.exec"', f'"name": "shell.exec", "name": "{SECRET}"'),
        "/request/action/name",
    ),
    Case(
        "dup-key-text-top", request_text('"aais": "1.0"', '"aais": "1.0", "aais": "1.0"'), "/aais"
    ),
    Case(
        "nan-text", request_text(f'"api_key": "{SECRET}"', '"api_key": NaN'), f"{ARGUMENTS}/api_key"
    ),
    Case(
        "infinity-text",
        request_text(f'"api_key": "{SECRET}"', '"api_key": Infinity'),
        f"{ARGUMENTS}/api_key",
    ),
    Case(
        "minus-infinity-text",
        request_text(f'"api_key": "{SECRET}"', '"api_key": -Infinity'),
        f"{ARGUMENTS}/api_key",
    ),
    Case(
        "overflow-to-infinity-text",
        request_text(f'"api_key": "{SECRET}"', '"api_key": 1e400'),
        f"{ARGUMENTS}/api_key",
        ("1e400",),
    ),
    Case(
        "2**53-text",
        request_text('"sequence": 41', f'"sequence": {2**53}'),
        "/sequence",
        (str(2**53),),
    ),
    Case(
        "-(2**53)-text",
        request_text(f'"api_key": "{SECRET}"', f'"api_key": {-(2**53)}'),
        f"{ARGUMENTS}/api_key",
        (str(2**53),),
    ),
    Case(
        "lone-surrogate-escape-text",
        request_text('"Deny"', '"\\ud800 Deny"'),
        "/request/choices/2/label",
    ),
    Case(
        "lone-surrogate-in-str-text",
        request_text(f'"{SECRET}"', f'"\ud800{SECRET}"'),
        f"{ARGUMENTS}/api_key",
    ),
    Case(
        "nesting-1000-text",
        request_text('"api_key"', '"deep": ' + "[" * 1000 + "]" * 1000 + ', "x"'),
        "",
        reason="nesting",
    ),
    Case(
        "nesting-over-custom-bound-text",
        json.dumps(request()),
        "",
        options={"max_depth": 3},
        reason="nesting",
    ),
    Case("oversize-text", json.dumps(request()) + " " * DEFAULT_MAX_BYTES, "", reason="larger"),
    Case(
        "oversize-utf8-text", UTF8_TEXT, "", options={"max_bytes": len(UTF8_TEXT)}, reason="larger"
    ),
    Case(
        "oversize-bytes",
        json.dumps(request()).encode(),
        "",
        options={"max_bytes": 100},
        reason="larger",
    ),
    Case(
        "invalid-utf8-bytes",
        json.dumps(request()).encode().replace(SECRET.encode(), b"\xff" + SECRET.encode()),
        "",
        reason="UTF-8",
    ),
    Case("not-json-text", json.dumps(request())[:-2], "", reason="well-formed"),
    Case("top-level-array-text", json.dumps([request()]), "", reason="object"),
    Case("not-text-or-object", 12345, "", reason="JSON"),
    # --- I-JSON, in mappings ---
    Case("nan-mapping", with_arguments({"api_key": float("nan")}), f"{ARGUMENTS}/api_key"),
    Case("infinity-mapping", with_arguments({"api_key": float("inf")}), f"{ARGUMENTS}/api_key"),
    Case(
        "2**53-mapping", with_arguments({"api_key": 2**53}), f"{ARGUMENTS}/api_key", (str(2**53),)
    ),
    Case("-(2**53)-mapping", edit(request, "/sequence", -(2**53)), "/sequence", (str(2**53),)),
    Case("non-string-key-mapping", with_arguments({1: SECRET}), ARGUMENTS),
    Case("bytes-key-mapping", with_arguments({SECRET.encode(): 1}), ARGUMENTS),
    Case("non-string-key-top-level", {**request(), (SECRET,): 1}, "", reason="keys"),
    Case(
        "lone-surrogate-mapping",
        with_arguments({"api_key": SECRET + "\udfff"}),
        f"{ARGUMENTS}/api_key",
    ),
    Case("lone-surrogate-key-mapping", with_arguments({"\ud800" + SECRET: 1}), ARGUMENTS),
    Case(
        "bytes-value-mapping", with_arguments({"api_key": SECRET.encode()}), f"{ARGUMENTS}/api_key"
    ),
    Case(
        "nesting-1000-mapping",
        with_arguments(nested(1000)),
        ARGUMENTS + "/a" * (DEFAULT_MAX_DEPTH - 3),
    ),
    Case("nesting-over-custom-bound-mapping", request(), ARGUMENTS, options={"max_depth": 3}),
    # --- timestamps ---
    Case("timestamp-banana", edit(request, "/occurred_at", "banana"), "/occurred_at", ("banana",)),
    Case("timestamp-secret", edit(request, "/request/created_at", SECRET), "/request/created_at"),
    Case(
        "timestamp-no-offset",
        edit(request, "/request/expires_at", "2026-08-30T18:10:00"),
        "/request/expires_at",
        ("2026-08-30T18:10:00",),
    ),
    Case(
        "timestamp-week-date",
        edit(decision, "/decision/decided_at", "2026-W35-1T00:00:00Z"),
        "/decision/decided_at",
        ("2026-W35-1",),
    ),
    Case(
        "timestamp-space-separator",
        edit(request, "/occurred_at", "2026-08-30 18:00:00Z"),
        "/occurred_at",
        ("2026-08-30 18:00:00Z",),
    ),
    Case(
        "timestamp-feb-30",
        edit(request, "/request/created_at", "2026-02-30T00:00:00Z"),
        "/request/created_at",
        ("2026-02-30",),
    ),
    Case(
        "timestamp-missing-seconds",
        edit(decision, "/occurred_at", "2026-08-30T18:01Z"),
        "/occurred_at",
        ("2026-08-30T18:01Z",),
    ),
    # --- digests ---
    Case(
        "digest-uppercase-hex",
        edit(request, "/request/action_digest", "sha256:" + "AB" * 32),
        "/request/action_digest",
        ("AB" * 32,),
    ),
    Case(
        "digest-short",
        edit(decision, "/decision/action_digest", "sha256:" + "ab" * 31),
        "/decision/action_digest",
        ("ab" * 31,),
    ),
    Case(
        "digest-md5",
        edit(decision, "/decision/action_digest", "md5:" + "ab" * 16),
        "/decision/action_digest",
        ("ab" * 16,),
    ),
    Case(
        "digest-not-matching-action",
        edit(request, "/request/action/summary", "Something else"),
        "/request/action_digest",
        ("Something else",),
    ),
    # --- ids ---
    Case("id-control-char", edit(request, "/request/id", f"apr\x07{SECRET}"), "/request/id"),
    Case(
        "id-trailing-newline",
        edit(decision, "/decision/request_id", f"{SECRET}\n"),
        "/decision/request_id",
    ),
    Case("id-leading-dot", edit(request, "/id", f".{SECRET}"), "/id"),
    Case(
        "id-201-chars",
        edit(request, "/request/origin/session_id", SECRET + "x" * (201 - len(SECRET))),
        "/request/origin/session_id",
    ),
    # --- unknown members, extensions, nulls ---
    Case("unknown-top-level", {**request(), "approved": SECRET}, "/approved"),
    Case(
        "unknown-nested", edit(decision, "/decision/actor/token", SECRET), "/decision/actor/token"
    ),
    Case(
        "unknown-in-action",
        edit(request, "/request/action/secret", SECRET),
        "/request/action/secret",
    ),
    Case(
        "extension-not-namespaced",
        edit(request, "/extensions", {"token": SECRET}),
        "/extensions/token",
    ),
    Case("null-optional-top", edit(request, "/stream", None), "/stream"),
    Case("null-optional-nested", edit(request, "/request/expires_at", None), "/request/expires_at"),
    # --- wrong types ---
    Case("sequence-as-string", edit(request, "/sequence", SECRET), "/sequence"),
    Case("bool-as-sequence", edit(request, "/sequence", True), "/sequence"),
    Case(
        "redacted-as-yes",
        edit(
            request,
            "/request/action/presentation",
            {"redacted": "yes", "binding_hint": "vault://k"},
        ),
        "/request/action/presentation/redacted",
        ("yes",),
    ),
    Case("choices-as-string", edit(request, "/request/choices", SECRET), "/request/choices"),
    Case("arguments-as-list", edit(request, "/request/action/arguments", [SECRET]), ARGUMENTS),
    Case("risk-level-unknown", edit(request, "/request/risk/level", SECRET), "/request/risk/level"),
    # --- AAIS rules beyond types ---
    Case(
        "deny-with-session-scope",
        edit(request, "/request/choices/2", SESSION_DENY),
        "/request/choices/2/scope",
    ),
    Case(
        "decision-deny-with-session-scope",
        edit(lambda: edit(decision, "/decision/decision", "deny"), "/decision/scope", "session"),
        "/decision/scope",
    ),
    Case(
        "session-choice-without-constraints",
        edit(request, "/request/choices/1/scope_constraints", DELETE),
        "/request/choices/1/scope_constraints",
    ),
    Case(
        "empty-scope-constraints",
        edit(request, "/request/choices/1/scope_constraints", {}),
        "/request/choices/1/scope_constraints",
    ),
    Case(
        "redacted-without-binding-hint",
        edit(request, "/request/action/presentation", {"redacted": True}),
        "/request/action/presentation/binding_hint",
    ),
    Case(
        "request-without-deny-or-cancel",
        edit(request, "/request/choices", request()["request"]["choices"][:2]),
        "/request/choices",
    ),
    Case(
        "duplicate-choice-pair",
        edit(
            request,
            "/request/choices",
            [
                *request()["request"]["choices"],
                {"decision": "approve", "scope": "once", "label": "Again"},
            ],
        ),
        "/request/choices/3",
    ),
    Case(
        "expires-before-created",
        edit(request, "/request/expires_at", "2026-08-30T17:59:59Z"),
        "/request/expires_at",
        ("17:59:59",),
    ),
    Case(
        "expires-equal-created",
        edit(request, "/request/expires_at", "2026-08-30T20:00:00+02:00"),
        "/request/expires_at",
    ),
    Case("wrong-aais-version", edit(request, "/aais", "2.0"), "/aais", ("2.0",)),
    Case("aais-version-secret", edit(decision, "/aais", SECRET), "/aais"),
    Case(
        "unknown-type", edit(request, "/type", "approval.approved"), "/type", ("approval.approved",)
    ),
    Case("type-secret", edit(request, "/type", SECRET), "/type"),
    Case("type-missing", edit(request, "/type", DELETE), "/type"),
    Case("unexpected-envelope-type", decision(), "/type", options={"expected": ApprovalRequested}),
]
CASE_IDS = [case.id for case in CASES]


def test_table_is_large_enough_and_ids_are_unique() -> None:
    assert len(CASES) >= 40
    assert len(set(CASE_IDS)) == len(CASE_IDS)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_bad_input_is_refused_at_its_pointer(case: Case) -> None:
    with refused(LIBRARY, AAISValidationError) as caught:
        parse_envelope(case.data, **case.options)
    assert caught.value.pointer == case.pointer
    assert case.reason in caught.value.reason


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_bad_input_error_never_echoes_the_value(case: Case) -> None:
    with pytest.raises(AAISValidationError) as caught:
        parse_envelope(case.data, **case.options)
    for hidden in (SECRET, *case.hidden):
        assert hidden not in str(caught.value)
        assert hidden not in repr(caught.value)
        assert hidden not in caught.value.reason


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_bad_input_error_chains_no_other_exception(case: Case) -> None:
    # A chained pydantic or json error would carry the input into tracebacks.
    with pytest.raises(AAISValidationError) as caught:
        parse_envelope(case.data, **case.options)
    assert caught.value.__cause__ is None
    assert caught.value.__suppress_context__ or caught.value.__context__ is None


def test_the_base_document_of_the_table_is_valid() -> None:
    assert isinstance(parse_envelope(request()), ApprovalRequested)
    assert isinstance(parse_envelope(json.dumps(request())), ApprovalRequested)


def test_a_raised_depth_bound_admits_a_deeper_document() -> None:
    document = with_arguments(nested(DEFAULT_MAX_DEPTH))
    document["request"]["action_digest"] = aais.action_digest(document["request"]["action"])
    envelope = parse_envelope(json.dumps(document), max_depth=DEFAULT_MAX_DEPTH + 8)
    assert envelope.to_json() == document


def test_a_raised_size_bound_admits_a_larger_document() -> None:
    text = json.dumps(request()) + " " * DEFAULT_MAX_BYTES
    assert isinstance(parse_envelope(text, max_bytes=2 * DEFAULT_MAX_BYTES), ApprovalRequested)


# --- Nothing but AAISValidationError, whatever comes in -----------------------------

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

anything: st.SearchStrategy[Any] = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(),
        st.text(),
        st.binary(max_size=8),
        st.sampled_from(["1.0", "approval.requested", "2026-08-30T18:00:00Z", SECRET]),
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.one_of(st.text(max_size=8), st.integers()), children, max_size=4),
    ),
    max_leaves=16,
)


def _accepts_only_valid_envelopes(data: Any) -> None:
    try:
        envelope = parse_envelope(data)
    except AAISValidationError as error:
        record(LIBRARY, 1)
        assert SECRET not in str(error)
        return
    except Exception:
        record(LIBRARY, 1, server_errors=1)
        raise
    # Whatever we accept, the reference library accepts too (invariant 10).
    try:
        aais.validate(envelope.model_dump(mode="json"))
    except Exception:
        record(LIBRARY, 1, failed_open=1)
        raise
    record(LIBRARY, 1)
    assert isinstance(envelope, Envelope)


@FUZZ
@given(st.text())
def test_arbitrary_text_raises_only_validation_errors(text: str) -> None:
    _accepts_only_valid_envelopes(text)


@FUZZ
@given(st.binary())
def test_arbitrary_bytes_raise_only_validation_errors(data: bytes) -> None:
    _accepts_only_valid_envelopes(data)


@FUZZ
@given(st.dictionaries(st.one_of(st.text(max_size=10), st.integers()), anything, max_size=6))
def test_arbitrary_mappings_raise_only_validation_errors(data: dict[Any, Any]) -> None:
    _accepts_only_valid_envelopes(data)


def _locations(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found: list[tuple[Any, ...]] = []
    if isinstance(value, dict):
        for key, child in value.items():
            found.append((*path, key))
            found.extend(_locations(child, (*path, key)))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found.append((*path, index))
            found.extend(_locations(child, (*path, index)))
    return found


@FUZZ
@given(st.sampled_from([request, decision]), st.data())
def test_fixtures_with_one_member_replaced_raise_only_validation_errors(
    base: Callable[[], dict[str, Any]], data: st.DataObject
) -> None:
    document = base()
    path = data.draw(st.sampled_from(_locations(document)), label="path")
    target: Any = document
    for token in path[:-1]:
        target = target[token]
    target[path[-1]] = data.draw(anything, label="value")
    _accepts_only_valid_envelopes(document)


@FUZZ
@given(st.sampled_from([request, decision]), st.data())
def test_fixture_text_with_a_slice_replaced_raises_only_validation_errors(
    base: Callable[[], dict[str, Any]], data: st.DataObject
) -> None:
    text = json.dumps(base())
    start = data.draw(st.integers(0, len(text)), label="start")
    end = data.draw(st.integers(start, min(len(text), start + 8)), label="end")
    insert = data.draw(st.text(alphabet='{}[]":,0123456789-.eEtruefalsnNI\\ud8 ', max_size=6))
    _accepts_only_valid_envelopes(text[:start] + insert + text[end:])


# --- The other entry points that take an action: same refusals, same silence ----------

BAD_ARGUMENTS = [
    pytest.param({SECRET.encode(): 1}, "", id="bytes-key"),
    pytest.param({7: SECRET}, "", id="int-key"),
    pytest.param({"api_key": float("nan"), "x": SECRET}, "/api_key", id="nan"),
    pytest.param({"api_key": SECRET + "\ud800"}, "/api_key", id="lone-surrogate"),
    pytest.param({"api_key": 2**53, "x": SECRET}, "/api_key", id="2**53"),
    pytest.param({"api_key": {SECRET}}, "/api_key", id="set"),
    # Outside parse_envelope the bound counts from the free-form object itself.
    pytest.param(nested(1000), "/a" * DEFAULT_MAX_DEPTH, id="nesting-1000"),
]


def _bad_action(arguments: dict[Any, Any]) -> dict[str, Any]:
    action: dict[str, Any] = fixture("shell-approval.json")["request"]["action"]
    action["arguments"] = arguments
    return action


def _refusal(call: Callable[[], object]) -> AAISValidationError:
    with refused(LIBRARY, AAISValidationError) as caught:
        call()
    assert SECRET not in str(caught.value)
    return caught.value


@pytest.mark.parametrize(("arguments", "below"), BAD_ARGUMENTS)
def test_action_digest_refuses_bad_arguments_silently(arguments: Any, below: str) -> None:
    error = _refusal(lambda: action_digest(_bad_action(arguments)))
    assert error.pointer == "/action/arguments" + below


@pytest.mark.parametrize(("arguments", "below"), BAD_ARGUMENTS)
def test_action_from_data_refuses_bad_arguments_silently(arguments: Any, below: str) -> None:
    error = _refusal(lambda: Action.from_data(_bad_action(arguments)))
    assert error.pointer == "/arguments" + below


@pytest.mark.parametrize(("arguments", "below"), BAD_ARGUMENTS)
def test_build_request_refuses_bad_arguments_silently(arguments: Any, below: str) -> None:
    origin = {"harness": "h", "session_id": "s"}
    error = _refusal(lambda: build_request(_bad_action(arguments), origin=origin))
    assert error.pointer == "/request/action/arguments" + below

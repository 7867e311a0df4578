"""The protocol layer against the public AAIS 1.0 conformance data and JSON Schema."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import aais
import pytest

from aais_langgraph.protocol import (
    AAISValidationError,
    Action,
    ApprovalActivity,
    ApprovalDecided,
    ApprovalRequested,
    ApprovalResolved,
    ApprovalSnapshot,
    Envelope,
    action_digest,
    canonical_json,
    parse_envelope,
)

from .conftest import FIXTURE_DIGEST, fixture, fixture_text, schema_validator

FIXTURES = {
    "shell-approval.json": ApprovalRequested,
    "approve-once.json": ApprovalDecided,
}


def resolved_envelope() -> dict[str, Any]:
    return {
        "aais": "1.0",
        "type": "approval.resolved",
        "id": "evt_resolved_001",
        "occurred_at": "2026-08-30T18:01:00.5+02:00",
        "sequence": 42,
        "resolution": {
            "id": "res_001",
            "request_id": "apr_shell_001",
            "decision_id": "dec_001",
            "action_digest": FIXTURE_DIGEST,
            "resolved_at": "2026-08-30T18:01:00Z",
            "outcome": "approved",
            "message": "Approved once by the human reviewer.",
            "effective_scope": "once",
            "extensions": {"example.com/audit": {"entry": 7}},
        },
    }


def snapshot_envelope() -> dict[str, Any]:
    return {
        "aais": "1.0",
        "type": "approval.snapshot",
        "id": "evt_snapshot_001",
        "occurred_at": "2026-08-30T18:00:30Z",
        "sequence": 41,
        "snapshot": {"as_of_sequence": 41, "pending": [fixture("shell-approval.json")["request"]]},
    }


def activity_envelope() -> dict[str, Any]:
    return {
        "aais": "1.0",
        "type": "approval.activity",
        "id": "evt_activity_001",
        "occurred_at": "2026-08-30T18:01:05Z",
        "sequence": 43,
        "stream": "session_s1",
        "extensions": {"https://example.com/trace": "t-1"},
        "activity": {
            "request_id": "apr_shell_001",
            "message": "Running the check",
            "stage": "exec",
        },
    }


ALL_ENVELOPES: dict[str, Callable[[], dict[str, Any]]] = {
    "requested": lambda: fixture("shell-approval.json"),
    "decided": lambda: fixture("approve-once.json"),
    "resolved": resolved_envelope,
    "snapshot": snapshot_envelope,
    "activity": activity_envelope,
}


def compact(document: Any) -> bytes:
    """Order-preserving compact JSON bytes, so key order counts as a difference."""
    return json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def test_fixture_digest_is_reproduced_from_the_shell_approval_action(
    shell_request: dict[str, Any],
) -> None:
    assert action_digest(shell_request["request"]["action"]) == FIXTURE_DIGEST


def test_fixture_digest_is_reproduced_from_an_action_model(shell_request: dict[str, Any]) -> None:
    model = Action.model_validate(shell_request["request"]["action"])
    assert action_digest(model) == FIXTURE_DIGEST


def test_conformance_cases_name_the_same_digest() -> None:
    assert fixture("cases.json")["action_digest"] == FIXTURE_DIGEST


def test_digest_is_sha256_of_the_rfc8785_bytes(shell_request: dict[str, Any]) -> None:
    import hashlib

    action = shell_request["request"]["action"]
    expected = "sha256:" + hashlib.sha256(canonical_json(action)).hexdigest()
    assert action_digest(action) == expected


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_text_parses_to_its_envelope_type(name: str) -> None:
    assert type(parse_envelope(fixture_text(name))) is FIXTURES[name]


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_bytes_parse_to_its_envelope_type(name: str) -> None:
    assert type(parse_envelope(fixture_text(name).encode("utf-8"))) is FIXTURES[name]


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_round_trips_byte_identically(name: str) -> None:
    dumped = parse_envelope(fixture_text(name)).model_dump(mode="json")
    assert compact(dumped) == compact(fixture(name))


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_round_trips_canonically_identical(name: str) -> None:
    dumped = parse_envelope(fixture(name)).model_dump(mode="json")
    assert canonical_json(dumped) == canonical_json(fixture(name))


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_dump_reparses_to_an_equal_model(name: str) -> None:
    envelope = parse_envelope(fixture_text(name))
    assert parse_envelope(json.dumps(envelope.model_dump(mode="json"))) == envelope


@pytest.mark.parametrize("kind", ALL_ENVELOPES)
def test_model_dump_validates_against_the_schema_file(kind: str) -> None:
    envelope = parse_envelope(ALL_ENVELOPES[kind]())
    errors = [error.message for error in schema_validator().iter_errors(envelope.to_json())]
    assert errors == []


@pytest.mark.parametrize("kind", ALL_ENVELOPES)
def test_model_dump_passes_reference_validation(kind: str) -> None:
    envelope = parse_envelope(ALL_ENVELOPES[kind]())
    assert aais.validate(envelope.model_dump(mode="json")) == envelope.model_dump(mode="json")


@pytest.mark.parametrize("kind", ALL_ENVELOPES)
def test_model_dump_round_trips_byte_identically(kind: str) -> None:
    document = ALL_ENVELOPES[kind]()
    assert compact(parse_envelope(document).model_dump(mode="json")) == compact(document)


def test_envelope_types_cover_the_schema_one_of() -> None:
    schema = json.loads(fixture_text("aais-1.0.schema.json"))
    types = {
        branch["properties"]["type"]["const"]
        for name, definition in schema["$defs"].items()
        if name.endswith("Envelope")
        for branch in definition["allOf"][1:]
    }
    models: list[type[Envelope]] = [
        ApprovalRequested,
        ApprovalDecided,
        ApprovalResolved,
        ApprovalSnapshot,
        ApprovalActivity,
    ]
    assert {model.model_fields["type"].annotation.__args__[0] for model in models} == types


def test_schema_file_is_the_reference_library_schema() -> None:
    from importlib.resources import files

    bundled = files("aais").joinpath("schema/aais-1.0.schema.json").read_text(encoding="utf-8")
    assert json.loads(bundled) == json.loads(fixture_text("aais-1.0.schema.json"))


# --- Field-by-field agreement with the schema -------------------------------------
#
# Every member of both fixtures is dropped in turn, and an unknown member is added
# to every object: our verdict must equal the schema's. (Free-form objects accept
# unknown members in both.)


def _members(document: Any, path: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    found: list[tuple[str | int, ...]] = []
    if isinstance(document, dict):
        for key, value in document.items():
            found.append((*path, key))
            found.extend(_members(value, (*path, key)))
    elif isinstance(document, list):
        for index, value in enumerate(document):
            found.extend(_members(value, (*path, index)))
    return found


def _objects(document: Any, path: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    found: list[tuple[str | int, ...]] = []
    if isinstance(document, dict):
        found.append(path)
        for key, value in document.items():
            found.extend(_objects(value, (*path, key)))
    elif isinstance(document, list):
        for index, value in enumerate(document):
            found.extend(_objects(value, (*path, index)))
    return found


def _pointer(path: tuple[str | int, ...]) -> str:
    return "".join(f"/{token}" for token in path)


def _digest_free(name: str, path: tuple[str | int, ...]) -> bool:
    # Changing the action changes its digest, which the schema cannot check (the
    # reference library does, and refuses it too: see the last test).
    return not (name == "shell-approval.json" and path[:2] == ("request", "action"))


def _schema_accepts(document: dict[str, Any]) -> bool:
    return not list(schema_validator().iter_errors(document))


def _we_accept(document: dict[str, Any]) -> bool:
    try:
        parse_envelope(document)
    except AAISValidationError:
        return False
    return True


DROPS = [
    pytest.param(name, path, id=f"{name}:{_pointer(path)}")
    for name in FIXTURES
    for path in _members(fixture(name))
]
ADDITIONS = [
    pytest.param(name, path, id=f"{name}:{_pointer(path) or '/'}")
    for name in FIXTURES
    for path in _objects(fixture(name))
]


def _edit(name: str, path: tuple[str | int, ...], change: Callable[[Any], None]) -> dict[str, Any]:
    document = fixture(name)
    target: Any = document
    for token in path:
        target = target[token]
    change(target)
    return document


@pytest.mark.parametrize(("name", "path"), DROPS)
def test_dropping_a_member_gets_the_schema_verdict(name: str, path: tuple[str | int, ...]) -> None:
    document = fixture(name)
    parent: Any = document
    for token in path[:-1]:
        parent = parent[token]
    del parent[path[-1]]
    if _digest_free(name, path):
        assert _we_accept(document) == _schema_accepts(document)
    else:
        assert not _we_accept(document)


@pytest.mark.parametrize(("name", "path"), ADDITIONS)
def test_an_unknown_member_gets_the_schema_verdict(name: str, path: tuple[str | int, ...]) -> None:
    document = _edit(name, path, lambda target: target.__setitem__("x_unknown", 1))
    if _digest_free(name, (*path, "x_unknown")):
        assert _we_accept(document) == _schema_accepts(document)
    else:
        assert not _we_accept(document)


def test_free_form_action_arguments_accept_unknown_members_with_a_new_digest() -> None:
    document = fixture("shell-approval.json")
    document["request"]["action"]["arguments"]["x_unknown"] = 1
    document["request"]["action_digest"] = action_digest(document["request"]["action"])
    assert _we_accept(document)
    assert _schema_accepts(document)


BOUNDARIES = [
    # (id, pointer of a string member, length, accepted)
    ("id-200", "/request/id", 200, True),
    ("id-201", "/request/id", 201, False),
    ("label-200", "/request/choices/0/label", 200, True),
    ("label-201", "/request/choices/0/label", 201, False),
    ("reason-1000", "/request/risk/reasons/0", 1000, True),
    ("reason-1001", "/request/risk/reasons/0", 1001, False),
    ("project-4096", "/request/origin/project", 4096, True),
    ("project-4097", "/request/origin/project", 4097, False),
    ("label-empty", "/request/choices/0/label", 0, False),
]


@pytest.mark.parametrize(
    ("pointer", "length", "accepted"),
    [pytest.param(*case[1:], id=case[0]) for case in BOUNDARIES],
)
def test_string_length_limits_match_the_schema(pointer: str, length: int, accepted: bool) -> None:
    document = fixture("shell-approval.json")
    *parents, last = [int(t) if t.isdigit() else t for t in pointer.split("/")[1:]]
    target: Any = document
    for token in parents:
        target = target[token]
    # Astral characters: limits count code points, as JSON Schema does.
    target[last] = "a" + "\U0001f600" * (length - 1) if length and last != "id" else "a" * length
    assert (_we_accept(document), _schema_accepts(document)) == (accepted, accepted)


@pytest.mark.parametrize(
    ("member", "count", "accepted"),
    [
        pytest.param("effects", 100, True, id="effects-100"),
        pytest.param("effects", 101, False, id="effects-101"),
    ],
)
def test_array_limits_match_the_schema(member: str, count: int, accepted: bool) -> None:
    document = fixture("shell-approval.json")
    document["request"]["action"][member] = ["Reads a file"] * count
    document["request"]["action_digest"] = aais.action_digest(document["request"]["action"])
    assert (_we_accept(document), _schema_accepts(document)) == (accepted, accepted)


@pytest.mark.parametrize(
    ("count", "accepted"),
    [pytest.param(20, True, id="reasons-20"), pytest.param(21, False, id="reasons-21")],
)
def test_risk_reason_limits_match_the_schema(count: int, accepted: bool) -> None:
    document = fixture("shell-approval.json")
    document["request"]["risk"]["reasons"] = [f"Reason {index}" for index in range(count)]
    assert (_we_accept(document), _schema_accepts(document)) == (accepted, accepted)


def test_a_trailing_newline_is_not_an_id_though_python_jsonschema_accepts_it() -> None:
    # The schema's "$" matches before a final newline under Python's re.search.
    document = fixture("shell-approval.json")
    document["request"]["id"] = "apr_shell_001\n"
    assert (_we_accept(document), _schema_accepts(document)) == (False, True)


def test_mutated_action_is_refused_by_us_and_by_the_reference() -> None:
    document = copy.deepcopy(fixture("shell-approval.json"))
    document["request"]["action"]["summary"] = "Run something else"
    assert not _we_accept(document)
    with pytest.raises(aais.ValidationError):
        aais.validate(document)

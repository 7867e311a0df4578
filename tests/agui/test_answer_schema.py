"""The served ``responseSchema`` describes exactly the resume payloads the server accepts.

"Accepted" is the real planner (:func:`aais_agui.resume_plan.plan_resume` with a real
authority, before expiry): the decision parses, names the request and its
digest, and is an offered choice. "Validates" is ``jsonschema`` against the
interrupt's ``responseSchema`` as served. Both directions are checked on the
conformance fixtures and on generated payloads (I-JSON values: the JSON text
rules are the parser's, see :mod:`aais_langgraph.protocol.answer_schema`).
"""

from __future__ import annotations

import copy
import json
import string
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import aais
import jsonschema
import pytest
from ag_ui.core import ResumeEntry
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aais_agui.mapping import request_to_interrupt
from aais_agui.resume_plan import ResumeRejected, plan_resume
from aais_langgraph import ApprovalAuthority
from aais_langgraph.ledger import InMemoryLedger
from aais_langgraph.protocol import AAISValidationError, ApprovalRequested
from aais_langgraph.protocol.timestamps import parse_timestamp

CONFORMANCE = Path(__file__).resolve().parents[1] / "conformance"
REQUESTED = json.loads((CONFORMANCE / "shell-approval.json").read_text(encoding="utf-8"))
DECIDED = json.loads((CONFORMANCE / "approve-once.json").read_text(encoding="utf-8"))
CASES = json.loads((CONFORMANCE / "cases.json").read_text(encoding="utf-8"))["cases"]
BEFORE_EXPIRY = datetime(2026, 8, 30, 18, 1, tzinfo=timezone.utc)
ACTOR = {"id": "alice", "type": "human", "authenticated_by": "test"}
INTERRUPT_ID = "i1"


def served_schema() -> dict[str, Any]:
    interrupt = request_to_interrupt(REQUESTED, interrupt_id=INTERRUPT_ID)
    wire = interrupt.model_dump(by_alias=True, mode="json", exclude_none=True)
    schema: dict[str, Any] = wire["responseSchema"]
    return schema


VALIDATOR = jsonschema.Draft202012Validator(served_schema())


def accepted(payload: Any) -> bool:
    """Whether the server's planner takes ``payload`` as the answer (a fresh authority)."""
    authority = ApprovalAuthority(InMemoryLedger(), clock=lambda: BEFORE_EXPIRY)
    authority.add(REQUESTED)
    entry = ResumeEntry.model_validate(
        {"interruptId": INTERRUPT_ID, "status": "resolved", "payload": payload}
    )
    try:
        plan_resume(authority, {INTERRUPT_ID: REQUESTED}, [entry], actor=ACTOR)
    except ResumeRejected:
        return False
    return True


def test_served_schema_is_a_valid_2020_12_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(served_schema())


@pytest.mark.parametrize("wrapped", [False, True], ids=["envelope", "aais-wrapper"])
def test_the_conformance_decision_validates_and_is_accepted(wrapped: bool) -> None:
    payload = {"aais": DECIDED} if wrapped else DECIDED
    assert VALIDATOR.is_valid(payload)
    assert accepted(payload)


def apply_case_mutation(document: dict[str, Any], mutation: str) -> dict[str, Any] | None:
    """The conformance cases' decision mutations (``decision.scope=persistent``, ...)."""
    changed = copy.deepcopy(document)
    if mutation == "decision.id+decision.decision":
        changed["decision"]["id"] = "dec_002"
        changed["decision"]["decision"] = "deny"
        return changed
    if mutation.startswith("decision.") and "=" in mutation:
        path, value = mutation.split("=", 1)
        changed["decision"][path.removeprefix("decision.")] = value
        return changed
    return None  # a mutation of the current action, not of the answer


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
@pytest.mark.parametrize("wrapped", [False, True], ids=["envelope", "aais-wrapper"])
def test_conformance_case_answers_validate_exactly_when_accepted(
    case: dict[str, Any], wrapped: bool
) -> None:
    mutation = case.get("mutation")
    decision = DECIDED if mutation is None else apply_case_mutation(DECIDED, mutation)
    if decision is None:
        pytest.skip("mutates the action, not the answer")
    payload = {"aais": decision} if wrapped else decision
    assert VALIDATOR.is_valid(payload) == accepted(payload)


# -- generated payloads -----------------------------------------------------------------

ID_CHARS = string.ascii_letters + string.digits + "._:-"
IDS = st.text(ID_CHARS, min_size=1, max_size=12).filter(lambda t: t[0].isalnum()) | st.sampled_from(
    ["", "-lead", "a\n", "a b", "é", "x" * 201, "ok.id:1"]
)


@st.composite
def timestamps(draw: st.DrawFn) -> str:
    """Near-RFC 3339 text: every field ranging a little past what is valid."""
    year = draw(st.sampled_from(["0000", "0001", "1900", "2000", "2024", "2026", "9999"]))
    month = draw(st.integers(0, 13))
    day = draw(st.integers(0, 32))
    hour, minute, second = (
        draw(st.integers(0, 24)),
        draw(st.integers(0, 60)),
        draw(st.integers(0, 61)),
    )
    fraction = draw(st.sampled_from(["", ".5", ".123456789", ".1234567890", "."]))
    offset = draw(
        st.sampled_from(["Z", "z", "", "+00:00", "-23:59", "+24:00", "+05:60", "+5:00", "Zz"])
    )
    separator = draw(st.sampled_from(["T", "t", " "]))
    text = (
        f"{year}-{month:02}-{day:02}{separator}{hour:02}:{minute:02}:{second:02}{fraction}{offset}"
    )
    return text + draw(st.sampled_from(["", "", "", "\n", " "]))


SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: not f.is_integer())
    | st.text(max_size=6)
)
JSON = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
EXTENSIONS = st.dictionaries(
    st.sampled_from(["example.org/x", "https://example.org/y", "plain", "a.b/c"]), JSON, max_size=2
)
CHOICES = [(c["decision"], c["scope"]) for c in REQUESTED["request"]["choices"]]
ALL_PAIRS = [
    (d, s) for d in ("approve", "deny", "cancel") for s in ("once", "session", "persistent")
]


def field_values(name: str) -> st.SearchStrategy[Any]:
    """Values to try for one member: mostly near-valid ones of its kind, sometimes anything."""
    kinds: dict[str, st.SearchStrategy[Any]] = {
        "id": IDS,
        "stream": IDS,
        "request_id": st.sampled_from([REQUESTED["request"]["id"], "apr_other"]),
        "action_digest": st.sampled_from(
            [REQUESTED["request"]["action_digest"], "sha256:" + "0" * 64, "sha256:ABC"]
        ),
        "occurred_at": timestamps(),
        "decided_at": timestamps(),
        "sequence": st.integers(-2, 2**53 - 1)
        | st.floats(0.5, 3.5).filter(lambda f: not f.is_integer()),
        "decision": st.sampled_from(["approve", "deny", "cancel", "maybe"]),
        "scope": st.sampled_from(["once", "session", "persistent", "forever"]),
        "aais": st.sampled_from(["1.0", "1.1", ""]),
        "type": st.sampled_from(["approval.decided", "approval.resolved", "approval.requested"]),
        "extensions": EXTENSIONS,
        "actor": st.fixed_dictionaries(
            {"id": IDS, "type": st.sampled_from(["human", "policy", "robot"])},
            optional={
                "display_name": st.text(max_size=3) | st.just("x" * 201),
                "authenticated_by": st.text(max_size=3),
                "role": st.just("admin"),
            },
        ),
        "display_name": st.text(max_size=3) | st.just("y" * 200) | st.just("y" * 201),
        "authenticated_by": st.text(max_size=3),
    }
    return kinds.get(name, JSON) | JSON


@st.composite
def payloads(draw: st.DrawFn) -> Any:
    """A valid answer for an offered or unoffered pair, then up to three member edits."""
    envelope = copy.deepcopy(DECIDED)
    decision, scope = draw(st.sampled_from(CHOICES + ALL_PAIRS))
    envelope["decision"].update(decision=decision, scope=scope)
    if draw(st.booleans()):
        envelope.pop("stream")
    for _ in range(draw(st.integers(0, 3))):
        section = draw(st.sampled_from(["envelope", "decision", "actor"]))
        target: Any = envelope
        for key in {"envelope": [], "decision": ["decision"], "actor": ["decision", "actor"]}[
            section
        ]:
            target = target.get(key) if isinstance(target, dict) else None
        if not isinstance(target, dict):
            continue
        key = draw(st.sampled_from([*target, "extensions", "unknown"]))
        if draw(st.integers(0, 5)) == 0:
            target.pop(key, None)
        else:
            target[key] = draw(field_values(key))
    shape = draw(st.sampled_from(["envelope", "wrapper", "wrapper+extra", "anything"]))
    if shape == "wrapper":
        return {"aais": envelope}
    if shape == "wrapper+extra":
        return {"aais": envelope, draw(st.sampled_from(["note", "reason"])): "x"}
    if shape == "anything":
        return draw(JSON)
    return envelope


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payload=payloads())
def test_a_payload_validates_against_the_served_schema_exactly_when_accepted(
    payload: Any,
) -> None:
    valid = VALIDATOR.is_valid(payload)
    assert valid == accepted(payload), (valid, payload)
    if valid:
        envelope = payload if payload.get("aais") == "1.0" else payload["aais"]
        aais.validate(envelope)


@settings(max_examples=400, deadline=None)
@given(text=timestamps())
def test_the_timestamp_pattern_is_the_parser(text: str) -> None:
    pattern = served_schema()["$defs"]["decided"]["properties"]["occurred_at"]
    valid = jsonschema.Draft202012Validator(pattern).is_valid(text)
    try:
        parse_timestamp(text)
    except AAISValidationError:
        assert not valid, text
    else:
        assert valid, text


def test_requested_fixture_is_the_servers_view() -> None:
    assert ApprovalRequested.from_data(REQUESTED).to_json() == REQUESTED


def test_a_served_schema_changed_by_its_reader_leaves_the_next_one_unchanged() -> None:
    requested = ApprovalRequested.from_data(REQUESTED)
    first = request_to_interrupt(requested, interrupt_id=INTERRUPT_ID).response_schema
    expected = json.dumps(first, sort_keys=True)
    assert isinstance(first, dict)
    stack: list[Any] = [first]
    while stack:  # change every object and array of the first document in place
        item = stack.pop()
        children = list(item.values()) if isinstance(item, dict) else list(item)
        stack.extend(child for child in children if isinstance(child, (dict, list)))
        if isinstance(item, dict):
            item["changed"] = True
        else:
            item.append("changed")
    second = request_to_interrupt(requested, interrupt_id=INTERRUPT_ID).response_schema
    assert json.dumps(second, sort_keys=True) == expected

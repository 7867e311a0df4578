"""Bad input through decide(), add() and request(): each is refused and loses nothing.

Every row gives AAISValidationError at a named JSON pointer, or a non-recorded
outcome (``stale``/``invalid``). Afterwards the request is still pending, nothing
was published, no message echoes the secret-looking argument value, and a correct
decision still approves the request.
"""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

from aais_langgraph.authority import ApprovalAuthority, UnknownRequestError
from aais_langgraph.protocol import AAISValidationError, ApprovalRequested, action_digest
from hostile.report import hostile_input

from .support import SECRET, action, assert_spec_valid, decision, origin

FORGED = "sha256:" + "ab" * 32


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"a": value}
    return value


def with_decision(**changes: Any) -> Callable[[ApprovalRequested], Any]:
    return lambda requested: decision(requested, **changes)


def with_envelope(**changes: Any) -> Callable[[ApprovalRequested], Any]:
    def make(requested: ApprovalRequested) -> Any:
        return {**decision(requested), **changes}

    return make


def without(member: str) -> Callable[[ApprovalRequested], Any]:
    def make(requested: ApprovalRequested) -> Any:
        envelope = decision(requested)
        del envelope["decision"][member]
        return envelope

    return make


def as_text(edit: Callable[[str], str | bytes]) -> Callable[[ApprovalRequested], Any]:
    return lambda requested: edit(json.dumps(decision(requested)))


def duplicate_decision_id(text: str) -> str:
    return text.replace('"decision": {', '"decision": {"id": "dec_first", ', 1)


@dataclass(frozen=True)
class Bad:
    """One row: how to build the input, and the pointer or outcome it must give."""

    name: str
    make: Callable[[ApprovalRequested], Any]
    pointer: str | None = None
    outcome: str | None = None
    kwargs: Callable[[ApprovalRequested], dict[str, Any]] | None = None
    unknown: bool = False


DECIDE_ROWS = [
    # Not I-JSON.
    Bad(
        "nan_in_decision_extensions",
        with_decision(extensions={"example.org/x": float("nan")}),
        "/decision/extensions/example.org~1x",
    ),
    Bad(
        "infinity_in_envelope_extensions",
        with_envelope(extensions={"example.org/x": float("inf")}),
        "/extensions/example.org~1x",
    ),
    Bad(
        "integer_beyond_i_json_range",
        with_decision(extensions={"example.org/n": 2**53}),
        "/decision/extensions/example.org~1n",
    ),
    Bad("non_string_object_key", with_decision(extensions={1: SECRET}), "/decision/extensions"),
    Bad(
        "lone_surrogate_in_actor_name",
        with_decision(actor={"id": "u1", "type": "human", "display_name": "Al\ud800"}),
        "/decision/actor/display_name",
    ),
    Bad("duplicate_key_in_json_text", as_text(duplicate_decision_id), "/decision/id"),
    Bad(
        "nan_literal_in_json_text",
        as_text(lambda t: t.replace('"sequence": 0', '"sequence": NaN')),
        "/sequence",
    ),
    Bad(
        "overflowing_number_in_json_text",
        as_text(lambda t: t.replace('"sequence": 0', '"sequence": 1e400')),
        "/sequence",
    ),
    # Timestamps.
    Bad(
        "decided_at_without_offset",
        with_decision(decided_at="2026-08-30T18:01:00"),
        "/decision/decided_at",
    ),
    Bad("decided_at_is_a_secret", with_decision(decided_at=SECRET), "/decision/decided_at"),
    Bad(
        "decided_at_impossible_date",
        with_decision(decided_at="2026-02-30T18:01:00Z"),
        "/decision/decided_at",
    ),
    Bad(
        "decided_at_as_epoch_number",
        with_decision(decided_at=1_788_112_860),
        "/decision/decided_at",
    ),
    Bad(
        "occurred_at_with_space_separator",
        with_envelope(occurred_at="2026-08-30 18:01:00Z"),
        "/occurred_at",
    ),
    # Digests.
    Bad(
        "digest_in_uppercase_hex",
        with_decision(action_digest="sha256:" + "AB" * 32),
        "/decision/action_digest",
    ),
    Bad(
        "digest_without_algorithm",
        with_decision(action_digest="ab" * 32),
        "/decision/action_digest",
    ),
    Bad("forged_well_formed_digest", with_decision(action_digest=FORGED), outcome="stale"),
    Bad(
        "digest_of_another_action",
        with_decision(action_digest=action_digest(action("node --check other.js"))),
        outcome="stale",
    ),
    # Offered, never invented.
    Bad("unoffered_scope", with_decision(scope="persistent"), outcome="invalid"),
    Bad("unoffered_decision_cancel", with_decision(decision="cancel"), outcome="invalid"),
    Bad(
        "deny_with_session_scope",
        with_decision(decision="deny", scope="session"),
        "/decision/scope",
    ),
    Bad(
        "cancel_with_persistent_scope",
        with_decision(decision="cancel", scope="persistent"),
        "/decision/scope",
    ),
    # Unknown requests.
    Bad(
        "unknown_request_id",
        with_decision(request_id="apr_never_raised"),
        "/decision/request_id",
        unknown=True,
    ),
    Bad(
        "request_id_in_other_case",
        lambda r: decision(r, request_id=r.request.id.upper()),
        "/decision/request_id",
        unknown=True,
    ),
    # Ids.
    Bad(
        "request_id_with_nul",
        lambda r: decision(r, request_id=r.request.id + "\x00"),
        "/decision/request_id",
    ),
    Bad("decision_id_with_newline", with_decision(id="dec_1\n" + SECRET), "/decision/id"),
    Bad("decision_id_empty", with_decision(id=""), "/decision/id"),
    Bad("decision_id_too_long", with_decision(id="d" * 201), "/decision/id"),
    Bad("event_id_with_delete_char", with_envelope(id="evt_\x7f"), "/id"),
    # Wrong types and shapes.
    Bad("sequence_as_boolean", with_envelope(sequence=True), "/sequence"),
    Bad("sequence_as_float", with_envelope(sequence=1.0), "/sequence"),
    Bad("sequence_negative", with_envelope(sequence=-1), "/sequence"),
    Bad("decision_as_string", with_envelope(decision=SECRET), "/decision"),
    Bad("envelope_as_json_array", lambda r: "[]", ""),
    Bad("envelope_as_number", lambda r: 42, ""),
    Bad(
        "actor_type_is_a_secret",
        with_decision(actor={"id": "u1", "type": SECRET}),
        "/decision/actor/type",
    ),
    Bad("decision_kind_is_a_secret", with_decision(decision=SECRET), "/decision/decision"),
    Bad("other_protocol_version", with_envelope(aais="2.0"), "/aais"),
    Bad("requested_envelope_given_to_decide", lambda r: r.to_json(), "/type"),
    Bad("missing_actor", without("actor"), "/decision/actor"),
    Bad("unknown_decision_member", with_decision(comment=SECRET), "/decision/comment"),
    Bad("null_optional_member", with_decision(extensions=None), "/decision/extensions"),
    Bad(
        "extension_key_not_namespaced",
        with_decision(extensions={"plain": SECRET}),
        "/decision/extensions/plain",
    ),
    # Size and nesting.
    Bad(
        "oversize_json_text",
        lambda r: json.dumps(decision(r, extensions={"example.org/pad": "x" * 1_000_001})),
        "",
    ),
    Bad("oversize_mapping", with_decision(extensions={"example.org/pad": "x" * 1_000_001}), ""),
    Bad(
        "deep_nesting_in_json_text",
        lambda r: json.dumps(decision(r, extensions={"example.org/deep": nested(40)})),
        "",
    ),
    Bad(
        "deep_nesting_in_mapping",
        with_decision(extensions={"example.org/deep": nested(40)}),
        "/decision/extensions/example.org~1deep/" + "/".join(["a"] * 29),
    ),
    Bad("malformed_json_text", lambda r: '{"aais": "1.0",', ""),
    Bad("json_bytes_not_utf8", lambda r: b'{"aais": "\xff"}', ""),
    # Keyword arguments the channel supplies.
    Bad(
        "authenticated_actor_malformed",
        with_decision(),
        "/decision/actor/type",
        kwargs=lambda r: {"actor": {"id": "u1", "type": "robot"}},
    ),
    Bad(
        "current_action_not_an_object",
        with_decision(),
        "/current_action",
        kwargs=lambda r: {"current_action": [SECRET]},
    ),
    Bad(
        "current_action_with_nan_argument",
        with_decision(),
        "/current_action/arguments/ratio",
        kwargs=lambda r: {"current_action": action(arguments={"ratio": float("nan")})},
    ),
]


def bad_request_envelope(path: str, value: Any) -> Callable[[ApprovalRequested], Any]:
    """A new request envelope (with the secret in its arguments) with ``path`` set."""

    def make(requested: ApprovalRequested) -> Any:
        envelope = copy.deepcopy(requested.to_json())
        envelope["request"]["id"] = "apr_other"
        target = envelope
        *parents, last = path.split("/")
        for key in parents:
            target = target[int(key)] if isinstance(target, list) else target[key]
        if isinstance(target, list):
            target[int(last)] = value
        else:
            target[last] = value
        if path.startswith("request/action/"):
            # Keep the digest true where it can be taken, so the row tests what it names.
            with contextlib.suppress(AAISValidationError):
                envelope["request"]["action_digest"] = action_digest(envelope["request"]["action"])
        return envelope

    return make


CHOICES = "request/choices"
ADD_ROWS = [
    Bad(
        "forged_request_digest",
        bad_request_envelope("request/action_digest", FORGED),
        "/request/action_digest",
    ),
    Bad(
        "expiry_before_creation",
        bad_request_envelope("request/expires_at", "2026-08-30T17:00:00Z"),
        "/request/expires_at",
    ),
    Bad(
        "no_deny_or_cancel_choice",
        bad_request_envelope(CHOICES, [{"decision": "approve", "scope": "once", "label": "Ok"}]),
        "/request/choices",
    ),
    Bad(
        "repeated_choice",
        bad_request_envelope(
            CHOICES + "/1", {"decision": "approve", "scope": "once", "label": "Again"}
        ),
        "/request/choices/1",
    ),
    Bad(
        "session_choice_without_constraints",
        bad_request_envelope(
            CHOICES + "/1", {"decision": "approve", "scope": "session", "label": "S"}
        ),
        "/request/choices/1/scope_constraints",
    ),
    Bad(
        "nan_argument_beside_secret",
        bad_request_envelope("request/action/arguments/ratio", float("nan")),
        "/request/action/arguments/ratio",
    ),
    Bad(
        "status_already_resolved",
        bad_request_envelope("request/status", "resolved"),
        "/request/status",
    ),
    Bad(
        "request_id_with_control_character",
        bad_request_envelope("request/id", "apr_\x1b[2J"),
        "/request/id",
    ),
    Bad(
        "oversize_argument",
        bad_request_envelope("request/action/arguments/pad", "x" * 1_000_001),
        "",
    ),
    Bad("decided_envelope_given_to_add", lambda r: decision(r), "/type"),
]

REQUEST_ROWS = [
    Bad(
        "argument_integer_beyond_range",
        lambda r: {"action": action(arguments={"n": -(2**53)})},
        "/request/action/arguments/n",
    ),
    Bad(
        "session_id_with_space",
        lambda r: {"action": action(), "origin": origin("s 1")},
        "/request/origin/session_id",
    ),
    Bad(
        "non_positive_lifetime",
        lambda r: {"action": action(), "expires_in": timedelta(0)},
        "/request/expires_at",
    ),
    Bad("action_not_an_object", lambda r: {"action": [SECRET]}, "/request/action"),
    Bad("no_choices", lambda r: {"action": action(), "choices": []}, "/request/choices"),
]


@pytest.fixture
def requested(authority: ApprovalAuthority) -> ApprovalRequested:
    """The request every row attacks: pending, with a secret among its arguments."""
    return authority.request(
        action(arguments={"token": SECRET}),
        origin=origin(),
        expires_in=timedelta(minutes=10),
        request_id="apr_target",
    )


def assert_nothing_lost(
    authority: ApprovalAuthority, requested: ApprovalRequested, seq: int
) -> None:
    request_id = requested.request.id
    assert authority.get_resolution(request_id) is None
    assert request_id in {s.request_id for s in authority.ledger.list_pending()}
    assert authority.ledger.last_sequence() == seq, "a refused input published an event"
    assert authority.get_request("apr_other") is None
    resolved = authority.decide(decision(requested))
    assert resolved.resolution.outcome == "approved"
    assert authority.verify_audit().ok


def approved(authority: ApprovalAuthority, requested: ApprovalRequested) -> Callable[[], bool]:
    """For the hostile-input table (failed open): the attacked request got approved."""

    def observe() -> bool:
        recorded = authority.get_resolution(requested.request.id)
        return recorded is not None and recorded.approved

    return observe


def accepted(authority: ApprovalAuthority, seq: int) -> Callable[[], bool]:
    """For the hostile-input table (failed open): a bad request was stored."""
    return lambda: authority.ledger.last_sequence() != seq


def assert_no_secret(text: str) -> None:
    assert SECRET not in text
    assert "sk-live" not in text


def expect(row: Bad, call: Callable[[], Any]) -> None:
    if row.pointer is not None:
        error_type = UnknownRequestError if row.unknown else AAISValidationError
        with pytest.raises(error_type) as caught:
            call()
        assert caught.value.pointer == row.pointer
        assert_no_secret(str(caught.value))
        assert_no_secret(repr(caught.value))
    else:
        resolved = call()
        assert resolved.resolution.outcome == row.outcome
        assert_spec_valid(resolved.to_json())
        assert_no_secret(json.dumps(resolved.to_json()))


def test_table_has_at_least_forty_rows() -> None:
    assert len(DECIDE_ROWS) + len(ADD_ROWS) + len(REQUEST_ROWS) >= 40
    names = [row.name for row in DECIDE_ROWS + ADD_ROWS + REQUEST_ROWS]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("row", DECIDE_ROWS, ids=lambda row: row.name)
def test_bad_decision_is_refused_and_loses_nothing(
    authority: ApprovalAuthority, requested: ApprovalRequested, row: Bad
) -> None:
    seq = authority.ledger.last_sequence()
    kwargs = row.kwargs(requested) if row.kwargs else {}
    with hostile_input("library", approved(authority, requested)):
        expect(row, lambda: authority.decide(row.make(requested), **kwargs))
    assert_nothing_lost(authority, requested, seq)


@pytest.mark.parametrize("row", ADD_ROWS, ids=lambda row: row.name)
def test_bad_request_envelope_is_refused_and_loses_nothing(
    authority: ApprovalAuthority, requested: ApprovalRequested, row: Bad
) -> None:
    seq = authority.ledger.last_sequence()
    with hostile_input("library", accepted(authority, seq)):
        expect(row, lambda: authority.add(row.make(requested)))
    assert_nothing_lost(authority, requested, seq)


@pytest.mark.parametrize("row", REQUEST_ROWS, ids=lambda row: row.name)
def test_bad_request_arguments_are_refused_and_lose_nothing(
    authority: ApprovalAuthority, requested: ApprovalRequested, row: Bad
) -> None:
    seq = authority.ledger.last_sequence()
    kwargs = {"origin": origin(), **row.make(requested)}

    def bad() -> ApprovalRequested:
        return authority.request(kwargs.pop("action"), request_id="apr_other", **kwargs)

    with hostile_input("library", accepted(authority, seq)):
        expect(row, bad)
    assert_nothing_lost(authority, requested, seq)


def test_forged_digest_is_stale_then_the_true_digest_approves(
    authority: ApprovalAuthority, requested: ApprovalRequested
) -> None:
    for _ in range(3):
        stale = authority.decide(decision(requested, action_digest=FORGED))
        assert stale.resolution.outcome == "stale"
    assert authority.get_resolution(requested.request.id) is None
    assert authority.decide(decision(requested)).resolution.outcome == "approved"


def test_changed_current_action_is_stale_and_never_echoes_arguments(
    authority: ApprovalAuthority, requested: ApprovalRequested
) -> None:
    changed = action(arguments={"token": SECRET + "-rotated"})
    resolved = authority.decide(decision(requested), current_action=changed)
    assert resolved.resolution.outcome == "stale"
    assert_no_secret(json.dumps(resolved.to_json()))
    assert authority.get_resolution(requested.request.id) == resolved


def test_audit_of_refused_decisions_never_holds_argument_values(
    authority: ApprovalAuthority, requested: ApprovalRequested
) -> None:
    authority.decide(decision(requested, action_digest=FORGED))
    authority.decide(decision(requested, scope="persistent"))
    authority.decide(decision(requested))
    authority.decide(decision(requested, decision="deny"))
    for entry in authority.ledger.audit_entries():
        assert_no_secret(json.dumps(entry.payload))

"""What a Slack app channel posts: one button per offered choice, bound to the digest shown;
a button's value read strictly; arguments only when the channel shows them."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aais_langgraph.protocol import build_request
from aais_langgraph.webhooks import ButtonValue, request_message, resolved_message
from aais_langgraph.webhooks.slack_messages import MAX_BUTTON_VALUE

SECRET_VALUE = "s3cr3t-account-4242"
ORIGIN = {"harness": "tests", "session_id": "sess-1"}


def the_action(**extra: object) -> dict[str, object]:
    return {
        "kind": "payments.transfer",
        "name": "transfer",
        "summary": "Pay the supplier *now* <!channel>",
        "arguments": {"to": SECRET_VALUE, "amount": 100},
        **extra,
    }


CHOICES = [
    {"decision": "approve", "scope": "once", "label": "Approve once"},
    {
        "decision": "approve",
        "scope": "session",
        "label": "Approve transfers to this supplier for the session",
        "scope_constraints": {"name": "transfer", "arguments": {"to": SECRET_VALUE}},
    },
    {"decision": "deny", "scope": "once", "label": "Deny"},
    {"decision": "cancel", "scope": "once", "label": "Cancel"},
]


def requested(**extra: object) -> object:
    return build_request(the_action(**extra), origin=ORIGIN, risk="high", choices=CHOICES)


def test_one_button_per_offered_approve_or_deny_choice_bound_to_the_digest() -> None:
    envelope = requested()
    message = request_message(envelope, include_arguments=False)  # type: ignore[arg-type]
    [actions] = [block for block in message["blocks"] if block["type"] == "actions"]
    buttons = actions["elements"]

    assert [b["action_id"] for b in buttons] == [
        "aais_approve_once",
        "aais_approve_session",
        "aais_deny_once",
    ]
    request = envelope.request  # type: ignore[attr-defined]
    for element in buttons:
        value = ButtonValue.decode(element["value"])
        assert (value.request_id, value.action_digest) == (request.id, request.action_digest)
    # A session choice asks first, naming its scope (SPEC §9).
    assert "confirm" in buttons[1] and "session" in json.dumps(buttons[1]["confirm"])
    assert "confirm" not in buttons[0]


def test_arguments_show_only_when_the_channel_shows_them() -> None:
    envelope = requested()
    hidden = request_message(envelope, include_arguments=False)  # type: ignore[arg-type]
    shown = request_message(envelope, include_arguments=True)  # type: ignore[arg-type]
    # The button values carry ids and digests only, never a scope constraint's values.
    assert SECRET_VALUE not in json.dumps(hidden)
    assert SECRET_VALUE in json.dumps(shown)


def test_an_opaque_binding_is_shown_and_mrkdwn_is_escaped() -> None:
    envelope = requested(
        presentation={"redacted": True, "binding_hint": "credential for account 123"}
    )
    text = json.dumps(request_message(envelope, include_arguments=False))  # type: ignore[arg-type]
    assert "credential for account 123" in text
    assert "<!channel>" not in text and "&lt;!channel&gt;" in text


def test_the_resolved_message_has_no_buttons_and_names_who_decided() -> None:
    from aais_langgraph import ApprovalAuthority, build_decision
    from aais_langgraph.ledger import InMemoryLedger

    authority = ApprovalAuthority(InMemoryLedger())
    envelope = authority.request(the_action(), origin=ORIGIN)  # type: ignore[arg-type]
    decided = build_decision(envelope, decision="deny", actor={"id": "bob", "type": "human"})
    resolved = authority.decide(decided)
    message = resolved_message(envelope, resolved, decided_by="bob", include_arguments=False)
    assert not [block for block in message["blocks"] if block["type"] == "actions"]
    assert "Denied" in message["text"] and "bob" in message["text"]


@pytest.mark.parametrize(
    "value",
    [
        None,
        "",
        "not json",
        '{"r":"apr_1","d":"sha256:00","c":"approve"}',  # a member missing
        '{"r":"apr_1","d":"sha256:00","c":"approve","s":"once","x":1}',  # one too many
        '{"r":"apr_1","r":"apr_2","d":"sha256:00","c":"approve","s":"once"}',  # repeated key
        '{"r":1,"d":"sha256:00","c":"approve","s":"once"}',
        "x" * (MAX_BUTTON_VALUE + 1),
    ],
)
def test_a_button_value_not_of_this_app_is_refused_naming_the_field(value: object) -> None:
    with pytest.raises(ValueError, match=r"^/actions/0/value: ") as raised:
        ButtonValue.decode(value)
    assert "apr_" not in str(raised.value)


@given(st.text(max_size=300))
def test_any_text_is_read_or_refused_with_a_value_error(text: str) -> None:
    try:
        value = ButtonValue.decode(text)
    except ValueError as error:
        assert str(error).startswith("/actions/0/value: ")
    else:
        assert ButtonValue.decode(value.encode()) == value


@given(
    st.text(min_size=1, max_size=40),
    st.text(min_size=1, max_size=80),
    st.sampled_from(["approve", "deny"]),
    st.sampled_from(["once", "session"]),
)
def test_a_button_value_round_trips(
    request_id: str, digest: str, decision: str, scope: str
) -> None:
    value = ButtonValue(request_id, digest, decision, scope)
    assert ButtonValue.decode(value.encode()) == value

"""The ``[[slack]]`` tables and ``[slack_users]`` of the access-policy file: strict keys,
errors that name the key and never a value."""

from __future__ import annotations

from typing import Any

import pytest

from aais_langgraph.authority import AccessPolicy
from aais_langgraph.webhooks import SubscriptionPlan, slack_from_mapping

ENV = {"BOT": "xoxb-abc", "SIGNING": "shh-signing-secret"}


def channel(**extra: Any) -> dict[str, Any]:
    return {
        "name": "ops",
        "channel": "C0123",
        "token_env": "BOT",
        "signing_secret_env": "SIGNING",
        **extra,
    }


def test_a_channel_and_its_users_are_read() -> None:
    document = {
        "slack": [channel(risk=["high"], as_groups=["sre"], include_arguments=True, team="T0TEAM")],
        "slack_users": {"U0ALICE": {"user": "alice", "groups": ["sre"]}},
    }
    app = slack_from_mapping(document, environ=ENV)
    assert app is not None
    [ops] = app.channels
    assert (ops.channel, ops.token, ops.signing_secret) == ("C0123", "xoxb-abc", ENV["SIGNING"])
    assert ops.team == "T0TEAM"
    assert "xoxb" not in repr(ops) and "shh" not in repr(ops)
    alice = app.principal_of("U0ALICE")
    assert alice is not None and alice.id == "alice" and alice.groups == {"sre"}
    assert app.principal_of("U0NOBODY") is None
    [subscription] = app.subscriptions
    assert subscription.format == "slack_app"
    assert subscription.notices == {"approval.requested", "approval.resolved"}
    SubscriptionPlan(app.subscriptions)  # the delivery machinery takes it as it is
    # The policy itself reads the same file and passes the Slack tables over.
    AccessPolicy.from_mapping(document)


def test_a_file_without_slack_has_none() -> None:
    assert slack_from_mapping({}, environ=ENV) is None


@pytest.mark.parametrize(
    ("document", "key"),
    [
        ({"slack": {"name": "ops"}}, r"^slack: "),
        ({"slack": [channel(colour="red")]}, r"^slack\[0\]\.colour: not a setting"),
        ({"slack": [channel(token_env="UNSET")]}, r"^slack\[0\]\.token_env: the variable"),
        ({"slack": [channel(signing_secret_env="UNSET")]}, r"^slack\[0\]\.signing_secret_env: "),
        ({"slack": [channel(channel="")]}, r"^slack\[0\]\.channel: "),
        ({"slack": [channel(team=7)]}, r"^slack\[0\]\.team: "),
        ({"slack": [channel(risk=["urgent-ish"])]}, r"^slack\[0\]\.risk: "),
        ({"slack": [channel(include_arguments="yes")]}, r"^slack\[0\]\.include_arguments: "),
        ({"slack": [channel(max_attempts=0)]}, r"^slack\[0\]\.max_attempts: "),
        ({"slack": [channel(api_url="ftp://x")]}, r"^slack\[0\]: slack\.ops\.api_url: "),
        ({"slack": [channel(), channel()]}, r"^slack\[1\]\.name: another channel"),
        ({"slack": [channel()], "slack_users": {"U0A": "alice"}}, r"^slack_users\.<id>: "),
        (
            {"slack": [channel()], "slack_users": {"U0A": {"user": "a", "role": "x"}}},
            r"^slack_users\.<id>\.role: not a setting",
        ),
        ({"slack": [channel()], "slack_users": {"U0 A!": {"user": "a"}}}, r"^slack_users\.<id>: "),
        ({"slack_users": {"U0A": {"user": "a"}}}, r"^slack_users: needs"),
    ],
)
def test_a_bad_setting_is_named_and_no_value_is_echoed(document: dict[str, Any], key: str) -> None:
    with pytest.raises(ValueError, match=key) as raised:
        slack_from_mapping(document, environ=ENV)
    message = str(raised.value)
    for value in ("xoxb-abc", "shh-signing-secret", "red", "urgent-ish", "U0 A!"):
        assert value not in message

"""Answering from Slack: the ``[[slack]]`` channels and ``[slack_users]`` of the access-policy file.

A Slack app channel posts each approval request it may be told about as a Block Kit
message with a button per offered choice, and rewrites the message when the request
is resolved anywhere (:class:`~.worker.WebhookWorker` does both, as outbox
deliveries). People answer by clicking; the interaction endpoint
(``aais_agui.http.slack``) checks Slack's signature, maps the Slack user to a
principal through ``[slack_users]`` and records the answer on the one answer path::

    [[slack]]
    name = "ops-slack"                    # stable: it names the deliveries (and their ids)
    channel = "C0123456789"               # the Slack channel id the bot posts to
    token_env = "SLACK_BOT_TOKEN"         # the bot token (xoxb-...) in $VAR
    signing_secret_env = "SLACK_SIGNING_SECRET"   # the app's signing secret in $VAR
    team = "T0123ABCD"                    # only clicks from this workspace (default: any)
    kinds = ["process.exec"]              # action kinds (fnmatch; default: all)
    names = ["deploy*"]                   # action names (fnmatch; default: all)
    risk = ["high", "critical"]           # risk levels (default: all)
    groups = ["sre"]                      # only requests these groups may decide
    as_user = "slack-ops"                 # the principal it posts as: the authorizer's
    as_groups = ["sre"]                   # ``view`` decides what the channel is shown
    include_arguments = false             # show the action's arguments in the message
    api_url = "https://slack.com/api/"    # the Web API (default: Slack's)
    hooks_url = "https://hooks.slack.com/"   # where a click's reply may go (default: Slack's)
    max_attempts = 8                      # then the delivery is dead (retry it by hand)

    [slack_users]
    U0123ALICE = { user = "alice", groups = ["sre"] }   # Slack user id -> principal

A Slack user not in ``[slack_users]`` is refused and nothing is recorded.

The person who clicked is told the outcome in a short ephemeral reply posted to the
click's ``response_url`` (:meth:`SlackChannel.replies_to`: only a URL under
``hooks_url``, Slack's hooks host unless set, so no payload can make the server post
elsewhere).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..authority import Principal
from ..ledger.selection import ActionPattern
from ..protocol import Actor, id_for
from .policy_values import required_text, strings
from .subscriptions import WebhookSubscription

__all__ = ["SlackApp", "SlackChannel", "load_slack", "slack_from_mapping"]

SLACK_API = "https://slack.com/api/"
SLACK_HOOKS = "https://hooks.slack.com/"
"""Where Slack's ``response_url`` of an interaction points (its hooks host)."""
SLACK_NOTICES = frozenset({"approval.requested", "approval.resolved"})
"""What a channel is sent: the request (posted), its resolution (the message rewritten)."""
_KEYS = {
    "name",
    "channel",
    "token_env",
    "signing_secret_env",
    "team",
    "kinds",
    "names",
    "risk",
    "groups",
    "as_user",
    "as_groups",
    "include_arguments",
    "api_url",
    "hooks_url",
    "max_attempts",
}
_USER_KEYS = {"user", "groups"}
_RISKS = ("low", "medium", "high", "critical")
_MAX_SLACK_ID = 64
_MAX_URL = 2048


@dataclass(frozen=True)
class SlackChannel:
    """One Slack channel a bot posts approval requests to (see the module docs)."""

    name: str
    channel: str
    token: str = field(repr=False)
    signing_secret: str = field(repr=False)
    actions: ActionPattern = field(default_factory=ActionPattern)
    groups: frozenset[str] = frozenset()
    as_user: str | None = None
    as_groups: frozenset[str] = frozenset()
    include_arguments: bool = False
    api_url: str = SLACK_API
    max_attempts: int = 8
    team: str | None = None
    """The Slack workspace (team id) whose clicks are taken (None: any the app is in)."""
    hooks_url: str = SLACK_HOOKS
    """The prefix a click's ``response_url`` must have to be replied to (Slack's hooks host)."""

    def __post_init__(self) -> None:
        where = f"slack.{self.name}" if self.name else "slack"
        for key in ("name", "channel", "token", "signing_secret"):
            if not isinstance(getattr(self, key), str) or not getattr(self, key):
                raise ValueError(f"{where}.{key}: must be a non-empty string")
        if not self.api_url.startswith(("https://", "http://")):
            raise ValueError(f"{where}.api_url: must be an http or https URL")
        hooks = urlsplit(self.hooks_url)
        if hooks.scheme not in ("https", "http") or not hooks.netloc or hooks.query:
            raise ValueError(f"{where}.hooks_url: must be an http or https URL")
        if not self.hooks_url.endswith("/") or hooks.fragment:
            raise ValueError(f"{where}.hooks_url: must end with a slash")
        if self.max_attempts < 1:
            raise ValueError(f"{where}.max_attempts: must be at least 1")

    def replies_to(self, url: object) -> bool:
        """Whether a click's ``response_url`` may be replied to: a printable ASCII URL
        under :attr:`hooks_url`, on its scheme and host, with no ``..`` segment."""
        if not isinstance(url, str) or len(url) > _MAX_URL or not url.startswith(self.hooks_url):
            return False
        if not (url.isascii() and url.isprintable()) or any(c in url for c in " \\"):
            return False
        found, hooks = urlsplit(url), urlsplit(self.hooks_url)
        return (
            (found.scheme, found.netloc) == (hooks.scheme, hooks.netloc)
            and not found.fragment
            and ".." not in found.path.split("/")
            and "%2e" not in found.path.lower()
        )

    @property
    def subscription(self) -> WebhookSubscription:
        """The channel as the delivery machinery knows it: a subscription of format
        ``slack_app`` told about requests and resolutions, as its principal."""
        return WebhookSubscription(
            name=self.name,
            url=self.api_url,
            notices=SLACK_NOTICES,  # type: ignore[arg-type]  # both are delivery notices
            actions=self.actions,
            groups=self.groups,
            as_user=self.as_user or id_for(f"slack-{self.name}"),
            as_groups=self.as_groups,
            format="slack_app",
            include_arguments=self.include_arguments,
            max_attempts=self.max_attempts,
        )


@dataclass(frozen=True)
class SlackApp:
    """Every Slack channel of a deployment and who each Slack user is."""

    channels: tuple[SlackChannel, ...]
    users: Mapping[str, Principal] = field(default_factory=dict)

    def __post_init__(self) -> None:
        names = [channel.name for channel in self.channels]
        if len(set(names)) != len(names):
            raise ValueError("slack.name: two channels have the same name")
        if not self.channels:
            raise ValueError("slack: at least one channel is needed")

    def channel(self, name: str) -> SlackChannel | None:
        """The channel called ``name``, if configured."""
        return next((item for item in self.channels if item.name == name), None)

    def principal_of(self, slack_user: str) -> Principal | None:
        """Who the Slack user is (None: not in ``[slack_users]``, refused)."""
        return self.users.get(slack_user)

    @property
    def subscriptions(self) -> list[WebhookSubscription]:
        """The channels as delivery subscriptions (for the ledger's plan and the sender)."""
        return [item.subscription for item in self.channels]


def slack_from_mapping(
    document: Mapping[str, Any], *, environ: Mapping[str, str] | None = None
) -> SlackApp | None:
    """The ``[[slack]]`` channels and ``[slack_users]`` of a parsed access-policy document
    (None when it has no ``[[slack]]``); ValueError names the bad key, never a value."""
    tables = document.get("slack", [])
    if not isinstance(tables, list):
        raise ValueError("slack: must be an array of tables ([[slack]])")
    users = _users(document.get("slack_users", {}))
    if not tables:
        if users:
            raise ValueError("slack_users: needs at least one [[slack]] channel")
        return None
    env = os.environ if environ is None else environ
    channels: list[SlackChannel] = []
    for index, table in enumerate(tables):
        channel = _channel(table, f"slack[{index}]", env)
        if any(item.name == channel.name for item in channels):
            raise ValueError(f"slack[{index}].name: another channel has this name")
        channels.append(channel)
    return SlackApp(tuple(channels), users)


def load_slack(path: str | Path, *, environ: Mapping[str, str] | None = None) -> SlackApp | None:
    """The Slack channels of an access-policy file (None when it has no ``[[slack]]``);
    ValueError names the bad key, OSError a file that cannot be read."""
    from ..authority import read_policy_file

    return slack_from_mapping(read_policy_file(path), environ=environ)


def _channel(table: Any, where: str, env: Mapping[str, str]) -> SlackChannel:
    if not isinstance(table, Mapping):
        raise ValueError(f"{where}: must be a table")
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise ValueError(f"{where}.{unknown[0]}: not a setting of a Slack channel")
    name = required_text(table, "name", where)
    channel = required_text(table, "channel", where)
    token = _secret(table, "token_env", where, env)
    signing_secret = _secret(table, "signing_secret_env", where, env)
    risk = strings(table, "risk", where)
    if not risk <= set(_RISKS):
        raise ValueError(f"{where}.risk: each must be one of {list(_RISKS)}")
    as_user = table.get("as_user")
    if as_user is not None:
        as_user = id_for(required_text(table, "as_user", where))
    include = table.get("include_arguments", False)
    if not isinstance(include, bool):
        raise ValueError(f"{where}.include_arguments: must be true or false")
    attempts = table.get("max_attempts", 8)
    if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
        raise ValueError(f"{where}.max_attempts: must be an integer at least 1")
    api_url = required_text(table, "api_url", where) if "api_url" in table else SLACK_API
    hooks_url = required_text(table, "hooks_url", where) if "hooks_url" in table else SLACK_HOOKS
    team = required_text(table, "team", where) if "team" in table else None
    try:
        return SlackChannel(
            name=name,
            channel=channel,
            token=token,
            signing_secret=signing_secret,
            actions=ActionPattern(
                tuple(sorted(strings(table, "kinds", where))),
                tuple(sorted(strings(table, "names", where))),
                risk,
            ),
            groups=strings(table, "groups", where),
            as_user=as_user,
            as_groups=strings(table, "as_groups", where),
            include_arguments=include,
            api_url=api_url,
            hooks_url=hooks_url,
            max_attempts=attempts,
            team=team,
        )
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None


def _users(table: Any) -> dict[str, Principal]:
    if not isinstance(table, Mapping):
        raise ValueError("slack_users: must be a table of Slack user ids")
    found: dict[str, Principal] = {}
    for slack_user, entry in table.items():
        where = "slack_users.<id>"
        if not slack_user or len(slack_user) > _MAX_SLACK_ID or not slack_user.isalnum():
            raise ValueError(f"{where}: a Slack user id is letters and digits")
        if not isinstance(entry, Mapping):
            raise ValueError(f"{where}: must be a table with user and groups")
        unknown = sorted(set(entry) - _USER_KEYS)
        if unknown:
            raise ValueError(f"{where}.{unknown[0]}: not a setting of a Slack user")
        user = id_for(required_text(entry, "user", where))
        groups = strings(entry, "groups", where)
        actor = Actor(id=user, type="human", authenticated_by="slack")
        found[slack_user] = Principal(actor, groups=groups)
    return found


def _secret(table: Mapping[str, Any], key: str, where: str, env: Mapping[str, str]) -> str:
    variable = required_text(table, key, where)
    value = env.get(variable)
    if not value:
        raise ValueError(f"{where}.{key}: the variable is not set")
    return value

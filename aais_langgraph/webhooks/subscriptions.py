"""Webhook subscriptions: who is told about which approvals, read from the access-policy file.

The access policy's TOML file may hold ``[[webhooks]]`` tables beside its rules
(the policy itself ignores them)::

    [[webhooks]]
    name = "ops"                          # stable: it names the deliveries (and their ids)
    url = "https://ops.example/hooks/aais"
    secret_env = "OPS_WEBHOOK_SECRET"     # a Standard Webhooks secret (whsec_...) in $VAR
    notices = ["approval.requested", "approval.resolved", "approval.expiring"]
    kinds = ["process.exec"]              # action kinds (fnmatch; default: all)
    names = ["deploy*"]                   # action names (fnmatch; default: all)
    risk = ["high", "critical"]           # risk levels (default: all)
    groups = ["sre"]                      # only requests these groups may decide
    as_user = "ops-bot"                   # the principal it delivers as: the authorizer's
    as_groups = ["sre"]                   # ``view`` decides what it may be told
    coalesce = true                       # one pending notice per thread at a time
    expiring_before = 300                 # seconds before expiry for approval.expiring
    format = "aais"                       # or "slack" (incoming-webhook JSON)
    include_arguments = false             # slack: show the action's arguments
    inbox_url = "https://approvals.example/"   # slack, email: where the link points
    max_attempts = 8                      # then the delivery is dead (retry it by hand)

An email subscription (``format = "email"``, :mod:`.mail`) has no ``url`` and no
secret; it names its SMTP server and addresses instead::

    [[webhooks]]
    name = "mail"
    format = "email"
    to = ["sre-oncall@example.com"]
    from = "approvals@example.com"
    smtp_host = "smtp.example.com"
    smtp_port = 587                       # default 587
    starttls = true                       # default true
    username_env = "SMTP_USER"            # both or neither: log in with $SMTP_USER
    password_env = "SMTP_PASSWORD"        # and $SMTP_PASSWORD
    inbox_url = "https://approvals.example/"

Reminders (``approval.reminder``) and escalations (``approval.escalated``) come from the
access policy's rules (:mod:`aais_langgraph.ledger.follow_ups`): an escalation notice
goes to the subscriptions without ``groups`` and to those whose ``groups`` meet the
rule's ``escalate_to``. Requester notices go only to the subscription the policy's
``[requesters] notify_via`` names, to the requester's own address.

:class:`SubscriptionPlan` is the ledger's :class:`~aais_langgraph.ledger.deliveries.DeliveryPlan`
over a set of subscriptions: the cheap filters (notice, kind, name, risk) choose
which deliveries a write records; the authorizer's answers (``view``, ``groups``)
are asked when a delivery is sent, so a policy change applies to what still waits.
Given the access policy (``policy=``), it also records the follow-ups the policy's
rules ask for: reminders and the escalation with the request, the requester notice
with the resolution.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..authority import AccessPolicy, Principal
from ..ledger import StoredRequest, Work
from ..ledger.deliveries import SUBSCRIBED_NOTICES, DeliveryNotice, new_delivery
from ..ledger.follow_ups import new_escalation, new_reminder, new_requester_notice
from ..ledger.selection import ActionPattern, RowFacts
from ..protocol import AAISValidationError, Actor, id_for, parse_timestamp
from .mail import MailSettings
from .policy_values import flag, optional_text, required_text, strings

__all__ = [
    "SubscriptionPlan",
    "WebhookSubscription",
    "load_plan",
    "load_webhooks",
    "webhooks_from_mapping",
]

WebhookFormat = Literal["aais", "slack", "email", "slack_app"]
"""``slack_app``: a ``[[slack]]`` channel (:mod:`.slack_app`), made by it, not by a
``[[webhooks]]`` table."""
_FORMATS = ("aais", "slack", "email")
"""The formats a ``[[webhooks]]`` table may name."""
_RISKS = ("low", "medium", "high", "critical")
_KEYS = {
    "name",
    "url",
    "secret_env",
    "notices",
    "kinds",
    "names",
    "risk",
    "groups",
    "as_user",
    "as_groups",
    "coalesce",
    "expiring_before",
    "format",
    "include_arguments",
    "inbox_url",
    "max_attempts",
    "to",
    "from",
    "smtp_host",
    "smtp_port",
    "starttls",
    "username_env",
    "password_env",
}
_MAIL_KEYS = {"to", "from", "smtp_host", "smtp_port", "starttls", "username_env", "password_env"}


@dataclass(frozen=True)
class WebhookSubscription:
    """One receiver and what it is told (see the module docs for each setting).

    ``secret`` is the Standard Webhooks signing secret (``whsec_`` + base64); a Slack
    subscription may go without one (Slack does not verify signatures).
    """

    name: str
    url: str
    secret: str | None = field(default=None, repr=False)
    notices: frozenset[DeliveryNotice] = frozenset(SUBSCRIBED_NOTICES)
    actions: ActionPattern = field(default_factory=ActionPattern)
    groups: frozenset[str] = frozenset()
    as_user: str | None = None
    as_groups: frozenset[str] = frozenset()
    coalesce: bool = False
    expiring_before: float = 300.0
    format: WebhookFormat = "aais"
    include_arguments: bool = False
    inbox_url: str | None = None
    max_attempts: int = 8
    mail: MailSettings | None = None
    """Where an email subscription sends (``format = "email"``; its ``url`` only names it)."""

    def __post_init__(self) -> None:
        if not self.name or not self.url:
            raise ValueError("webhooks: a subscription needs a name and a url")
        if (self.format == "email") != (self.mail is not None):
            raise ValueError(f"webhooks.{self.name}.format: an email subscription needs mail")
        if self.format == "aais" and not self.secret:
            raise ValueError(f"webhooks.{self.name}.secret_env: an aais webhook must be signed")
        if self.max_attempts < 1:
            raise ValueError(f"webhooks.{self.name}.max_attempts: must be at least 1")

    @property
    def principal(self) -> Principal:
        """Who the subscription delivers as: what the authorizer lets them ``view`` is
        all they are told."""
        actor_id = self.as_user or id_for(f"webhook-{self.name}")
        return Principal(Actor(id=actor_id, type="human"), groups=self.as_groups)

    def wants(self, notice: DeliveryNotice, request: StoredRequest) -> bool:
        """Whether the notice passes the filters this subscription sets on the action."""
        if notice not in self.notices:
            return False
        facts = RowFacts.of(request.envelope, request.context)
        return self.actions.matches(facts.kind, facts.name, facts.risk)


class SubscriptionPlan:
    """The deliveries a new request or resolution records for ``subscriptions``, and the
    follow-ups ``policy``'s rules ask for (see the module docs).

    ValueError names a ``[requesters] notify_via`` that is no email subscription."""

    def __init__(
        self, subscriptions: Iterable[WebhookSubscription], *, policy: AccessPolicy | None = None
    ) -> None:
        self.subscriptions = {item.name: item for item in subscriptions}
        self.policy = policy
        via = None if policy is None else policy.requesters_notify_via
        if via is not None and policy is not None and policy.requesters_notify:
            found = self.subscriptions.get(via)
            if found is None or found.format != "email":
                raise ValueError("requesters.notify_via: must name an email subscription")

    @property
    def follows_up(self) -> bool:
        """Whether the plan records follow-ups (its policy reminds, escalates or notifies)."""
        return self.policy is not None and self.policy.follows_up

    def deliveries(
        self,
        notice: Literal["approval.requested", "approval.resolved"],
        request: StoredRequest,
        now: float,
    ) -> list[Work]:
        found = self._subscribed(notice, request, now)
        if self.policy is not None:
            found.extend(self._follow_ups(self.policy, notice, request, now))
        return found

    def _follow_ups(
        self,
        policy: AccessPolicy,
        notice: Literal["approval.requested", "approval.resolved"],
        request: StoredRequest,
        now: float,
    ) -> list[Work]:
        """The follow-ups the write records: the rule's reminders and escalation with the
        request (counted from its ``created_at``), the requester notice with the
        resolution (its runner skips an outcome the policy does not notify)."""
        if notice == "approval.resolved":
            facts = RowFacts.of(request.envelope, request.context)
            if not policy.requesters_notify or facts.requester is None:
                return []
            return [new_requester_notice(request.request_id, request.thread_id, now)]
        facts = RowFacts.of(request.envelope, request.context)
        rule = policy.rule_matching(facts.kind, facts.name, facts.risk)
        if rule.remind_after is None and not rule.escalate_to:
            return []
        created = _created_at(request, now)
        rows = [
            new_reminder(request.request_id, request.thread_id, number, due, created)
            for number, due in enumerate(rule.reminders_at(created), start=1)
        ]
        if rule.escalate_after is not None and rule.escalate_to:
            due = created + rule.escalate_after
            rows.append(new_escalation(request.request_id, request.thread_id, due, created))
        return rows

    def _subscribed(
        self,
        notice: Literal["approval.requested", "approval.resolved"],
        request: StoredRequest,
        now: float,
    ) -> list[Work]:
        found: list[Work] = []
        for item in self.subscriptions.values():
            if item.wants(notice, request):
                found.append(new_delivery(item.name, notice, request, now, coalesce=item.coalesce))
            if (
                notice == "approval.requested"
                and request.expires_at is not None
                and item.wants("approval.expiring", request)
            ):
                # Written with the request and due shortly before it expires; if the
                # request is resolved by then, the notice is skipped.
                soon = request.expires_at - item.expiring_before
                found.append(
                    new_delivery(item.name, "approval.expiring", request, now, not_before=soon)
                )
        return found


def load_plan(
    path: str | Path,
    *,
    environ: Mapping[str, str] | None = None,
    channels: Iterable[WebhookSubscription] = (),
) -> SubscriptionPlan | None:
    """The plan an access-policy file asks for: its ``[[webhooks]]``, ``channels`` (a
    :class:`~.slack_app.SlackApp`'s subscriptions, when the caller has its tokens) and
    the follow-ups its rules and ``[requesters]`` ask for (None: it asks for none of
    them); ValueError names the bad setting, OSError a file that cannot be read."""
    from ..authority import AccessPolicy, read_policy_file

    document = read_policy_file(path)
    subscriptions = [*webhooks_from_mapping(document, environ=environ), *channels]
    policy = AccessPolicy.from_mapping(document)
    if not subscriptions and not policy.follows_up:
        return None
    return SubscriptionPlan(subscriptions, policy=policy if policy.follows_up else None)


def _created_at(request: StoredRequest, now: float) -> float:
    """The request's ``created_at`` (the authority's clock) in epoch seconds (``now`` for a
    row whose envelope holds none: a plan must not raise)."""
    body = request.envelope.get("request")
    text = body.get("created_at") if isinstance(body, Mapping) else None
    try:
        return parse_timestamp(text).timestamp() if isinstance(text, str) else now
    except AAISValidationError:
        return now


def webhooks_from_mapping(
    document: Mapping[str, Any], *, environ: Mapping[str, str] | None = None
) -> list[WebhookSubscription]:
    """The ``[[webhooks]]`` of a parsed access-policy document; ValueError names the bad
    key (secrets come from the environment, ``environ`` by default ``os.environ``)."""
    tables = document.get("webhooks", [])
    if not isinstance(tables, list):
        raise ValueError("webhooks: must be an array of tables ([[webhooks]])")
    env = os.environ if environ is None else environ
    found: dict[str, WebhookSubscription] = {}
    for index, table in enumerate(tables):
        item = _subscription(table, f"webhooks[{index}]", env)
        if item.name in found:
            raise ValueError(f"webhooks[{index}].name: another subscription has this name")
        found[item.name] = item
    return list(found.values())


def load_webhooks(
    path: str | Path, *, environ: Mapping[str, str] | None = None
) -> list[WebhookSubscription]:
    """The webhook subscriptions of an access-policy file (none when it has no
    ``[[webhooks]]``); ValueError names the bad key, OSError a file that cannot be read."""
    from ..authority import read_policy_file

    return webhooks_from_mapping(read_policy_file(path), environ=environ)


def _subscription(table: Any, where: str, env: Mapping[str, str]) -> WebhookSubscription:
    if not isinstance(table, Mapping):
        raise ValueError(f"{where}: must be a table")
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise ValueError(f"{where}.{unknown[0]}: not a setting of a webhook subscription")
    name = required_text(table, "name", where)
    assert name is not None
    form = table.get("format", "aais")
    if form not in _FORMATS:
        raise ValueError(f"{where}.format: must be one of {list(_FORMATS)}")
    mail = _mail(table, where, env) if form == "email" else None
    if mail is None:
        extra = sorted(set(table) & _MAIL_KEYS)
        if extra:
            raise ValueError(f'{where}.{extra[0]}: only for format = "email"')
        url = required_text(table, "url", where)
        assert url is not None
        if not url.startswith(("https://", "http://")):
            raise ValueError(f"{where}.url: must be an http or https URL")
    else:
        if "url" in table:
            raise ValueError(f"{where}.url: an email subscription names smtp_host instead")
        url = f"smtp://{mail.host}:{mail.port}"
    secret = None
    secret_env = optional_text(table, "secret_env", where)
    if secret_env is not None:
        secret = env.get(secret_env)
        if not secret:
            raise ValueError(f"{where}.secret_env: the variable is not set")
    notices = strings(table, "notices", where) or frozenset(SUBSCRIBED_NOTICES)
    if not notices <= set(SUBSCRIBED_NOTICES):
        raise ValueError(f"{where}.notices: each must be one of {list(SUBSCRIBED_NOTICES)}")
    risk = strings(table, "risk", where)
    if not risk <= set(_RISKS):
        raise ValueError(f"{where}.risk: each must be one of {list(_RISKS)}")
    as_user = optional_text(table, "as_user", where)
    try:
        return WebhookSubscription(
            name=name,
            url=url,
            secret=secret,
            notices=notices,  # type: ignore[arg-type]  # checked against SUBSCRIBED_NOTICES
            actions=ActionPattern(
                tuple(sorted(strings(table, "kinds", where))),
                tuple(sorted(strings(table, "names", where))),
                risk,
            ),
            groups=strings(table, "groups", where),
            as_user=None if as_user is None else id_for(as_user),
            as_groups=strings(table, "as_groups", where),
            coalesce=flag(table, "coalesce", where),
            expiring_before=_seconds(table, "expiring_before", where, 300.0),
            format=form,
            include_arguments=flag(table, "include_arguments", where),
            inbox_url=optional_text(table, "inbox_url", where),
            max_attempts=int(_seconds(table, "max_attempts", where, 8)),
            mail=mail,
        )
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None


def _mail(table: Mapping[str, Any], where: str, env: Mapping[str, str]) -> MailSettings:
    """The SMTP settings of an email subscription; ValueError names the bad one."""
    to = table.get("to")
    if isinstance(to, str) or not isinstance(to, Sequence) or not to:
        raise ValueError(f"{where}.to: must be an array of email addresses")
    sender = required_text(table, "from", where)
    host = required_text(table, "smtp_host", where)
    port = table.get("smtp_port", 587)
    if not isinstance(port, int) or isinstance(port, bool):
        raise ValueError(f"{where}.smtp_port: must be a port number")
    secrets: dict[str, str | None] = {}
    for key in ("username_env", "password_env"):
        variable = optional_text(table, key, where)
        secrets[key] = None if variable is None else env.get(variable)
        if variable is not None and not secrets[key]:
            raise ValueError(f"{where}.{key}: the variable is not set")
    try:
        return MailSettings(
            to=tuple(str(item) for item in to),
            sender=str(sender),
            host=str(host),
            port=port,
            starttls=_starttls(table, where),
            username=secrets["username_env"],
            password=secrets["password_env"],
        )
    except ValueError as error:
        raise ValueError(f"{where}.{error}") from None


def _starttls(table: Mapping[str, Any], where: str) -> bool:
    value = table.get("starttls", True)
    if not isinstance(value, bool):
        raise ValueError(f"{where}.starttls: must be true or false")
    return value


def _seconds(table: Mapping[str, Any], key: str, where: str, default: float) -> float:
    value = table.get(key, default)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{where}.{key}: must be a number at least 0")
    return float(value)

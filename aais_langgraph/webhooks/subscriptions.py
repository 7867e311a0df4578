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
    inbox_url = "https://approvals.example/"   # slack: where the link points
    max_attempts = 8                      # then the delivery is dead (retry it by hand)

:class:`SubscriptionPlan` is the ledger's :class:`~aais_langgraph.ledger.deliveries.DeliveryPlan`
over a set of subscriptions: the cheap filters (notice, kind, name, risk) choose
which deliveries a write records; the authorizer's answers (``view``, ``groups``)
are asked when a delivery is sent, so a policy change applies to what still waits.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..authority import Principal
from ..ledger import StoredRequest
from ..ledger.deliveries import DELIVERY_NOTICES, Delivery, DeliveryNotice, new_delivery
from ..ledger.selection import ActionPattern, RowFacts
from ..protocol import Actor, id_for

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = [
    "SubscriptionPlan",
    "WebhookSubscription",
    "load_webhooks",
    "webhooks_from_mapping",
]

WebhookFormat = Literal["aais", "slack", "slack_app"]
"""``slack_app``: a ``[[slack]]`` channel (:mod:`.slack_app`), made by it, not by a
``[[webhooks]]`` table."""
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
}


@dataclass(frozen=True)
class WebhookSubscription:
    """One receiver and what it is told (see the module docs for each setting).

    ``secret`` is the Standard Webhooks signing secret (``whsec_`` + base64); a Slack
    subscription may go without one (Slack does not verify signatures).
    """

    name: str
    url: str
    secret: str | None = field(default=None, repr=False)
    notices: frozenset[DeliveryNotice] = frozenset(DELIVERY_NOTICES)
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

    def __post_init__(self) -> None:
        if not self.name or not self.url:
            raise ValueError("webhooks: a subscription needs a name and a url")
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
    """The deliveries a new request or resolution records for ``subscriptions``."""

    def __init__(self, subscriptions: Iterable[WebhookSubscription]) -> None:
        self.subscriptions = {item.name: item for item in subscriptions}

    def deliveries(
        self,
        notice: Literal["approval.requested", "approval.resolved"],
        request: StoredRequest,
        now: float,
    ) -> list[Delivery]:
        found = []
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
    with open(path, "rb") as handle:
        try:
            document = tomllib.load(handle)
        except tomllib.TOMLDecodeError as error:
            raise ValueError(f"{Path(path).name}: not TOML ({error})") from None
    return webhooks_from_mapping(document, environ=environ)


def _subscription(table: Any, where: str, env: Mapping[str, str]) -> WebhookSubscription:
    if not isinstance(table, Mapping):
        raise ValueError(f"{where}: must be a table")
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise ValueError(f"{where}.{unknown[0]}: not a setting of a webhook subscription")
    name = _text(table, "name", where, required=True)
    url = _text(table, "url", where, required=True)
    assert name is not None and url is not None
    if not url.startswith(("https://", "http://")):
        raise ValueError(f"{where}.url: must be an http or https URL")
    secret = None
    secret_env = _text(table, "secret_env", where)
    if secret_env is not None:
        secret = env.get(secret_env)
        if not secret:
            raise ValueError(f"{where}.secret_env: the variable is not set")
    notices = _strings(table, "notices", where) or frozenset(DELIVERY_NOTICES)
    if not notices <= set(DELIVERY_NOTICES):
        raise ValueError(f"{where}.notices: each must be one of {list(DELIVERY_NOTICES)}")
    risk = _strings(table, "risk", where)
    if not risk <= set(_RISKS):
        raise ValueError(f"{where}.risk: each must be one of {list(_RISKS)}")
    form = table.get("format", "aais")
    if form not in ("aais", "slack"):
        raise ValueError(f'{where}.format: must be "aais" or "slack"')
    as_user = _text(table, "as_user", where)
    try:
        return WebhookSubscription(
            name=name,
            url=url,
            secret=secret,
            notices=notices,  # type: ignore[arg-type]  # checked against DELIVERY_NOTICES
            actions=ActionPattern(
                tuple(sorted(_strings(table, "kinds", where))),
                tuple(sorted(_strings(table, "names", where))),
                risk,
            ),
            groups=_strings(table, "groups", where),
            as_user=None if as_user is None else id_for(as_user),
            as_groups=_strings(table, "as_groups", where),
            coalesce=_flag(table, "coalesce", where),
            expiring_before=_seconds(table, "expiring_before", where, 300.0),
            format=form,
            include_arguments=_flag(table, "include_arguments", where),
            inbox_url=_text(table, "inbox_url", where),
            max_attempts=int(_seconds(table, "max_attempts", where, 8)),
        )
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None


def _text(table: Mapping[str, Any], key: str, where: str, *, required: bool = False) -> str | None:
    value = table.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value:
        raise ValueError(f"{where}.{key}: must be a non-empty string")
    return value


def _strings(table: Mapping[str, Any], key: str, where: str) -> frozenset[str]:
    value = table.get(key, [])
    if (
        not isinstance(value, Sequence)
        or isinstance(value, str)
        or not all(isinstance(item, str) and item for item in value)
    ):
        raise ValueError(f"{where}.{key}: must be an array of non-empty strings")
    return frozenset(value)


def _flag(table: Mapping[str, Any], key: str, where: str) -> bool:
    value = table.get(key, False)
    if not isinstance(value, bool):
        raise ValueError(f"{where}.{key}: must be true or false")
    return value


def _seconds(table: Mapping[str, Any], key: str, where: str, default: float) -> float:
    value = table.get(key, default)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{where}.{key}: must be a number at least 0")
    return float(value)

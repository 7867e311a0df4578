"""A team's access policy, read from a TOML file: who may see and decide which approvals.

The file names groups (as the identity provider's tokens carry them) and actor
ids, never code::

    administrators = ["ops-admin"]        # actor ids that may do everything
    administrator_groups = ["admins"]
    viewer_groups = ["audit"]             # may see every request and thread
    default_approvers = ["*"]             # who decides what no rule matches ("*": anyone)

    [[approvers]]                         # the first rule matching a request applies
    kinds = ["process.exec"]              # action kinds (fnmatch patterns; default: all)
    names = ["deploy*"]                   # action names (fnmatch; default: all)
    risk = ["high", "critical"]           # risk levels (default: all)
    groups = ["sre"]                      # who may approve, deny and cancel them
    users = []                            # actor ids besides the groups
    quorum = 1                            # distinct approvals needed (2: two people)
    remind_after = 600                    # remind the approvers after 600 s pending,
    remind_every = 1800                   # then every 1800 s,
    remind_times = 3                      # at most 3 reminders in all
    escalate_after = 3600                 # after 3600 s pending, escalate:
    escalate_to = ["managers"]            # these groups may then view and decide it too

    [separation_of_duties]
    from_risk = "high"                    # the requester may not approve their own
                                          # requests at or above this risk

    [requesters]
    view_own = true                       # requesters see their own runs' requests
    cancel_own = true                     # and may withdraw (cancel) them
    notify = ["denied", "expired", "cancelled"]   # tell the requester these outcomes
    notify_via = "mail"                   # by this email subscription ([[webhooks]])

    [requesters.addresses]                # where each requester's notices go
    alice = "alice@example.com"

    [grants]
    revoke_groups = ["sre"]               # besides those who may decide the grant's request

    [reconcile]
    groups = ["sre"]                      # default: those who may decide the request

    [threads]
    start_groups = ["*"]                  # who may start a thread (default: anyone)
    post_groups = ["support"]             # who may post to anyone's thread (take it over)
    view_groups = ["support-leads"]       # who may read anyone's thread

    [[services]]                          # machine identities (actors of type "policy")
    users = ["prometheus"]
    scopes = ["metrics"]                  # "metrics": scrape /metrics; "read": view all

A thread belongs to who started it: they post to it and read it; so do the
``post_groups`` (who may also read it), the ``view_groups`` and ``viewer_groups``
(read only), and anyone who posted to it once (read only, after they lose the right
to post). Others who may view one of its requests follow that request only: never
the thread's messages or state. A run acts for whoever posted the message it runs
(its requests are theirs: separation of duties, limits and grants apply to them).

A service may only do what its scopes name, whatever its groups; one no
``[[services]]`` entry names may do nothing. Administrators may do everything.

A rule's ``groups`` and ``users`` may view, approve, deny and cancel the requests
it matches. With ``quorum = n`` the action runs only after n distinct members
approved it: the gate asks n times, one request each (SPEC §10), nobody approves
twice, and the first denial ends it. Everything not allowed is refused with a
reason that names the rule, never a value from the request.

A rule's reminders, escalation and the requester notices are durable follow-ups
(:mod:`aais_langgraph.ledger.follow_ups`), recorded with the request or its
resolution by a ledger opened with the subscriptions' plan and run by the service's
``follow_ups`` job. Once a request's escalation ran, the rule's ``escalate_to``
groups may view, decide and cancel it as its approvers may; never before.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, ClassVar

from ..ledger.selection import EVERY_ROW, ActionPattern, PendingSelection
from ..protocol import Request, id_for
from .authorization import ALLOWED, Permission, Principal, Resource, Verb, is_service

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = [
    "REQUESTER_NOTICES",
    "AccessPolicy",
    "ApproverRule",
    "load_access_policy",
    "read_policy_file",
]

RISK_ORDER = ("low", "medium", "high", "critical")
ANYONE = "*"
SCOPES: dict[str, frozenset[str]] = {
    "metrics": frozenset({"metrics"}),
    "read": frozenset({"view"}),
}
"""What each service scope lets a machine identity do (the verbs it is asked about)."""
REQUESTER_NOTICES = ("denied", "expired", "cancelled")
"""The outcomes a requester may be told of (``[requesters] notify``)."""
MOST_REMINDERS = 20
"""The most reminders one rule may ask for (``remind_times``)."""


@dataclass(frozen=True)
class ApproverRule:
    """Who may decide the requests whose action kind, name and risk match."""

    groups: frozenset[str]
    users: frozenset[str] = frozenset()
    kinds: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    risk: frozenset[str] = frozenset()
    quorum: int = 1
    index: int = -1
    """Its position in the file (``-1``: the default rule)."""
    remind_after: float | None = None
    """Seconds after the request's creation of the first reminder (None: no reminders)."""
    remind_every: float | None = None
    """Seconds between reminders (None: ``remind_after``)."""
    remind_times: int = 1
    """How many reminders at most."""
    escalate_after: float | None = None
    """Seconds after the request's creation of its escalation (None: none)."""
    escalate_to: frozenset[str] = frozenset()
    """The groups that may view and decide the request once it escalated."""

    def reminders_at(self, created_at: float) -> list[float]:
        """When the reminders of a request created at ``created_at`` are due (epoch s)."""
        if self.remind_after is None:
            return []
        every = self.remind_every if self.remind_every is not None else self.remind_after
        first = created_at + self.remind_after
        return [first + number * every for number in range(self.remind_times)]

    def admits_escalated(self, principal: Principal) -> bool:
        """Whether ``principal`` is in a group the rule escalates to."""
        return not self.escalate_to.isdisjoint(principal.groups)

    def matches(self, kind: str, name: str, risk: str) -> bool:
        return (
            (not self.kinds or any(fnmatchcase(kind, k) for k in self.kinds))
            and (not self.names or any(fnmatchcase(name, n) for n in self.names))
            and (not self.risk or risk in self.risk)
        )

    def admits(self, principal: Principal) -> bool:
        return (
            ANYONE in self.groups
            or principal.id in self.users
            or not self.groups.isdisjoint(principal.groups)
        )

    def describe(self) -> str:
        return "the default approvers" if self.index < 0 else f"approver rule {self.index + 1}"


@dataclass(frozen=True)
class AccessPolicy:
    """An :class:`~.authorization.Authorizer` over a team's rules (see the module docs).

    Build it with :func:`load_access_policy` (a file) or :meth:`from_mapping` (the same
    document as data).
    """

    approvers: tuple[ApproverRule, ...] = ()
    default_approvers: ApproverRule = field(
        default_factory=lambda: ApproverRule(frozenset({ANYONE}))
    )
    administrators: frozenset[str] = frozenset()
    administrator_groups: frozenset[str] = frozenset()
    viewer_groups: frozenset[str] = frozenset()
    separation_from_risk: str | None = None
    requesters_view_own: bool = True
    requesters_cancel_own: bool = True
    revoke_groups: frozenset[str] = frozenset()
    reconcile_groups: frozenset[str] | None = None
    thread_start_groups: frozenset[str] = frozenset({ANYONE})
    thread_post_groups: frozenset[str] = frozenset()
    thread_view_groups: frozenset[str] = frozenset()
    service_verbs: frozenset[tuple[str, str]] = frozenset()
    """(service actor id, verb) for each verb its scopes allow (:data:`SCOPES`)."""
    requesters_notify: frozenset[str] = frozenset()
    """The outcomes requesters are told of (:data:`REQUESTER_NOTICES`)."""
    requesters_notify_via: str | None = None
    """The email subscription (a ``[[webhooks]]`` name) requester notices go by."""
    requester_addresses: tuple[tuple[str, str], ...] = ()
    """(actor id, email address) of each requester notices may reach."""
    deterministic: ClassVar[bool] = True
    """Its answers depend only on the principal and the resource (it never changes)."""

    # -- loading -----------------------------------------------------------------------

    @classmethod
    def from_mapping(cls, document: Mapping[str, Any]) -> AccessPolicy:
        """The policy a parsed TOML document describes; ValueError names the bad key."""
        known = {
            "administrators",
            "administrator_groups",
            "viewer_groups",
            "default_approvers",
            "approvers",
            "separation_of_duties",
            "requesters",
            "grants",
            "reconcile",
            "threads",
            "services",
            "webhooks",  # read by aais_langgraph.webhooks.load_webhooks, not by the policy
            "slack",  # read by aais_langgraph.webhooks.load_slack, not by the policy
            "slack_users",
        }
        unknown = sorted(set(document) - known)
        if unknown:
            raise ValueError(f"{unknown[0]}: not a setting of the access policy")
        rules = document.get("approvers", [])
        if not isinstance(rules, list):
            raise ValueError("approvers: must be an array of tables ([[approvers]])")
        separation = _table(document, "separation_of_duties", {"from_risk"})
        from_risk = separation.get("from_risk")
        if from_risk is not None and from_risk not in RISK_ORDER:
            raise ValueError(f"separation_of_duties.from_risk: must be one of {list(RISK_ORDER)}")
        requesters = _table(
            document, "requesters", {"view_own", "cancel_own", "notify", "notify_via", "addresses"}
        )
        notify = _names(requesters.get("notify", []), "requesters.notify")
        if not notify <= set(REQUESTER_NOTICES):
            raise ValueError(f"requesters.notify: each must be one of {list(REQUESTER_NOTICES)}")
        via = requesters.get("notify_via")
        if via is not None and (not isinstance(via, str) or not via):
            raise ValueError("requesters.notify_via: must name a [[webhooks]] subscription")
        if notify and via is None:
            raise ValueError("requesters.notify_via: requesters.notify needs a subscription")
        grants = _table(document, "grants", {"revoke_groups"})
        reconcile = _table(document, "reconcile", {"groups"})
        threads = _table(document, "threads", {"start_groups", "post_groups", "view_groups"})
        return cls(
            approvers=tuple(_rule(rule, index) for index, rule in enumerate(rules)),
            default_approvers=ApproverRule(
                _names(document.get("default_approvers", [ANYONE]), "default_approvers")
            ),
            administrators=_users(document.get("administrators", []), "administrators"),
            administrator_groups=_names(
                document.get("administrator_groups", []), "administrator_groups"
            ),
            viewer_groups=_names(document.get("viewer_groups", []), "viewer_groups"),
            separation_from_risk=from_risk,
            requesters_view_own=_flag(requesters, "view_own", "requesters"),
            requesters_cancel_own=_flag(requesters, "cancel_own", "requesters"),
            revoke_groups=_names(grants.get("revoke_groups", []), "grants.revoke_groups"),
            reconcile_groups=(
                _names(reconcile["groups"], "reconcile.groups") if "groups" in reconcile else None
            ),
            thread_start_groups=_names(
                threads.get("start_groups", [ANYONE]), "threads.start_groups"
            ),
            thread_post_groups=_names(threads.get("post_groups", []), "threads.post_groups"),
            thread_view_groups=_names(threads.get("view_groups", []), "threads.view_groups"),
            service_verbs=_services(document.get("services", [])),
            requesters_notify=notify,
            requesters_notify_via=via,
            requester_addresses=_addresses(requesters.get("addresses", {})),
        )

    # -- the question ------------------------------------------------------------------

    def authorize(self, principal: Principal, verb: Verb, resource: Resource) -> Permission:
        if self._administers(principal):
            return ALLOWED
        if is_service(principal):
            if (principal.id, verb) in self.service_verbs:
                return ALLOWED
            return Permission(False, f"no scope of this service allows {verb} ([[services]])")
        if verb == "metrics":
            return ALLOWED
        if verb in ("start", "post") or (verb == "view" and _is_thread(resource)):
            return self._thread(principal, verb, resource)
        if verb == "view":
            return self._view(principal, resource)
        request = resource.request
        if request is None:
            return Permission(False, f"nothing to {verb}: the request is not known")
        rule = self.rule_for(request)
        deciders = rule.admits(principal) or (
            resource.escalated and rule.admits_escalated(principal)
        )
        own = resource.requester is not None and resource.requester == principal.id
        if verb == "decide":
            if not deciders:
                return Permission(False, f"only {_who(rule)} may decide this ({rule.describe()})")
            if resource.decision == "approve" and principal.id in resource.approved_by:
                return Permission(
                    False,
                    "you approved an earlier approval of this action; "
                    "its quorum needs another approver",
                )
            if own and resource.decision == "approve" and self._separated(request):
                return Permission(
                    False,
                    "separation of duties: you started this run, so someone else must "
                    f"approve requests of {request.risk.level} risk",
                )
            return ALLOWED
        if verb == "cancel":
            if deciders or (own and self.requesters_cancel_own):
                return ALLOWED
            return Permission(False, f"only {_who(rule)} or its requester may cancel this")
        if verb == "revoke":
            if deciders or not self.revoke_groups.isdisjoint(principal.groups):
                return ALLOWED
            return Permission(False, "only those who may decide its request may revoke this grant")
        # reconcile
        groups = self.reconcile_groups
        allowed = deciders if groups is None else not groups.isdisjoint(principal.groups)
        if allowed:
            return ALLOWED
        return Permission(False, "you may not reconcile this outcome (reconcile.groups)")

    def group_may_decide(self, group: str, resource: Resource) -> Permission:
        """Whether members of ``group`` decide ``resource`` by the rules
        (:class:`~.authorization.GroupDecisions`): the administrator groups decide
        everything; otherwise the first matching rule's groups (or ``"*"``) decide."""
        if group in self.administrator_groups:
            return ALLOWED
        request = resource.request
        if request is None:
            return Permission(False, "nothing to decide: the request is not known")
        rule = self.rule_for(request)
        if ANYONE in rule.groups or group in rule.groups:
            return ALLOWED
        if resource.escalated and group in rule.escalate_to:
            return ALLOWED
        return Permission(False, f"only {_who(rule)} may decide this ({rule.describe()})")

    def _administers(self, principal: Principal) -> bool:
        return principal.id in self.administrators or not self.administrator_groups.isdisjoint(
            principal.groups
        )

    def _thread(self, principal: Principal, verb: Verb, resource: Resource) -> Permission:
        """Who may start, post to and read a thread (see the module docs)."""
        groups = principal.groups
        if verb == "start":
            if ANYONE in self.thread_start_groups or not groups.isdisjoint(
                self.thread_start_groups
            ):
                return ALLOWED
            return Permission(False, "you may not start a thread (threads.start_groups)")
        own = resource.owner is not None and resource.owner == principal.id
        takes_over = not groups.isdisjoint(self.thread_post_groups)
        if verb == "post":
            if own or takes_over:
                return ALLOWED
            return Permission(
                False, "only who started this thread may post to it (threads.post_groups)"
            )
        if (
            own
            or takes_over
            or principal.id in resource.participants
            or (self.requesters_view_own and principal.id in resource.requesters)
            or not groups.isdisjoint(self.thread_view_groups)
            or not groups.isdisjoint(self.viewer_groups)
        ):
            return ALLOWED
        return Permission(False, "you may not see this thread")

    def rule_for(self, request: Request) -> ApproverRule:
        """The first approver rule matching ``request``, else the default approvers."""
        return self._rule(request.action.kind, request.action.name, request.risk.level)

    def escalates(self, request: Request) -> bool:
        """Whether the rule of ``request`` escalates it (:class:`~.authorization.Escalations`)."""
        return bool(self.rule_for(request).escalate_to)

    def address_of(self, requester: str) -> str | None:
        """The email address ``[requesters.addresses]`` gives ``requester`` (None: none)."""
        return dict(self.requester_addresses).get(requester)

    def quorum(self, kind: str, name: str, risk: str) -> int:
        """How many distinct approvals the matching rule asks for (:class:`QuorumRule`)."""
        return self._rule(kind, name, risk).quorum

    def rule_matching(self, kind: str, name: str, risk: str) -> ApproverRule:
        """The first approver rule matching an action's kind, name and risk level, else
        the default approvers (what a stored row's facts select)."""
        return self._rule(kind, name, risk)

    @property
    def escalates_anything(self) -> bool:
        """Whether any approver rule escalates (:class:`~.authorization.Escalations`)."""
        return any(rule.escalate_to for rule in self.approvers)

    @property
    def follows_up(self) -> bool:
        """Whether any rule reminds or escalates, or requesters are notified."""
        return bool(self.requesters_notify) or any(
            rule.remind_after is not None or rule.escalate_to for rule in self.approvers
        )

    def _rule(self, kind: str, name: str, risk: str) -> ApproverRule:
        for rule in self.approvers:
            if rule.matches(kind, name, risk):
                return rule
        return self.default_approvers

    def view_selection(self, principal: Principal) -> PendingSelection:
        """The pending rows that may hold what ``principal`` may view
        (:class:`~.authorization.ViewSelector`): those of the rules admitting them (a
        superset: an earlier rule may match first) and their own requests."""
        if is_service(principal) and not self._administers(principal):
            if (principal.id, "view") in self.service_verbs:
                return EVERY_ROW
            return PendingSelection(actions=(), requester=None)
        if (
            self._administers(principal)
            or not self.viewer_groups.isdisjoint(principal.groups)
            or self.default_approvers.admits(principal)  # what no rule matches: anything
        ):
            return EVERY_ROW
        return PendingSelection(
            actions=tuple(
                ActionPattern(rule.kinds, rule.names, rule.risk)
                for rule in self.approvers
                if rule.admits(principal) or rule.admits_escalated(principal)
            ),
            requester=principal.id if self.requesters_view_own else None,
        )

    def _view(self, principal: Principal, resource: Resource) -> Permission:
        if not self.viewer_groups.isdisjoint(principal.groups):
            return ALLOWED
        request = resource.request
        if request is not None:
            rule = self.rule_for(request)
            if rule.admits(principal) or (resource.escalated and rule.admits_escalated(principal)):
                return ALLOWED
            if self.requesters_view_own and resource.requester == principal.id:
                return ALLOWED
            return Permission(False, "you may not see this request")
        if resource.grant_id is not None:
            return Permission(False, "you may not see this grant")
        return Permission(False, "you may not see this")

    def _separated(self, request: Request) -> bool:
        threshold = self.separation_from_risk
        if threshold is None:
            return False
        return RISK_ORDER.index(request.risk.level) >= RISK_ORDER.index(threshold)


def load_access_policy(path: str | Path) -> AccessPolicy:
    """Read an access policy file (TOML, see :mod:`.access_policy`); ValueError names the
    bad key, OSError a file that cannot be read."""
    return AccessPolicy.from_mapping(read_policy_file(path))


def read_policy_file(path: str | Path) -> dict[str, Any]:
    """The parsed TOML document of an access-policy file, whose tables the policy, the
    webhook subscriptions and the Slack channels each read; ValueError for a file that
    is not TOML, OSError for one that cannot be read."""
    with open(path, "rb") as handle:
        try:
            document: dict[str, Any] = tomllib.load(handle)
        except tomllib.TOMLDecodeError as error:
            raise ValueError(f"{Path(path).name}: not TOML ({error})") from None
    return document


# -- parsing helpers -------------------------------------------------------------------


def _table(document: Mapping[str, Any], name: str, keys: set[str]) -> Mapping[str, Any]:
    table = document.get(name, {})
    if not isinstance(table, Mapping):
        raise ValueError(f"{name}: must be a table")
    unknown = sorted(set(table) - keys)
    if unknown:
        raise ValueError(f"{name}.{unknown[0]}: not a setting of the access policy")
    return table


def _names(value: Any, where: str) -> frozenset[str]:
    if not isinstance(value, Sequence) or isinstance(value, str):
        raise ValueError(f"{where}: must be an array of strings")
    if not all(isinstance(item, str) and item for item in value):
        raise ValueError(f"{where}: must be an array of non-empty strings")
    return frozenset(value)


def _users(value: Any, where: str) -> frozenset[str]:
    """Actor ids as recorded: a name with characters AAIS ids do not allow (an identity
    provider's ``auth0|alice``) in its :func:`~aais_langgraph.protocol.id_for` form, as
    the JWT login records it."""
    return frozenset(id_for(name) for name in _names(value, where))


def _is_thread(resource: Resource) -> bool:
    return resource.request is None and resource.thread_id is not None


def _services(value: Any) -> frozenset[tuple[str, str]]:
    """``[[services]]``: (actor id, verb) for each verb a service's scopes allow."""
    if not isinstance(value, list):
        raise ValueError("services: must be an array of tables ([[services]])")
    found: set[tuple[str, str]] = set()
    for index, entry in enumerate(value):
        where = f"services[{index}]"
        if not isinstance(entry, Mapping):
            raise ValueError(f"{where}: must be a table")
        unknown = sorted(set(entry) - {"users", "scopes"})
        if unknown:
            raise ValueError(f"{where}.{unknown[0]}: not a setting of a service")
        users = _users(entry.get("users", []), f"{where}.users")
        scopes = _names(entry.get("scopes", []), f"{where}.scopes")
        if not users:
            raise ValueError(f"{where}.users: names no service")
        if not scopes <= set(SCOPES):
            raise ValueError(f"{where}.scopes: each must be one of {sorted(SCOPES)}")
        found.update((user, verb) for user in users for scope in scopes for verb in SCOPES[scope])
    return frozenset(found)


def _flag(table: Mapping[str, Any], key: str, where: str) -> bool:
    value = table.get(key, True)
    if not isinstance(value, bool):
        raise ValueError(f"{where}.{key}: must be true or false")
    return value


def _rule(rule: Any, index: int) -> ApproverRule:
    where = f"approvers[{index}]"
    if not isinstance(rule, Mapping):
        raise ValueError(f"{where}: must be a table")
    unknown = sorted(set(rule) - _RULE_KEYS)
    if unknown:
        raise ValueError(f"{where}.{unknown[0]}: not a setting of an approver rule")
    risk = _names(rule.get("risk", []), f"{where}.risk")
    if not risk <= set(RISK_ORDER):
        raise ValueError(f"{where}.risk: each must be one of {list(RISK_ORDER)}")
    groups = _names(rule.get("groups", []), f"{where}.groups")
    users = _users(rule.get("users", []), f"{where}.users")
    if not groups and not users:
        raise ValueError(f"{where}: names no groups and no users, so nobody could decide")
    quorum = rule.get("quorum", 1)
    if not isinstance(quorum, int) or isinstance(quorum, bool) or not 1 <= quorum <= 10:
        raise ValueError(f"{where}.quorum: must be an integer from 1 to 10")
    remind_after = _seconds(rule, "remind_after", where)
    remind_every = _seconds(rule, "remind_every", where)
    times = rule.get("remind_times", 1)
    if not isinstance(times, int) or isinstance(times, bool) or not 1 <= times <= MOST_REMINDERS:
        raise ValueError(f"{where}.remind_times: must be an integer from 1 to {MOST_REMINDERS}")
    if remind_after is None and ("remind_every" in rule or "remind_times" in rule):
        raise ValueError(f"{where}.remind_after: remind_every and remind_times need it")
    escalate_after = _seconds(rule, "escalate_after", where)
    escalate_to = _names(rule.get("escalate_to", []), f"{where}.escalate_to")
    if (escalate_after is None) != (not escalate_to):
        raise ValueError(f"{where}.escalate_to: escalate_after and escalate_to go together")
    return ApproverRule(
        groups=groups,
        users=users,
        kinds=tuple(sorted(_names(rule.get("kinds", []), f"{where}.kinds"))),
        names=tuple(sorted(_names(rule.get("names", []), f"{where}.names"))),
        risk=risk,
        quorum=quorum,
        index=index,
        remind_after=remind_after,
        remind_every=remind_every,
        remind_times=times,
        escalate_after=escalate_after,
        escalate_to=escalate_to,
    )


_RULE_KEYS = {
    "kinds",
    "names",
    "risk",
    "groups",
    "users",
    "quorum",
    "remind_after",
    "remind_every",
    "remind_times",
    "escalate_after",
    "escalate_to",
}

_LONGEST = 366 * 24 * 3600.0
"""The longest follow-up delay a rule may set (a year and a day, in seconds)."""


def _seconds(rule: Mapping[str, Any], key: str, where: str) -> float | None:
    """A positive finite number of seconds (None: not set)."""
    if key not in rule:
        return None
    value = rule[key]
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 < value <= _LONGEST:
        raise ValueError(f"{where}.{key}: must be a number of seconds above 0, at most a year")
    return float(value)


def _addresses(value: Any) -> tuple[tuple[str, str], ...]:
    """``[requesters.addresses]``: actor id (as recorded) -> email address."""
    if not isinstance(value, Mapping):
        raise ValueError("requesters.addresses: must be a table")
    found = []
    for user, address in sorted(value.items()):
        if (
            not isinstance(address, str)
            or "@" not in address
            or any(c in address for c in "\r\n,;<>")
        ):
            raise ValueError(f"requesters.addresses.{user}: must be an email address")
        found.append((id_for(user), address))
    return tuple(found)


def _who(rule: ApproverRule) -> str:
    if ANYONE in rule.groups:
        return "authenticated users"
    names = sorted(rule.groups)
    if names:
        return "members of " + ", ".join(names)
    return "the named approvers"

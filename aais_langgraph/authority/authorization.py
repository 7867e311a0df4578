"""Who may do what to a request, a grant or a thread: one question, asked everywhere.

AAIS leaves authorization to the binding (security.md, "Out of scope"): the
authority only knows *who* answered, from the authenticated channel. This module
adds *whether they may*. Every access is one question, ``authorize(principal,
verb, resource)``, asked by the authority itself (decisions, cancels,
revocations, reconciles) and by the listings and event streams (views), so no
router has its own rules.

- :class:`Principal` is the authenticated person: their AAIS actor, the groups
  the channel vouches for (a JWT's ``groups`` claim), and whether they
  administer the deployment (the CLI's OS user does).
- :class:`Resource` is what they act on: a request (its action, risk, origin and
  requester, the person its run acts for), a grant, a thread (who started it and
  who posted to it), or the deployment itself (its metrics).
- An :class:`Authorizer` answers with a :class:`Permission`; a refusal carries
  the reason shown to the user (never an argument value).

:class:`AllowAuthenticated` (the default) lets every authenticated principal do
everything, as before; :class:`~.authorization_rules.RuleAuthorizer` reads a
team's policy file; :class:`~.authorization_cedar.CedarAuthorizer` asks Cedar.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from typing_extensions import TypeIs

from ..ledger.selection import PendingSelection
from ..protocol import Actor, Request
from ..protocol.extensions import QUORUM_EXTENSION, REQUESTER_EXTENSION
from ..protocol.refusals import FORBIDDEN, Refusal

__all__ = [
    "ADMINISTRATOR",
    "FORBIDDEN",
    "THREAD_VERBS",
    "VERBS",
    "AllowAuthenticated",
    "Authorizer",
    "Escalations",
    "ForbiddenError",
    "GroupDecisions",
    "Permission",
    "Principal",
    "QuorumRule",
    "Resource",
    "Verb",
    "ViewSelector",
    "approved_by_of",
    "as_principal",
    "checked_principal",
    "is_deterministic",
    "is_service",
    "requester_of",
]

Verb = Literal["view", "decide", "cancel", "revoke", "reconcile", "start", "post", "metrics"]
"""``view``, ``decide``, ``cancel``, ``revoke`` and ``reconcile`` a request (``revoke``: a
grant); ``start``, ``post`` to (continue) and ``view`` a thread; read the ``metrics``."""
VERBS: tuple[Verb, ...] = (
    "view",
    "decide",
    "cancel",
    "revoke",
    "reconcile",
    "start",
    "post",
    "metrics",
)
THREAD_VERBS: tuple[Verb, ...] = ("start", "post", "view")
"""The verbs asked about a thread (:class:`Resource` with ``thread_id``)."""


@dataclass(frozen=True)
class Principal:
    """An authenticated person or service: their actor, groups, and administrator flag."""

    actor: Actor
    groups: frozenset[str] = frozenset()
    administrator: bool = False

    @property
    def id(self) -> str:
        return self.actor.id


ADMINISTRATOR = Principal(
    Actor(id="aais-langgraph.administrator", type="human", display_name="Administrator"),
    administrator=True,
)
"""In-process code and the CLI (an OS user with access to the ledger) act as this."""


def requester_of(request: Request) -> str | None:
    """Who the run that raised ``request`` acts for (its requester extension), if known."""
    value = (request.extensions or {}).get(REQUESTER_EXTENSION)
    found = value.get("id") if isinstance(value, Mapping) else None
    return found if isinstance(found, str) else None


def approved_by_of(request: Request) -> frozenset[str]:
    """Who approved the earlier approvals of the quorum ``request`` belongs to (if any)."""
    value = (request.extensions or {}).get(QUORUM_EXTENSION)
    found = value.get("approved_by") if isinstance(value, Mapping) else None
    if not isinstance(found, list):
        return frozenset()
    return frozenset(item for item in found if isinstance(item, str))


def as_principal(actor: Principal | Actor | Mapping[str, Any]) -> Principal:
    """``actor`` as a principal (an actor alone has no groups and administers nothing)."""
    if isinstance(actor, Principal):
        return actor
    return Principal(Actor.from_data(actor, pointer="/actor"))


def checked_principal(actor: Principal | Actor | Mapping[str, Any] | None) -> Principal | None:
    """The principal whose access is checked, or None for a caller that is trusted.

    Every :class:`Principal` is checked, whatever its actor's type: an authenticated
    channel always hands one over, so a service's token (a ``policy`` actor: a metrics
    scraper, a bot) is asked about like a person. Trusted are in-process callers only:
    no actor at all (code holding the graph acts as the operator), or a bare ``policy``
    actor naming the runtime's own housekeeping (the expiry sweep, the orphan sweep).
    """
    if actor is None:
        return None
    if isinstance(actor, Principal):
        return actor
    principal = as_principal(actor)
    return principal if principal.actor.type == "human" else None


def is_service(principal: Principal) -> bool:
    """Whether ``principal`` is a machine identity (a ``policy`` actor), not a person."""
    return principal.actor.type != "human"


@dataclass(frozen=True)
class Resource:
    """What a principal acts on. ``request`` and ``requester`` for a request (the requester
    is who its run acts for); ``thread_id`` alone for a thread (with who started it, who
    posted to it and the requesters of its requests; no ``owner`` for a thread nobody
    started yet); ``grant_id`` with the request that created the grant; nothing at all
    for the deployment (``metrics``). ``decision`` is the kind a ``decide`` gives
    (``approve`` or ``deny``)."""

    request: Request | None = None
    requester: str | None = None
    thread_id: str | None = None
    grant_id: str | None = None
    decision: str | None = None
    requesters: frozenset[str] = field(default_factory=frozenset)
    """For a thread: every requester of its requests and everyone who posted to it."""
    owner: str | None = None
    """For a thread: who started it (None: nobody yet, a ``start``)."""
    participants: frozenset[str] = field(default_factory=frozenset)
    """For a thread: who started it and everyone who posted to it since."""
    approved_by: frozenset[str] = field(default_factory=frozenset)
    """For one approval of several (a quorum): who approved the earlier ones. None of
    them may approve this one: the approvals must come from distinct people."""
    escalated: bool = False
    """For a request: its escalation ran (a durable fact of the ledger, its escalation
    row ``done``, its audit entry vouched for and due:
    :meth:`~.vouch.VouchedRecords.escalation`), so the groups its rule escalates to may
    view and decide it too."""
    escalated_to: frozenset[str] = field(default_factory=frozenset)
    """For a request that escalated: the groups the policy's rule escalates it to (never
    what its audit entry names); empty when it did not escalate."""


@dataclass(frozen=True)
class Permission:
    """An authorizer's answer; ``reason`` says why not (shown to the user, value-free)."""

    allowed: bool
    reason: str = ""

    def __bool__(self) -> bool:
        return self.allowed


ALLOWED = Permission(True)


class ForbiddenError(PermissionError, Refusal):
    """The authenticated principal may not do this; nothing was recorded.

    ``code`` is ``aais.forbidden`` (HTTP 403, a WebSocket or stdio error frame with that
    code, an AG-UI ``RUN_ERROR``); the request stays pending for someone who may.
    ``reason`` is shown to the user and never holds a value from the request.
    """

    code = FORBIDDEN
    pointer = ""

    def __init__(self, verb: Verb, reason: str) -> None:
        self.verb = verb
        self.reason = reason or f"you may not {verb} this"
        super().__init__(self.reason)


@runtime_checkable
class QuorumRule(Protocol):
    """An authorizer that may ask for several distinct approvers (optional)."""

    def quorum(self, kind: str, name: str, risk: str) -> int:
        """How many distinct approvals an action of this kind, name and risk level needs."""
        ...


@runtime_checkable
class ViewSelector(Protocol):
    """An authorizer that can say, per principal, which pending requests may hold what they
    may view (optional): listings for them then read only those rows. The selection must
    be a superset of what :meth:`Authorizer.authorize` lets them ``view`` (every row
    when unsure); the exact check still runs on each row read."""

    def view_selection(self, principal: Principal) -> PendingSelection:
        """The pending rows that may hold a request ``principal`` may view."""
        ...


@runtime_checkable
class GroupDecisions(Protocol):
    """An authorizer that can say whether its policy lets a group, as such, decide a
    request (optional): whether a member of ``group`` who is nobody in particular (not
    its requester, no earlier approval of its quorum) may approve it. A webhook
    subscription for the requests some groups decide asks this."""

    def group_may_decide(self, group: str, resource: Resource) -> Permission:
        """Whether the policy lets members of ``group`` decide ``resource``."""
        ...


@runtime_checkable
class Escalations(Protocol):
    """An authorizer whose policy escalates some requests to other groups (optional): for
    those, the access object reads whether the escalation ran (:attr:`Resource.escalated`)
    before asking. One may also say ``escalates_anything = False`` (an attribute or a
    property) when it escalates no request at all: open streams then do not look for
    escalations (:meth:`aais_langgraph.threads.EventFilter.aescalated`)."""

    def escalates(self, request: Request) -> bool:
        """Whether an escalation of ``request`` changes who may view and decide it."""
        ...


@runtime_checkable
class Authorizer(Protocol):
    """Decides whether ``principal`` may ``verb`` ``resource``; must not raise for a refusal.

    An authorizer whose answers depend on nothing but the principal's id and groups and
    the resource (no clock, no lookups, no state that changes) may say so with a class
    attribute ``deterministic = True``: listings then remember its ``view`` answers per
    principal and request, instead of asking again on every listing.
    """

    def authorize(self, principal: Principal, verb: Verb, resource: Resource) -> Permission: ...


_PROTOCOL_METHODS: dict[type[Any], tuple[str, ...]] = {}


def _offers(authorizer: object, protocol: type[Any]) -> bool:
    """``isinstance(authorizer, protocol)`` for the optional protocols above, whose members
    are all methods: whether ``authorizer`` has each of them. Asked on every request and
    answer; the protocol machinery's own check works out the members each time."""
    methods = _PROTOCOL_METHODS.get(protocol)
    if methods is None:
        methods = tuple(
            name
            for name, member in vars(protocol).items()
            if callable(member) and not name.startswith("_")
        )
        _PROTOCOL_METHODS[protocol] = methods
    return all(getattr(authorizer, name, None) is not None for name in methods)


def is_quorum_rule(authorizer: object) -> TypeIs[QuorumRule]:
    """Whether ``authorizer`` is a :class:`QuorumRule`."""
    return _offers(authorizer, QuorumRule)


def is_view_selector(authorizer: object) -> TypeIs[ViewSelector]:
    """Whether ``authorizer`` is a :class:`ViewSelector`."""
    return _offers(authorizer, ViewSelector)


def is_group_decisions(authorizer: object) -> TypeIs[GroupDecisions]:
    """Whether ``authorizer`` is a :class:`GroupDecisions`."""
    return _offers(authorizer, GroupDecisions)


def is_escalations(authorizer: object) -> TypeIs[Escalations]:
    """Whether ``authorizer`` is an :class:`Escalations`."""
    return _offers(authorizer, Escalations)


SERVICE_DEFAULT_VERBS: frozenset[Verb] = frozenset({"view", "metrics"})
"""What a service may do where no access policy names its scopes: read, never act."""


class AllowAuthenticated:
    """Every authenticated person may do everything (a single team that trusts itself; the
    default, and what an authorizer falls back to for administrators). A service (a
    ``policy`` actor: a scraper's or a bot's token) may only read: view and ``metrics``."""

    def authorize(self, principal: Principal, verb: Verb, resource: Resource) -> Permission:
        if is_service(principal) and verb not in SERVICE_DEFAULT_VERBS:
            return Permission(False, f"a service may not {verb}; name its scopes in a policy")
        return ALLOWED

    def group_may_decide(self, group: str, resource: Resource) -> Permission:
        """Every group's members are people, and every person may decide."""
        return ALLOWED


def is_deterministic(authorizer: Authorizer) -> bool:
    """Whether ``authorizer`` declares its answers depend only on principal and resource."""
    return getattr(authorizer, "deterministic", False) is True

"""An authorizer that asks Cedar (``cedarpy``): policies a security team already writes.

Each question becomes one Cedar request:

- principal ``User::"<actor id>"`` for a person, a member of ``Group::"<name>"``
  for each of its groups and with the attribute ``groups`` (their names, a set);
  ``Service::"<actor id>"`` for a machine identity (a ``policy`` actor: a scraper's
  or a bot's token), in no group whatever its token says (``groups`` empty), so
  only policies that name it let it do anything;
- action ``Action::"view"``, ``"decide"``, ``"cancel"``, ``"revoke"``,
  ``"reconcile"``, ``"start"``, ``"post"`` or ``"metrics"``;
- resource ``Request::"<request id>"`` with the attributes ``kind``, ``name``,
  ``risk`` (``"low"`` … ``"critical"``), ``risk_rank`` (0 … 3), ``session``,
  ``harness``, ``requester`` (``""`` when unknown), ``argument_keys`` (the set
  of the action's argument names; never their values), ``escalated`` and
  ``escalated_to`` (whether its escalation ran, and the groups its rule names: see
  below); a thread is
  ``Thread::"<id>"`` with ``owner`` (who started it; ``""`` before anyone did:
  a ``start``), ``participants`` (who started it or posted to it) and
  ``requesters``; a grant is ``Grant::"<id>"`` carrying its request's
  attributes; the deployment (``metrics``) is ``Deployment::"aais"``;
- context ``decision`` (``"approve"``, ``"deny"`` or ``""``), ``own`` (whether
  the principal is the requester, or for a thread who started it) and
  ``already_approved`` (whether they gave an earlier approval of the same
  quorum; forbid it to require distinct approvers).

"Which groups decide this request?" (a webhook subscription's ``groups``) is asked
with the group itself as the principal, ``Group::"<name>"`` (``principal in
Group::"sre"`` holds for it), with ``own`` and ``already_approved`` false.

A thread is yours to post to and read; let others in with policies, e.g.::

    permit (principal, action in [Action::"start"], resource);
    permit (principal, action in [Action::"post", Action::"view"], resource is Thread)
    when { context.own };
    permit (principal in Group::"support", action == Action::"view", resource is Thread);

For example, SREs approve high-risk shell commands, nobody approves their own::

    permit (principal in Group::"sre", action == Action::"decide", resource)
    when { resource.kind == "process.exec" && resource.risk_rank >= 2 };

    forbid (principal, action == Action::"decide", resource)
    when { context.own && context.decision == "approve" };

Escalation: the reminders and escalations of a request are scheduled by the approver
rules of the ledger's plan (an :class:`~.access_policy.AccessPolicy` with
``escalate_after`` and ``escalate_to``, given to ``SubscriptionPlan(policy=...)``), and
run by the ``follow_ups`` job whatever the authorizer. Once a request's escalation
ran (its outbox row ``done`` and vouched for by its ``follow_up`` audit entry, as the
access object reads it), ``resource.escalated`` is true and ``resource.escalated_to``
holds the groups the plan's rule escalates it to (never the entry's); before, they
are ``false`` and empty. The ledger is read
for them only when a policy mentions either attribute. Grant the escalated groups,
e.g. every member of any group the request escalated to::

    permit (principal, action in [Action::"view", Action::"decide"], resource is Request)
    when { resource.escalated_to.containsAny(principal.groups) };

or one group by name: ``principal in Group::"managers"`` with
``resource.escalated_to.contains("managers")``.

Cedar denies by default; a refusal's reason names the policies that decided
it (their ids), never a value. A ``forbid`` policy that fails to evaluate (an
attribute the resource lacks) refuses the access, even where Cedar, which skips
such a policy, would allow it; guard policies with ``resource is Request`` (or
``has``) to keep them to the resources they are written for.
"""

from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any, ClassVar

import cedarpy

from ..protocol import Request
from .authorization import ALLOWED, Permission, Principal, Resource, Verb, is_service

__all__ = ["CedarAuthorizer"]

RISK_RANK = {"low": 0, "medium": 1, "high": 2, "critical": 3}


class CedarAuthorizer:
    """An :class:`~.authorization.Authorizer` over a Cedar policy set (text or a file)."""

    deterministic: ClassVar[bool] = True
    """Its answers depend only on the principal, the resource and the fixed policy set."""

    def __init__(self, policies: str | None = None, *, path: str | Path | None = None) -> None:
        if (policies is None) == (path is None):
            raise ValueError("policies, path: give exactly one")
        text = policies if policies is not None else Path(path).read_text(encoding="utf-8")  # type: ignore[arg-type]
        try:
            self._policies = cedarpy.PolicySet.from_str(text)
            parsed = json.loads(cedarpy.policies_to_json_str(text))
        except ValueError as error:
            raise ValueError(f"policies: Cedar cannot parse them ({error})") from None
        self._principals: OrderedDict[tuple[str, frozenset[str]], cedarpy.Entities] = OrderedDict()
        self._lock = threading.Lock()
        self._forbids = frozenset(
            policy_id
            for policy_id, policy in (parsed.get("staticPolicies") or {}).items()
            if policy.get("effect") == "forbid"
        )
        reads = json.dumps(parsed)
        self._reads_escalations = '"escalated_to"' in reads or '"escalated"' in reads

    def escalates(self, request: Request) -> bool:
        """Whether the access object should read ``request``'s escalation from the ledger
        (:class:`~.authorization.Escalations`): when a policy mentions ``escalated`` or
        ``escalated_to``, for every request (which requests escalate is the plan's)."""
        return self._reads_escalations

    @property
    def escalates_anything(self) -> bool:
        """Whether any policy mentions ``escalated`` or ``escalated_to``."""
        return self._reads_escalations

    def authorize(self, principal: Principal, verb: Verb, resource: Resource) -> Permission:
        owner = resource.requester if resource.request is not None else resource.owner
        return self._ask(
            {"type": _principal_type(principal), "id": principal.id},
            self._principal_entities(principal),
            verb,
            resource,
            own=owner is not None and owner == principal.id,
            already_approved=principal.id in resource.approved_by,
        )

    def group_may_decide(self, group: str, resource: Resource) -> Permission:
        """Whether a policy lets ``Group::"<group>"`` itself ``decide`` the resource
        (:class:`~.authorization.GroupDecisions`): the group is the principal (``principal
        in Group::"sre"`` holds for it), ``own`` and ``already_approved`` are false. A
        policy that permits only a named user, or only ``principal is User``, grants no
        group."""
        uid = {"type": "Group", "id": group}
        return self._ask(uid, self._group_entities(group), "decide", resource)

    def _ask(
        self,
        principal: dict[str, str],
        known: cedarpy.Entities,
        verb: Verb,
        resource: Resource,
        *,
        own: bool = False,
        already_approved: bool = False,
    ) -> Permission:
        """One Cedar request: ``principal`` (its entities parsed in ``known``) ``verb``
        ``resource``."""
        target, attrs = _resource(resource)
        # The principal's entities are parsed once (per id and groups) and the resource's
        # are added to them: Cedar parses only what changes per question.
        delta = json.dumps([{"uid": target, "attrs": attrs, "parents": []}])
        entities = known.with_added_json_str(delta)
        request = {
            "principal": principal,
            "action": {"type": "Action", "id": verb},
            "resource": target,
            "context": {
                "decision": resource.decision or "",
                "own": own,
                "already_approved": already_approved,
            },
        }
        result = cedarpy.is_authorized(request, self._policies, entities)
        if any(_names(error) & self._forbids for error in result.diagnostics.errors):
            # Cedar skips a policy that fails to evaluate: a ``forbid`` that errors would
            # let through what it was written to stop. It refuses instead. (A ``permit``
            # that errors, such as one about requests asked about a thread, grants
            # nothing, as in Cedar.)
            return Permission(False, "a Cedar forbid policy failed to evaluate; refused")
        if result.decision == cedarpy.Decision.Allow:
            return ALLOWED
        if list(result.diagnostics.errors):
            return Permission(False, "the Cedar policies failed to evaluate; refused")
        reasons = sorted(str(reason) for reason in result.diagnostics.reasons)
        if reasons:
            return Permission(False, "refused by Cedar policy " + ", ".join(reasons))
        return Permission(False, f"no Cedar policy permits {verb} here")

    def _group_entities(self, group: str) -> cedarpy.Entities:
        """The parsed entity of ``Group::"<group>"`` (kept with the principals')."""
        key: tuple[str, frozenset[str]] = (f"Group:{group}", frozenset())
        with self._lock:
            found = self._principals.get(key)
            if found is not None:
                self._principals.move_to_end(key)
                return found
        document = [
            {"uid": {"type": "Group", "id": group}, "attrs": {"groups": [group]}, "parents": []}
        ]
        return self._keep(key, cedarpy.Entities.from_json_str(json.dumps(document)))

    def _keep(self, key: tuple[str, frozenset[str]], parsed: cedarpy.Entities) -> cedarpy.Entities:
        with self._lock:
            self._principals[key] = parsed
            while len(self._principals) > _PRINCIPALS:
                self._principals.popitem(last=False)
        return parsed

    def _principal_entities(self, principal: Principal) -> cedarpy.Entities:
        """The parsed entities of ``principal``: a ``User`` in one ``Group`` per group."""
        key = (f"{_principal_type(principal)}:{principal.id}", principal.groups)
        with self._lock:
            found = self._principals.get(key)
            if found is not None:
                self._principals.move_to_end(key)
                return found
        # A service is named by its id, never reached through a group: a token's groups
        # make no machine an approver (policies name ``Service::"<id>"`` for what it may do).
        groups = [] if is_service(principal) else sorted(principal.groups)
        document = [
            {
                "uid": {"type": _principal_type(principal), "id": principal.id},
                "attrs": {"groups": groups},
                "parents": [{"type": "Group", "id": name} for name in groups],
            },
            *(
                {"uid": {"type": "Group", "id": name}, "attrs": {}, "parents": []}
                for name in groups
            ),
        ]
        return self._keep(key, cedarpy.Entities.from_json_str(json.dumps(document)))


def _principal_type(principal: Principal) -> str:
    return "Service" if is_service(principal) else "User"


_PRINCIPALS = 1024
"""Principals whose parsed entities are kept (the least recently asked about forgotten)."""

_POLICY_NAME = re.compile(r"policy `([^`]*)`")


def _names(error: str) -> frozenset[str]:
    """The policy ids a Cedar evaluation error names."""
    return frozenset(_POLICY_NAME.findall(str(error)))


def _resource(resource: Resource) -> tuple[dict[str, str], dict[str, Any]]:
    request = resource.request
    if request is not None:
        attrs = {
            "kind": request.action.kind,
            "name": request.action.name,
            "risk": request.risk.level,
            "risk_rank": RISK_RANK[request.risk.level],
            "session": request.origin.session_id,
            "harness": request.origin.harness,
            "requester": resource.requester or "",
            "argument_keys": sorted((request.action.arguments or {}).keys()),
            "escalated": resource.escalated,
            "escalated_to": sorted(resource.escalated_to),
        }
        if resource.grant_id is not None:
            return {"type": "Grant", "id": resource.grant_id}, attrs
        return {"type": "Request", "id": request.id}, attrs
    if resource.thread_id is not None:
        return {"type": "Thread", "id": resource.thread_id}, {
            "owner": resource.owner or "",
            "participants": sorted(resource.participants),
            "requesters": sorted(resource.requesters),
        }
    if resource.grant_id is not None:
        return {"type": "Grant", "id": resource.grant_id}, {}
    return {"type": "Deployment", "id": "aais"}, {}

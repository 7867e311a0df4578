"""Who may do what, asked in one place: the access object behind every authorization question.

:class:`Access` holds the authority's :class:`~.authorization.Authorizer` and the
reads its questions need (requests as the audit vouches for them, thread
records), and answers every question the authority, the driver and the
transports ask:

- :meth:`~Access.permits` and :meth:`~Access.check` (raise
  :class:`~.authorization.ForbiddenError`): one verb on one resource;
- :meth:`~Access.require`: one verb on a stored request, by id;
- :meth:`~Access.may_view` and :meth:`~Access.visible`: may this principal view
  this request (these requests);
- :meth:`~Access.view_selection`: which pending rows a listing for them reads;
- :meth:`~Access.thread_access`: what they may see of a thread
  (:class:`~.thread_access.ThreadAccess`), and :meth:`~Access.post_to_thread`:
  whether they may start or post to it;
- :meth:`~Access.require_revoke`: whether they may revoke a grant;
- :meth:`~Access.deciding_groups`: which groups the policy lets decide a request
  (an honest answer from the policy, asked about no invented member).

A request the policy escalates (:class:`~.authorization.Escalations`) is asked about
with :attr:`~.authorization.Resource.escalated` read from the ledger: whether its
escalation row is ``done`` and its audit entry is vouched for and was due
(:meth:`~.vouch.VouchedRecords.escalation`), a durable fact every process reads alike,
never a comparison with a clock; the groups it reaches and its delay come from the
policy's rule (:meth:`Access.escalation_rule`), never from the entry.

The authorizer is synchronous (Cedar is, and every question may read the ledger),
so each question has an ``a``-prefixed async twin that runs it off the event loop
in one hop (:meth:`Access._off_loop`). A trusted caller (no principal, or an
administrator) is recognised in one place, :meth:`Access.trusts`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any, TypeVar

from ..ledger import Ledger, StoredRequest, ThreadRecord
from ..ledger.follow_ups import EscalationRule
from ..ledger.selection import PendingSelection
from ..protocol import Actor, Request
from .access_policy import AccessPolicy
from .authorization import (
    ALLOWED,
    AllowAuthenticated,
    Authorizer,
    ForbiddenError,
    Permission,
    Principal,
    Resource,
    Verb,
    approved_by_of,
    checked_principal,
    is_escalations,
    is_group_decisions,
    is_quorum_rule,
    is_view_selector,
    requester_of,
)
from .errors import UnknownRequestError
from .thread_access import ThreadAccess
from .vouch import VouchedRecords

__all__ = ["GRANT_NOT_REVOCABLE", "THREAD_REQUESTS", "Access"]

THREAD_REQUESTS = 100_000
"""The most requests of one thread :meth:`Access.thread_access` reads."""

GRANT_NOT_REVOCABLE = "no grant with that id that you may revoke"
"""The one reason given for an unknown grant and for one the actor may not view."""

_T = TypeVar("_T")


class Access:
    """Every authorization question of one authority (see the module docs).

    ``authorizer`` may be replaced at any time (``access.authorizer = ...``); each
    question asks the current one.

    Args:
        ledger: the authority's ledger.
        records: the authority's vouched reads.
        authorizer: who may do what.
        clock: the authority's clock, epoch seconds (an escalation dated later than now
            has not run yet, whatever its entry says).
    """

    def __init__(
        self,
        ledger: Ledger,
        records: VouchedRecords,
        authorizer: Authorizer,
        *,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.ledger = ledger
        self.authorizer = authorizer
        self._records = records
        self._clock = clock

    # -- the trusted caller ------------------------------------------------------------

    @staticmethod
    def trusts(principal: Principal | None) -> bool:
        """Whether ``principal`` is a trusted caller, asked about nothing: no principal
        (in-process code holding the graph) or an administrator."""
        return principal is None or principal.administrator

    def sees_everything(self, principal: Principal | None) -> bool:
        """Whether ``principal`` may view every request and event without asking about each:
        a trusted caller, or an authorizer that lets everyone authenticated view all."""
        return self.trusts(principal) or isinstance(self.authorizer, AllowAuthenticated)

    # -- what a question is about --------------------------------------------------------

    def request_resource(self, request: Request, *, decision: str | None = None) -> Resource:
        """What an access to ``request`` is asked about, from the request (and, for one
        the policy escalates, whether its escalation ran)."""
        groups = self.escalated_to(request)
        return Resource(
            request=request,
            requester=requester_of(request),
            decision=decision,
            approved_by=approved_by_of(request),
            escalated=groups is not None,
            escalated_to=groups or frozenset(),
        )

    def escalated(self, request: Request) -> bool:
        """Whether ``request`` escalated: the policy escalates it and the ledger holds its
        escalation as done."""
        return self.escalated_to(request) is not None

    def escalated_to(self, request: Request) -> frozenset[str] | None:
        """The groups ``request`` escalated to (None: the authorizer does not escalate it, or
        its escalation has not run)."""
        authorizer = self.authorizer
        if not is_escalations(authorizer) or not authorizer.escalates(request):
            return None
        rule = self.escalation_rule(request)
        now = None if self._clock is None else self._clock()
        if rule is None or not self._records.escalation(
            request.id, request.created_at, rule, now=now
        ):
            return None
        return rule.to

    def escalation_rule(self, request: Request) -> EscalationRule | None:
        """What the policy says of ``request``'s escalation (None: it does not escalate):
        the rule of the ledger's plan, which scheduled it, else the authorizer's own
        when it is an access-policy file. Never the stored entry's groups."""
        plan_policy = getattr(self.ledger.delivery_plan, "policy", None)
        for policy in (plan_policy, self.authorizer):
            if isinstance(policy, AccessPolicy):
                rule = policy.rule_for(request)
                if rule.escalate_after is not None and rule.escalate_to:
                    return EscalationRule(rule.escalate_after, rule.escalate_to)
        return None

    def resource_of(
        self, stored: StoredRequest, request: Request, *, decision: str | None = None
    ) -> Resource:
        """What an access to ``request`` (stored as ``stored``) is asked about."""
        resource = self.request_resource(request, decision=decision)
        if resource.requester is None:  # a request recorded before the extension existed
            found = stored.context.get("requester")
            resource = replace(resource, requester=found if isinstance(found, str) else None)
        return replace(resource, thread_id=stored.thread_id)

    def stored_resource(
        self,
        request_id: str,
        *,
        decision: str | None = None,
        stored: StoredRequest | None = None,
    ) -> Resource | None:
        """What an access to the stored request ``request_id`` is asked about (None: no
        such request). ``stored``: its row, as a caller that already read it holds it
        (vouched for again, not read)."""
        if stored is None:
            stored = self.ledger.get_request(request_id)
        elif stored.request_id != request_id:
            raise ValueError("stored: is the row of another request")
        if stored is None:
            return None
        vouched, requested = self._records.request(stored)
        return self.resource_of(vouched, requested.request, decision=decision)

    def thread_resource(
        self,
        thread_id: str,
        record: ThreadRecord | None,
        requesters: frozenset[str] = frozenset(),
    ) -> Resource:
        """What an access to a thread is asked about: who started it, who posted to it, and
        the requesters of its requests."""
        participants = frozenset() if record is None else record.participants
        return Resource(
            thread_id=thread_id,
            owner=None if record is None else record.owner,
            participants=participants,
            requesters=requesters | participants,
        )

    def grant_resource(self, grant_id: str) -> Resource:
        """What an access to a grant is asked about: the grant and the request that made it."""
        for grant in self.ledger.list_grants(include_revoked=True):
            if grant.grant_id == grant_id:
                found = self.stored_resource(grant.request_id)
                return (
                    Resource(grant_id=grant_id)
                    if found is None
                    else (replace(found, grant_id=grant_id))
                )
        return Resource(grant_id=grant_id)

    # -- one verb on one resource ------------------------------------------------------------

    def permits(self, principal: Principal | None, verb: Verb, resource: Resource) -> Permission:
        """The authorizer's answer (a trusted caller may do everything)."""
        if self.trusts(principal):
            return ALLOWED
        assert principal is not None
        return self.authorizer.authorize(principal, verb, resource)

    def check(self, principal: Principal | None, verb: Verb, resource: Resource) -> None:
        """Raise :class:`ForbiddenError` unless ``principal`` may ``verb`` ``resource``."""
        permission = self.permits(principal, verb, resource)
        if not permission.allowed:
            raise ForbiddenError(verb, permission.reason)

    def require(
        self,
        actor: Principal | Actor | Mapping[str, Any] | None,
        verb: Verb,
        request_id: str,
        *,
        decision: str | None = None,
        stored: StoredRequest | None = None,
    ) -> None:
        """Raise :class:`ForbiddenError` unless ``actor`` may ``verb`` the stored request (a
        channel that records several answers at once asks first, so a refusal records
        none of them); :class:`UnknownRequestError` for an unknown one. No actor or a
        ``policy`` actor: a trusted in-process caller, nothing to check.

        Args:
            actor: who asks (a principal, an AAIS actor or its data; None: trusted).
            verb: what they ask to do (``decide``, ``cancel``, ...).
            request_id: the stored request it is asked about.
            decision: the decision kind asked about, for a ``decide``.
            stored: the request's row, already read by the caller (one answer reads
                its request once); vouched for again, not read.
        """
        principal = checked_principal(actor)
        if principal is None:
            return
        resource = self.stored_resource(request_id, decision=decision, stored=stored)
        if resource is None:
            raise UnknownRequestError("/request_id")
        self.check(principal, verb, resource)

    def quorum(self, kind: str, name: str, risk: str) -> int:
        """How many distinct approvals an action of this kind, name and risk level needs
        (1 unless the authorizer is a :class:`~.authorization.QuorumRule` asking more)."""
        if is_quorum_rule(self.authorizer):
            return max(1, int(self.authorizer.quorum(kind, name, risk)))
        return 1

    # -- viewing -------------------------------------------------------------------------

    def may_view(self, principal: Principal | None, request_id: str) -> bool:
        """Whether ``principal`` may view the stored request (an unknown one: no)."""
        if self.trusts(principal):
            return True
        resource = self.stored_resource(request_id)
        return resource is not None and self.permits(principal, "view", resource).allowed

    def visible(self, principal: Principal | None, request_ids: Iterable[str]) -> frozenset[str]:
        """The ids among ``request_ids`` whose requests ``principal`` may view."""
        ids = frozenset(request_ids)
        if self.trusts(principal):
            return ids
        return frozenset(item for item in ids if self.may_view(principal, item))

    def view_selection(self, principal: Principal | None) -> PendingSelection | None:
        """The pending rows a listing for ``principal`` reads (None: every row): what the
        authorizer selects for them when it is a :class:`~.authorization.ViewSelector`."""
        authorizer = self.authorizer
        if self.sees_everything(principal) or not is_view_selector(authorizer):
            return None
        assert principal is not None
        selection = authorizer.view_selection(principal)
        return None if selection.unbounded else selection

    # -- threads -------------------------------------------------------------------------

    def thread_access(self, principal: Principal | None, thread_id: str) -> ThreadAccess:
        """What ``principal`` may see of the thread (:class:`~.thread_access.ThreadAccess`):
        its content when the authorizer lets them ``view`` the thread, and each of its
        requests they may ``view``. A trusted caller: everything."""
        record = self.thread_record(thread_id)
        if self.trusts(principal):
            return ThreadAccess.everything(thread_id, record)
        rows = self.ledger.requests_of_thread(thread_id, limit=THREAD_REQUESTS)
        resources = [
            (row, self.resource_of(row, self._records.request(row)[1].request)) for row in rows
        ]
        requesters = frozenset(r.requester for _, r in resources if r.requester is not None)
        seen = self.permits(principal, "view", self.thread_resource(thread_id, record, requesters))
        shown: set[str] = set()
        hidden: set[str] = set()
        hidden_calls: set[str] = set()
        for row, resource in resources:
            if self.permits(principal, "view", resource).allowed:
                shown.add(row.request_id)
                continue
            hidden.add(row.request_id)
            call = row.context.get("tool_call_id")
            if isinstance(call, str):
                hidden_calls.add(call)
        return ThreadAccess(
            thread_id,
            record,
            content=seen.allowed,
            shown=frozenset(shown),
            hidden=frozenset(hidden),
            hidden_tool_calls=frozenset(hidden_calls),
            refusal=seen,
        )

    def post_to_thread(
        self, principal: Principal | None, thread_id: str, *, exists: bool, record: bool = True
    ) -> ThreadRecord | None:
        """Check that ``principal`` may start (a new thread) or post to (continue) the
        thread, then record the post: its runs act for them from now on. ``exists``: the
        graph holds a checkpoint of the thread (one nobody started through a channel,
        such as an in-process run, is not new); ``record=False``: a run that brings no
        new message (it continues what is there), checked as a post but not recorded as
        one. Raises :class:`ForbiddenError` with nothing recorded; returns the thread's
        record (None for a trusted caller, who posts as nobody).

        Args:
            principal: who starts or posts (None: a trusted caller, checked about nothing).
            thread_id: the thread.
            exists: whether the graph holds a checkpoint of the thread.
            record: record the post (False: a run that brings no new message).
        """
        checked = checked_principal(principal)
        if checked is None:
            return None
        now = time.time()
        found = self.thread_record(thread_id)
        new = (
            found is None and not exists and not self.ledger.requests_of_thread(thread_id, limit=1)
        )
        if new:
            self.check(checked, "start", self.thread_resource(thread_id, None))
            found = self.ledger.post_to_thread(thread_id, checked.id, now=now, start=True)
            if found.owner == checked.id:
                return self._records.trust_thread(found)
            found = self._records.thread(thread_id, found)
            # Someone else started it a moment ago: posting to it is asked about instead.
        self.check(checked, "post", self.thread_resource(thread_id, found))
        if not record:
            return found
        return self._records.trust_thread(
            self.ledger.post_to_thread(thread_id, checked.id, now=now)
        )

    def thread_record(self, thread_id: str) -> ThreadRecord | None:
        """Who started the thread and who posted to it, as its ``thread`` audit entries
        vouch for them (None: nobody started it); raises
        :class:`~aais_langgraph.ledger.LedgerIntegrityError` for a row someone changed,
        planted or deleted behind the ledger's back."""
        return self._records.thread(thread_id, self.ledger.thread_record(thread_id))

    # -- grants and deciders ---------------------------------------------------------------

    def require_revoke(
        self, actor: Principal | Actor | Mapping[str, Any] | None, grant_id: str
    ) -> None:
        """Raise :class:`ForbiddenError` unless ``actor`` may revoke the grant. An unknown
        grant and one they may not even view raise the same refusal
        (:data:`GRANT_NOT_REVOCABLE`): the answer does not tell whether such a grant exists."""
        principal = checked_principal(actor)
        if self.trusts(principal):
            return
        resource = self.grant_resource(grant_id)
        if resource.request is None:
            raise ForbiddenError("revoke", GRANT_NOT_REVOCABLE)
        permission = self.permits(principal, "revoke", resource)
        if not permission.allowed:
            if not self.permits(principal, "view", resource).allowed:
                raise ForbiddenError("revoke", GRANT_NOT_REVOCABLE)
            raise ForbiddenError("revoke", permission.reason)

    def deciding_groups(self, request: Request, groups: Iterable[str]) -> frozenset[str] | None:
        """The groups among ``groups`` the policy lets decide (approve) ``request``, asked
        of the policy about each group as such, never about an invented member (None:
        the authorizer is no :class:`~.authorization.GroupDecisions` and cannot say)."""
        authorizer = self.authorizer
        if not is_group_decisions(authorizer):
            return None
        resource = self.request_resource(request, decision="approve")  # escalated or not
        return frozenset(
            group for group in groups if authorizer.group_may_decide(group, resource).allowed
        )

    # -- async twins ---------------------------------------------------------------------

    async def _off_loop(self, question: Callable[[], _T]) -> _T:
        """Ask ``question`` in a worker thread: the authorizer and the reads are blocking."""
        return await asyncio.to_thread(question)

    async def apermits(
        self, principal: Principal | None, verb: Verb, resource: Resource
    ) -> Permission:
        return await self._off_loop(lambda: self.permits(principal, verb, resource))

    async def acheck(self, principal: Principal | None, verb: Verb, resource: Resource) -> None:
        await self._off_loop(lambda: self.check(principal, verb, resource))

    async def arequire(
        self,
        actor: Principal | Actor | Mapping[str, Any] | None,
        verb: Verb,
        request_id: str,
        *,
        decision: str | None = None,
        stored: StoredRequest | None = None,
    ) -> None:
        """Async twin of :meth:`require`."""
        await self._off_loop(
            lambda: self.require(actor, verb, request_id, decision=decision, stored=stored)
        )

    async def amay_view(self, principal: Principal | None, request_id: str) -> bool:
        if self.trusts(principal):
            return True
        return await self._off_loop(lambda: self.may_view(principal, request_id))

    async def avisible(
        self, principal: Principal | None, request_ids: Iterable[str]
    ) -> frozenset[str]:
        ids = frozenset(request_ids)
        if self.trusts(principal) or not ids:
            return ids
        return await self._off_loop(lambda: self.visible(principal, ids))

    async def aview_selection(self, principal: Principal | None) -> PendingSelection | None:
        return await self._off_loop(lambda: self.view_selection(principal))

    async def athread_access(self, principal: Principal | None, thread_id: str) -> ThreadAccess:
        return await self._off_loop(lambda: self.thread_access(principal, thread_id))

    async def apost_to_thread(
        self, principal: Principal | None, thread_id: str, *, exists: bool, record: bool = True
    ) -> ThreadRecord | None:
        """Async twin of :meth:`post_to_thread`."""
        return await self._off_loop(
            lambda: self.post_to_thread(principal, thread_id, exists=exists, record=record)
        )

    async def arequire_revoke(
        self, actor: Principal | Actor | Mapping[str, Any] | None, grant_id: str
    ) -> None:
        await self._off_loop(lambda: self.require_revoke(actor, grant_id))

    async def adeciding_groups(
        self, request: Request, groups: Iterable[str]
    ) -> frozenset[str] | None:
        chosen = tuple(groups)
        return await self._off_loop(lambda: self.deciding_groups(request, chosen))

"""The follow-up runner: claims due reminders, escalations and requester notices and runs them.

Each follow-up (:mod:`aais_langgraph.ledger.follow_ups`) is claimed for a short while
(``claim_ttl``), so two workers or replicas never both run one. Running it records,
in one transaction with the row turning ``done`` (:meth:`~aais_langgraph.ledger.Ledger.update_work`
with ``records`` and ``audit``), the deliveries it causes and a ``follow_up`` audit
entry caused by no human (``"by": "system"``):

- a reminder: an ``approval.reminder`` delivery to each subscription that wants it
  (its id names the reminder's number, so each reminder is told once);
- an escalation: an ``approval.escalated`` delivery to the subscriptions without
  ``groups`` and to those whose ``groups`` meet the rule's ``escalate_to``; the row
  turning ``done`` is what lets those groups view and decide the request;
- a requester notice: an ``approval.requester_notice`` delivery by the policy's
  ``notify_via`` subscription, for an outcome the policy notifies.

A worker that dies after its claim and before the transaction leaves the claim to
lapse; the next worker runs it and records the same deliveries (same ids), so
nothing is lost and nothing is told twice. A follow-up of a request already resolved
(or past its expiry, for a reminder or an escalation) is skipped: it never approves,
denies or expires anything. The webhook sender then delivers what was recorded.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import Callable

from ..authority import AccessPolicy, ApprovalAuthority
from ..authority.access_policy import ApproverRule
from ..ledger import FOLLOW_UP, LedgerIntegrityError, StoredRequest, Work
from ..ledger.deliveries import new_delivery
from ..ledger.follow_ups import FOLLOW_UP_TARGETS, follow_up_audit, followed_change
from ..ledger.outbox import Backoff, WorkChange, retried_change, skipped_change
from ..ledger.selection import RowFacts
from .subscriptions import SubscriptionPlan

__all__ = ["FOLLOW_UP_BACKOFF", "FollowUpRunner"]

logger = logging.getLogger(__name__)

FOLLOW_UP_BACKOFF = Backoff(first=1.0, most=60.0)
"""A follow-up that could not run waits 1 s, doubling, at most 60 s."""


class FollowUpRunner:
    """Runs the due follow-ups of ``authority``'s ledger for ``plan``'s policy.

    Args:
        authority: The authority whose ledger holds the follow-ups (its clock says
            what is due).
        plan: The ledger's plan: its subscriptions and its access policy.
        holder: Who claims follow-ups (default: host, process and a random part).
        claim_ttl: Seconds a claim holds.
        batch: Follow-ups claimed per pass at most.
        clock: The current time in epoch seconds (default: the authority's clock).
    """

    def __init__(
        self,
        authority: ApprovalAuthority,
        plan: SubscriptionPlan,
        *,
        holder: str | None = None,
        claim_ttl: float = 30.0,
        batch: int = 50,
        clock: Callable[[], float] | None = None,
    ) -> None:
        if plan.policy is None:
            raise ValueError("plan: a plan without an access policy asks for no follow-ups")
        if (
            isinstance(claim_ttl, bool)
            or not isinstance(claim_ttl, (int, float))
            or not claim_ttl > 0
        ):
            raise ValueError("claim_ttl: must be a positive number of seconds")
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise ValueError("batch: must be a positive integer")
        if clock is not None and not callable(clock):
            raise TypeError("clock: must be callable")
        self.authority = authority
        self.plan = plan
        self.policy: AccessPolicy = plan.policy
        self.holder = holder or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.claim_ttl = claim_ttl
        self.batch = batch
        self.clock = clock or (lambda: authority.clock().timestamp())

    def claim(self) -> list[Work]:
        """Claim the due follow-ups (at most ``batch``)."""
        return self.authority.ledger.claim_work(
            FOLLOW_UP,
            self.holder,
            targets=FOLLOW_UP_TARGETS,
            ttl=self.claim_ttl,
            now=self.clock(),
            limit=self.batch,
        )

    def run_due(self) -> list[Work]:
        """One pass: claim what is due and run each; the rows after."""
        return [after for work in self.claim() if (after := self.run(work)) is not None]

    async def arun_due(self) -> list[Work]:
        """Async twin of :meth:`run_due` (runs it in a worker thread)."""
        return await asyncio.to_thread(self.run_due)

    def run(self, work: Work) -> Work | None:
        """Run one claimed follow-up; the row after (None: it is gone)."""
        ledger = self.authority.ledger
        now = self.clock()
        try:
            done = self._deliveries(work, now)
        except _Skipped as skipped:
            return ledger.update_work(FOLLOW_UP, work.work_id, skipped_change(skipped.reason, now))
        except LedgerIntegrityError:
            change: WorkChange = retried_change(
                "the ledger does not vouch for the request",
                now,
                backoff=FOLLOW_UP_BACKOFF,
                holder=self.holder,
            )
            return ledger.update_work(FOLLOW_UP, work.work_id, change)
        deliveries, facts = done
        return ledger.update_work(
            FOLLOW_UP,
            work.work_id,
            followed_change(self.holder, now),
            records=deliveries,
            audit=follow_up_audit(work, now, **facts),
        )

    def _deliveries(self, work: Work, now: float) -> tuple[list[Work], dict[str, object]]:
        """The deliveries ``work`` records and the facts its audit entry names."""
        authority = self.authority
        stored = authority.ledger.get_request(work.request_id)
        requested = authority.get_request(work.request_id)
        if stored is None or requested is None:
            raise _Skipped("the request is no longer stored")
        resolved = authority.get_resolution(work.request_id)
        subscriptions = self.plan.subscriptions.values()
        if work.target == "requester":
            outcome = None if resolved is None else resolved.resolution.outcome
            if outcome not in self.policy.requesters_notify:
                raise _Skipped("the policy does not tell the requester this outcome")
            via = self.policy.requesters_notify_via
            if via is None or via not in self.plan.subscriptions:
                raise _Skipped("requesters.notify_via names no subscription")
            notice = new_delivery(via, "approval.requester_notice", stored, now)
            return [notice], {"outcome": outcome}
        if resolved is not None:
            raise _Skipped("the request was resolved first")
        if authority.expiry_of(requested.request).timestamp() <= now:
            raise _Skipped("the request expired first")
        if work.target == "reminder":
            number = work.work_id.rpartition("-")[2]
            found = [
                new_delivery(item.name, "approval.reminder", stored, now, occurrence=number)
                for item in subscriptions
                if item.wants("approval.reminder", stored)
            ]
            return found, {"reminder": int(number) if number.isdigit() else 0}
        rule = self._rule(stored)
        found = [
            new_delivery(item.name, "approval.escalated", stored, now)
            for item in subscriptions
            if item.wants("approval.escalated", stored)
            and (not item.groups or not item.groups.isdisjoint(rule.escalate_to))
        ]
        return found, {"escalated_to": sorted(rule.escalate_to)}

    def _rule(self, stored: StoredRequest) -> ApproverRule:
        facts = RowFacts.of(stored.envelope, stored.context)
        return self.policy.rule_matching(facts.kind, facts.name, facts.risk)


class _Skipped(Exception):
    """A follow-up not to run, and why (words that hold no value)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason

"""Durable webhook deliveries: a notification one subscriber must receive, kept until it has.

A new request or resolution that a subscription wants (:class:`DeliveryPlan`)
leaves "this notification must be delivered" in the ledger in the same
transaction: one outbox row (:mod:`.outbox`) of kind :data:`~.outbox.DELIVERY` per
subscription (its ``target``) and notification (its ``topic``). The row's id is the
Standard Webhooks ``webhook-id``: stable across attempts, processes and replicas,
so a receiver drops the duplicates an at-least-once delivery can bring.

Listings name a delivery's states as its users know them: ``pending`` (due, or
claimed by a sender), ``delivered`` (the receiver answered 2xx), ``dead`` (it failed
``max_attempts`` times; :func:`retry_delivery` hands it back), ``coalesced`` (a
newer notice of the same thread replaced it: a subscription that coalesces keeps
one pending notice per thread) and ``skipped`` (not sent, for a reason: the
subscriber may not view the request, a filter, an expiry notice for a request no
longer pending).

A writer that does not know the subscriptions (no delivery plan) records no
delivery; the sender catches up from the event stream instead. Each subscription
has a cursor: the sequence up to which its deliveries were made from the events.
Moving it and recording the deliveries it passes happen in one transaction, and
only from the sequence read before (:meth:`Ledger.advance_delivery_cursor`), so
replicas never both move it.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Literal, Protocol, get_args

from .outbox import DELIVERY, Work, new_work, reopened_change

if TYPE_CHECKING:
    from .base import Ledger
    from .records import StoredRequest

__all__ = [
    "DELIVERY_NOTICES",
    "SUBSCRIBED_NOTICES",
    "Delivery",
    "DeliveryNotice",
    "DeliveryPlan",
    "DeliveryState",
    "delivery_id_for",
    "new_delivery",
    "retry_delivery",
]

Delivery = Work
"""A delivery row: an outbox row of kind :data:`~.outbox.DELIVERY`."""
DeliveryState = Literal["pending", "delivered", "dead", "coalesced", "skipped"]
"""A delivery's states as listings name them (:func:`~.outbox.shown_states` maps them)."""
DeliveryNotice = Literal[
    "approval.requested",
    "approval.resolved",
    "approval.expiring",
    "approval.reminder",
    "approval.escalated",
    "approval.requester_notice",
]
DELIVERY_NOTICES: tuple[DeliveryNotice, ...] = get_args(DeliveryNotice)
"""What a subscriber is told: a request opened, a request resolved, a request expires soon,
a request still waits (a reminder), a request escalated to other groups
(:mod:`.follow_ups`), and a requester how their request was resolved (only by the
subscription the policy's ``[requesters] notify_via`` names)."""
SUBSCRIBED_NOTICES: tuple[DeliveryNotice, ...] = DELIVERY_NOTICES[:-1]
"""The notices a subscription may ask for (``notices``; the requester notice goes only
to the subscription the policy names for it)."""


class DeliveryPlan(Protocol):
    """Which deliveries a new request or resolution records with it (the subscriptions'),
    and which follow-ups (:mod:`.follow_ups`): any outbox rows it returns are recorded.

    Called inside the ledger's write transaction: it must be quick, pure and must not
    raise (it reads the request as stored, nothing else)."""

    def deliveries(
        self,
        notice: Literal["approval.requested", "approval.resolved"],
        request: StoredRequest,
        now: float,
    ) -> list[Work]: ...


def delivery_id_for(
    subscription: str, notice: str, request_id: str, occurrence: str | None = None
) -> str:
    """The stable ``webhook-id`` of one subscription's notice about one request.

    Args:
        subscription: the subscription's name.
        notice: the notice (``approval.requested``, ...).
        request_id: the request it is about.
        occurrence: which of several notices of one kind (a reminder's number).
    """
    told = notice if occurrence is None else f"{notice}#{occurrence}"
    digest = hashlib.sha256(f"{subscription}\n{told}\n{request_id}".encode()).hexdigest()
    return f"msg_{digest[:32]}"


def new_delivery(
    subscription: str,
    notice: DeliveryNotice,
    request: StoredRequest,
    now: float,
    *,
    coalesce: bool = False,
    not_before: float | None = None,
    occurrence: str | None = None,
) -> Work:
    """The pending row for ``subscription``'s ``notice`` about ``request``: due at
    ``not_before`` (default: at once); ``coalesce`` replaces the thread's earlier one;
    ``occurrence`` tells apart the notices of one kind sent several times.

    Args:
        subscription: the webhook subscription it is for.
        notice: what it announces.
        request: the stored request it is about.
        now: the moment (epoch seconds).
        coalesce: replace the thread's earlier pending delivery.
        not_before: when it is due (default: at once).
        occurrence: which of several notices of one kind (a reminder's number).
    """
    return new_work(
        DELIVERY,
        delivery_id_for(subscription, notice, request.request_id, occurrence),
        request.request_id,
        now,
        thread_id=request.thread_id,
        target=subscription,
        topic=notice,
        coalesce_key=request.thread_id if coalesce else None,
        not_before=not_before,
    )


def retry_delivery(ledger: Ledger, delivery_id: str, *, now: float) -> Work | None:
    """Hand the dead delivery ``delivery_id`` back to the senders; the row after, or None
    when there is no dead delivery with that id (unknown, pending, delivered...)."""
    found = ledger.get_work(DELIVERY, delivery_id)
    if found is None or found.state != "dead":
        return None
    after = ledger.update_work(DELIVERY, delivery_id, reopened_change(now))
    return after if after is not None and after.state == "due" else None

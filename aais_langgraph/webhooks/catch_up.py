"""Catching up from the event stream: the deliveries a writer without the subscriptions missed.

A ledger records a delivery in the same transaction as its request or resolution
only when it was opened with a ``delivery_plan``, which each process gives its own: a request
raised by a library program, LangGraph Server or the CLI without
``--access-policy`` records none. So the sender also reads the ledger's events.
Each subscription keeps a durable cursor (the sequence up to which its
deliveries were made); a pass reads the ``approval.requested`` and
``approval.resolved`` events after it, makes the deliveries the subscription
wants for them (with the same ids a plan would give, so one the writer recorded
stays as it is) and records them while moving the cursor, in one transaction
(:meth:`~aais_langgraph.ledger.Ledger.advance_delivery_cursor`).

A new subscription's cursor starts at the ledger's last sequence: it is told
about what happens from then on, not about the history. Events compacted away
before the cursor reached them are passed over with a logged count. Deliveries
made here are not coalesced with earlier ones (each notice is sent), though a
later notice of a coalescing subscription still replaces them.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Literal

from ..ledger import Ledger
from .subscriptions import SubscriptionPlan, WebhookSubscription

__all__ = ["catch_up"]

logger = logging.getLogger(__name__)

_NOTICES: dict[str, Literal["approval.requested", "approval.resolved"]] = {
    "approval.requested": "approval.requested",
    "approval.resolved": "approval.resolved",
}


def catch_up(ledger: Ledger, subscription: WebhookSubscription, *, limit: int = 500) -> int:
    """Read up to ``limit`` events after ``subscription``'s cursor, record the deliveries
    they call for and move the cursor past them; how many deliveries were recorded
    (0 also when another sender moved the cursor first)."""
    name = subscription.name
    start = ledger.delivery_cursor(name)
    now = time.time()
    if start is None:
        ledger.advance_delivery_cursor(name, start=None, to=ledger.last_sequence(), now=now)
        return 0
    events = ledger.events_after(start, limit=limit)
    end = int(events[-1]["sequence"]) if events else _past_compacted(ledger)
    if end <= start:
        return 0
    _log_compacted(ledger, name, start, end)
    plan = SubscriptionPlan([subscription])
    found = []
    for event in events:
        notice = _NOTICES.get(str(event.get("type")))
        request_id = None if notice is None else _request_id(event)
        stored = None if request_id is None else ledger.get_request(request_id)
        if notice is not None and stored is not None:
            found.extend(plan.deliveries(notice, stored, now))
    if not ledger.advance_delivery_cursor(name, start=start, to=end, deliveries=found, now=now):
        return 0
    return len(found)


def _request_id(event: dict[str, Any]) -> str | None:
    body = event.get("request") if event.get("type") == "approval.requested" else None
    if isinstance(body, dict):
        found = body.get("id")
    else:
        resolution = event.get("resolution")
        found = resolution.get("request_id") if isinstance(resolution, dict) else None
    return found if isinstance(found, str) else None


def _past_compacted(ledger: Ledger) -> int:
    """With no event after the cursor: how far it may move without passing over an event
    written meanwhile (the last sequence read first, then the oldest event kept)."""
    last = ledger.last_sequence()
    floor = ledger.first_event_sequence()
    return last if floor is None else min(last, floor - 1)


def _log_compacted(ledger: Ledger, name: str, start: int, end: int) -> None:
    """Log how many sequences between the cursor and ``end`` were compacted away."""
    floor = ledger.first_event_sequence()
    gone = min(end + 1 if floor is None else floor, end + 1) - (start + 1)
    if gone > 0:
        logger.warning(
            "webhook %s: %d event(s) were compacted before their deliveries were made; passed over",
            name,
            gone,
        )

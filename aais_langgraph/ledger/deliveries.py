"""Durable webhook deliveries: a notification one subscriber must receive, kept until it has.

A new request or resolution that a subscription wants (:class:`DeliveryPlan`)
leaves "this notification must be delivered" in the ledger in the same
transaction: one row per subscription and notification, in the runtime's own
table ``aais_deliveries`` (AAIS says nothing about webhooks). The row's id is the
Standard Webhooks ``webhook-id``: stable across attempts, processes and replicas,
so a receiver drops the duplicates an at-least-once delivery can bring.

- ``pending``: to be sent once ``next_at`` has passed; a sender first claims it
  (``claimed_by`` until ``claim_until``), so two replicas do not both send it;
  a failed attempt counts in ``attempts``, names its ``last_error`` (a status
  code or an error type, never a value) and backs off;
- ``delivered``: the receiver answered 2xx;
- ``dead``: it failed ``max_attempts`` times; ``retry`` hands it back;
- ``coalesced``: a newer notice of the same thread replaced it (a subscription
  that coalesces keeps one pending notice per thread);
- ``skipped``: not sent, for a reason (the subscriber may not view the request,
  a filter, an expiry notice for a request no longer pending).

The transitions are pure functions; a backend reads the row, applies one under
its write lock and stores the result (:meth:`Ledger.update_delivery`).

A writer that does not know the subscriptions (no ``delivery_plan``) records no
delivery; the sender catches up from the event stream instead. Each subscription
has a cursor in ``aais_delivery_cursors``: the sequence up to which its
deliveries were made from the events. Moving it and recording the deliveries it
passes happen in one transaction, and only from the sequence read before
(:meth:`Ledger.advance_delivery_cursor`), so replicas never both move it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from .base import Ledger
    from .records import StoredRequest

__all__ = [
    "COALESCE_DELIVERIES",
    "DELIVERY_COLUMNS",
    "DELIVERY_NOTICES",
    "INSERT_DELIVERY",
    "MOVE_CURSOR",
    "POSTGRES_DELIVERIES_SCHEMA",
    "SQLITE_DELIVERIES_SCHEMA",
    "START_CURSOR",
    "Delivery",
    "DeliveryChange",
    "DeliveryNotice",
    "DeliveryPlan",
    "DeliveryState",
    "delivered_change",
    "delivery_from_row",
    "delivery_id_for",
    "delivery_row",
    "failed_change",
    "new_delivery",
    "retry_change",
    "retry_delivery",
    "skipped_change",
]

DeliveryState = Literal["pending", "delivered", "dead", "coalesced", "skipped"]
DeliveryNotice = Literal["approval.requested", "approval.resolved", "approval.expiring"]
DELIVERY_NOTICES: tuple[DeliveryNotice, ...] = (
    "approval.requested",
    "approval.resolved",
    "approval.expiring",
)
"""What a subscriber is told: a request opened, a request resolved, a request expires soon."""
DeliveryChange = Callable[["Delivery | None"], "Delivery | None"]
"""Given the stored row (or None), the row to store (None or the same: no change)."""


@dataclass(frozen=True)
class Delivery:
    """One notification that one subscription must receive."""

    delivery_id: str
    """The ``webhook-id`` every attempt carries."""
    subscription: str
    notice: DeliveryNotice
    request_id: str
    thread_id: str | None
    coalesce_key: str | None
    """The thread whose earlier pending notice this one replaces (None: never coalesced)."""
    state: DeliveryState
    attempts: int
    """Attempts that failed so far."""
    next_at: float
    """Not sent before this moment (epoch seconds)."""
    claimed_by: str | None
    claim_until: float
    """A sender's claim holds until then (0: unclaimed)."""
    last_error: str | None
    created_at: float
    updated_at: float

    def due(self, now: float) -> bool:
        """True when a sender may claim it now."""
        return self.state == "pending" and self.next_at <= now and self.claim_until <= now

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict of the row (what listings show)."""
        return {
            "delivery_id": self.delivery_id,
            "subscription": self.subscription,
            "notice": self.notice,
            "request_id": self.request_id,
            "thread_id": self.thread_id,
            "state": self.state,
            "attempts": self.attempts,
            "next_at": self.next_at,
            "last_error": self.last_error,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }


class DeliveryPlan(Protocol):
    """Which deliveries a new request or resolution records with it (the subscriptions').

    Called inside the ledger's write transaction: it must be quick, pure and must not
    raise (it reads the request as stored, nothing else)."""

    def deliveries(
        self,
        notice: Literal["approval.requested", "approval.resolved"],
        request: StoredRequest,
        now: float,
    ) -> list[Delivery]: ...


def delivery_id_for(subscription: str, notice: str, request_id: str) -> str:
    """The stable ``webhook-id`` of one subscription's notice about one request."""
    digest = hashlib.sha256(f"{subscription}\n{notice}\n{request_id}".encode()).hexdigest()
    return f"msg_{digest[:32]}"


def new_delivery(
    subscription: str,
    notice: DeliveryNotice,
    request: StoredRequest,
    now: float,
    *,
    coalesce: bool = False,
    not_before: float | None = None,
) -> Delivery:
    """The pending row for ``subscription``'s ``notice`` about ``request``: due at
    ``not_before`` (default: at once); ``coalesce`` replaces the thread's earlier one."""
    coalesce_key = request.thread_id if coalesce else None
    return Delivery(
        delivery_id=delivery_id_for(subscription, notice, request.request_id),
        subscription=subscription,
        notice=notice,
        request_id=request.request_id,
        thread_id=request.thread_id,
        coalesce_key=coalesce_key,
        state="pending",
        attempts=0,
        next_at=now if not_before is None else max(not_before, now),
        claimed_by=None,
        claim_until=0.0,
        last_error=None,
        created_at=now,
        updated_at=now,
    )


def delivered_change(now: float) -> DeliveryChange:
    """The receiver answered 2xx: delivered (whoever held the claim by now), the attempt
    that did it counted."""

    def change(current: Delivery | None) -> Delivery | None:
        if current is None or current.state == "delivered":
            return current
        return replace(
            current,
            state="delivered",
            attempts=current.attempts + 1,
            claimed_by=None,
            claim_until=0.0,
            updated_at=now,
        )

    return change


def failed_change(
    holder: str, error: str, now: float, *, retry_at: float, max_attempts: int
) -> DeliveryChange:
    """``holder``'s attempt failed with ``error``: count it and wait until ``retry_at``,
    or give up (``dead``) after ``max_attempts``. A claim another sender took since is
    left alone."""

    def change(current: Delivery | None) -> Delivery | None:
        if current is None or current.state != "pending" or current.claimed_by != holder:
            return current
        attempts = current.attempts + 1
        return replace(
            current,
            state="dead" if attempts >= max_attempts else "pending",
            attempts=attempts,
            next_at=max(retry_at, now),
            claimed_by=None,
            claim_until=0.0,
            last_error=error[:200],
            updated_at=now,
        )

    return change


def skipped_change(reason: str, now: float) -> DeliveryChange:
    """Not to be sent, for ``reason`` (words that hold no value)."""

    def change(current: Delivery | None) -> Delivery | None:
        if current is None or current.state not in ("pending", "dead"):
            return current
        return replace(
            current,
            state="skipped",
            claimed_by=None,
            claim_until=0.0,
            last_error=reason[:200],
            updated_at=now,
        )

    return change


def retry_change(now: float) -> DeliveryChange:
    """Hand a ``dead`` delivery back: pending at once, its attempts counted afresh."""

    def change(current: Delivery | None) -> Delivery | None:
        if current is None or current.state != "dead":
            return current
        return replace(current, state="pending", attempts=0, next_at=now, updated_at=now)

    return change


def retry_delivery(ledger: Ledger, delivery_id: str, *, now: float) -> Delivery | None:
    """Hand the dead delivery ``delivery_id`` back to the senders; the row after, or None
    when there is no dead delivery with that id (unknown, pending, delivered...)."""
    found = ledger.get_delivery(delivery_id)
    if found is None or found.state != "dead":
        return None
    after = ledger.update_delivery(delivery_id, retry_change(now))
    return after if after is not None and after.state == "pending" else None


def coalesces(earlier: Delivery, newer: Delivery, now: float) -> bool:
    """Whether ``newer`` replaces ``earlier``: the same subscription and thread, pending
    and not claimed by a sender now."""
    return (
        newer.coalesce_key is not None
        and earlier.delivery_id != newer.delivery_id
        and earlier.subscription == newer.subscription
        and earlier.coalesce_key == newer.coalesce_key
        and earlier.state == "pending"
        and earlier.claim_until <= now
    )


DELIVERY_COLUMNS = (
    "delivery_id, subscription, notice, request_id, thread_id, coalesce_key, state, "
    "attempts, next_at, claimed_by, claim_until, last_error, created_at, updated_at"
)

INSERT_DELIVERY = (
    f"INSERT INTO aais_deliveries ({DELIVERY_COLUMNS}) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (delivery_id) DO NOTHING"
)
"""Record a new delivery; one already recorded (the same id) stays as it is."""

UPSERT_DELIVERY = (
    f"INSERT INTO aais_deliveries ({DELIVERY_COLUMNS}) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (delivery_id) DO UPDATE SET "
    "state = excluded.state, attempts = excluded.attempts, next_at = excluded.next_at, "
    "claimed_by = excluded.claimed_by, claim_until = excluded.claim_until, "
    "last_error = excluded.last_error, updated_at = excluded.updated_at"
)
"""Store a changed row (``?`` marks; both SQL backends)."""

COALESCE_DELIVERIES = (
    "UPDATE aais_deliveries SET state = 'coalesced', updated_at = ? "
    "WHERE subscription = ? AND coalesce_key = ? AND state = 'pending' "
    "AND claim_until <= ? AND delivery_id <> ?"
)
"""Replace a thread's earlier unclaimed pending notice (:func:`coalesces`, in SQL)."""

CLAIM_DELIVERY = (
    "UPDATE aais_deliveries SET claimed_by = ?, claim_until = ? "
    "WHERE delivery_id = ? AND state = 'pending' AND next_at <= ? AND claim_until <= ?"
)
"""Claim one due delivery; a row count of 0 means another sender has it."""

START_CURSOR = (
    "INSERT INTO aais_delivery_cursors (subscription, sequence, updated_at) "
    "VALUES (?, ?, ?) ON CONFLICT (subscription) DO NOTHING"
)
"""Start a subscription's cursor; a row count of 0 means another sender started it."""

MOVE_CURSOR = (
    "UPDATE aais_delivery_cursors SET sequence = ?, updated_at = ? "
    "WHERE subscription = ? AND sequence = ?"
)
"""Move a cursor from the sequence read before; a row count of 0 means another sender did."""

SELECT_CURSOR = "SELECT sequence FROM aais_delivery_cursors WHERE subscription = ?"

_STATES = "('pending', 'delivered', 'dead', 'coalesced', 'skipped')"
_INDEXES = (
    # Only open work is indexed: picking up due work costs what waits, not the history.
    "CREATE INDEX IF NOT EXISTS aais_deliveries_open ON aais_deliveries "
    "(next_at, delivery_id) WHERE state = 'pending'",
    "CREATE INDEX IF NOT EXISTS aais_deliveries_dead ON aais_deliveries "
    "(updated_at, delivery_id) WHERE state = 'dead'",
    "CREATE INDEX IF NOT EXISTS aais_deliveries_coalesce ON aais_deliveries "
    "(subscription, coalesce_key) WHERE state = 'pending' AND coalesce_key IS NOT NULL",
)

SQLITE_DELIVERIES_SCHEMA = (
    f"""CREATE TABLE IF NOT EXISTS aais_deliveries (
        delivery_id TEXT PRIMARY KEY,
        subscription TEXT NOT NULL,
        notice TEXT NOT NULL,
        request_id TEXT NOT NULL,
        thread_id TEXT,
        coalesce_key TEXT,
        state TEXT NOT NULL CHECK (state IN {_STATES}),
        attempts INTEGER NOT NULL,
        next_at REAL NOT NULL,
        claimed_by TEXT,
        claim_until REAL NOT NULL,
        last_error TEXT,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS aais_delivery_cursors (
        subscription TEXT PRIMARY KEY,
        sequence INTEGER NOT NULL,
        updated_at REAL NOT NULL
    ) WITHOUT ROWID""",
    *_INDEXES,
)
"""The SQLite tables (created by ``setup()``; an older ledger file gains it there)."""

POSTGRES_DELIVERIES_SCHEMA = (
    f"""CREATE TABLE IF NOT EXISTS aais_deliveries (
        delivery_id TEXT PRIMARY KEY,
        subscription TEXT NOT NULL,
        notice TEXT NOT NULL,
        request_id TEXT NOT NULL,
        thread_id TEXT,
        coalesce_key TEXT,
        state TEXT NOT NULL CHECK (state IN {_STATES}),
        attempts INTEGER NOT NULL,
        next_at DOUBLE PRECISION NOT NULL,
        claimed_by TEXT,
        claim_until DOUBLE PRECISION NOT NULL,
        last_error TEXT,
        created_at DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS aais_delivery_cursors (
        subscription TEXT PRIMARY KEY,
        sequence BIGINT NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL
    )""",
    *_INDEXES,
)
"""The Postgres tables (created by ``setup()``; an older schema gains it there)."""


def delivery_from_row(row: tuple[Any, ...]) -> Delivery:
    """A row of :data:`DELIVERY_COLUMNS` as a record."""
    (
        delivery_id,
        subscription,
        notice,
        request_id,
        thread_id,
        coalesce_key,
        state,
        attempts,
        next_at,
        claimed_by,
        claim_until,
        last_error,
        created_at,
        updated_at,
    ) = row
    return Delivery(
        delivery_id,
        subscription,
        notice,
        request_id,
        thread_id,
        coalesce_key,
        state,
        int(attempts),
        float(next_at),
        claimed_by,
        float(claim_until),
        last_error,
        float(created_at),
        float(updated_at),
    )


def delivery_row(delivery: Delivery) -> tuple[Any, ...]:
    """The values of :data:`DELIVERY_COLUMNS` for ``delivery``."""
    return (
        delivery.delivery_id,
        delivery.subscription,
        delivery.notice,
        delivery.request_id,
        delivery.thread_id,
        delivery.coalesce_key,
        delivery.state,
        delivery.attempts,
        delivery.next_at,
        delivery.claimed_by,
        delivery.claim_until,
        delivery.last_error,
        delivery.created_at,
        delivery.updated_at,
    )

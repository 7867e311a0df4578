"""The transactional outbox: durable work a ledger write leaves behind, of every kind.

"This thread must be resumed" and "this notification must be delivered" are rows
written in the same transaction as the resolution or request that causes them, so
no crash between the write and the work can lose the work; any process picks them
up, retries them until they finish, and lists them while they wait. Each row has a
``kind`` (:data:`RESUME`: :mod:`.resume_work`; :data:`DELIVERY`: :mod:`.deliveries`;
:data:`FOLLOW_UP`: reminders, escalations and requester notices, :mod:`.follow_ups`);
a new kind of work is one more ``kind`` value, with no new table, no new ledger
method and no new transition. AAIS says nothing about this
work (SPEC §4.3 leaves execution to the runtime): it is the runtime's own table,
``aais_outbox``.

States (:data:`WorkState`):

- ``due``: to be done once ``next_at`` has passed; a failed attempt counts in
  ``attempts``, names its ``last_error`` (an error type, a status code or a rule,
  never a value) and backs off (:class:`Backoff`);
- ``claimed``: a worker holds it (``claimed_by`` until ``claim_until``; a claim that
  lapsed may be taken again), so two replicas do not both do it;
- ``done``: finished (a thread resumed or moved on, a notice delivered);
- ``dead``: it failed as often as allowed; :func:`reopened_change` hands it back;
- ``unknown``: a human must look first (an execution of unknown outcome, or a thread
  that never paused however often it was tried); reopened when they have;
- ``coalesced``: a newer row with the same ``coalesce_key`` replaced it;
- ``skipped``: not to be done, for a reason kept in ``last_error``.

Each kind shows its rows in the words its users know (:attr:`Work.shown_state`,
:meth:`Work.to_json`): a delivery is ``pending`` while due or claimed and
``delivered`` when done. The transitions are pure functions of the stored row; a
backend reads the row, applies one under its write lock and stores the result
(:meth:`~.base.Ledger.update_work`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any, Literal, get_args

__all__ = [
    "DELIVERY",
    "FOLLOW_UP",
    "OPEN_STATES",
    "RESUME",
    "Backoff",
    "Work",
    "WorkChange",
    "WorkState",
    "claimed",
    "coalesces",
    "new_work",
    "reopened_change",
    "retried_change",
    "settled_change",
    "shown_states",
    "skipped_change",
]

WorkState = Literal["due", "claimed", "done", "dead", "unknown", "coalesced", "skipped"]
WORK_STATES: tuple[WorkState, ...] = get_args(WorkState)
WORK_STATES_SQL = "(" + ", ".join(f"'{state}'" for state in WORK_STATES) + ")"
"""The states as an SQL list, for both dialects' ``CHECK (state IN ...)``."""
OPEN_STATES: tuple[WorkState, ...] = ("due", "claimed", "dead", "unknown")
"""The states of work not finished: what listings show by default, what retention keeps."""
WorkChange = Callable[["Work | None"], "Work | None"]
"""Given the stored row (or None), the row to store (None or the same: no change)."""

RESUME = "resume"
"""Kind: a thread to resume with the resolution the ledger recorded (id: the request's)."""
DELIVERY = "delivery"
"""Kind: a webhook notice one subscription must receive (id: its ``webhook-id``)."""
FOLLOW_UP = "follow_up"
"""Kind: a reminder, an escalation or a requester notice the access policy asks for
about one request (:mod:`.follow_ups`)."""

ERROR_LIMIT = 500
"""The longest ``last_error`` kept (characters)."""

_SHOWN: dict[str, dict[str, str]] = {
    DELIVERY: {"due": "pending", "claimed": "pending", "done": "delivered"}
}
"""Each kind's own names for states, where they differ from :data:`WorkState`'s."""


@dataclass(frozen=True)
class Work:
    """One row of the outbox: work of one ``kind`` about one request."""

    kind: str
    work_id: str
    """Unique within its kind: the request id of resume work, the ``webhook-id`` of a
    delivery."""
    request_id: str
    thread_id: str | None
    state: WorkState
    attempts: int
    """Attempts that failed so far (a delivery counts the one that succeeded too)."""
    next_at: float
    """Not picked up before this moment (epoch seconds)."""
    last_error: str | None
    created_at: float
    """When the write that caused it was recorded (epoch seconds)."""
    updated_at: float
    target: str | None = None
    """Who it is for, where a kind has several (a delivery's subscription)."""
    topic: str | None = None
    """What it says, where a kind says several things (a delivery's notice)."""
    coalesce_key: str | None = None
    """A newer row of the kind and target with this key replaces this one while it is
    due and unclaimed (None: never replaced)."""
    claimed_by: str | None = None
    claim_until: float = 0.0
    """A worker's claim holds until then (0: unclaimed)."""
    result: str | None = None
    """What finished work left behind for later work to use, where a kind keeps
    something (a posted Slack message's channel and ``ts``); never a secret."""

    def due(self, now: float) -> bool:
        """True when a worker should take it now (due, or claimed by a lapsed claim)."""
        return self.state in ("due", "claimed") and self.next_at <= now and self.claim_until <= now

    @property
    def shown_state(self) -> str:
        """The state in the kind's own words (a delivery is ``pending`` or ``delivered``)."""
        return _SHOWN.get(self.kind, {}).get(self.state, self.state)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict of the row in the kind's own words (what listings show)."""
        if self.kind == RESUME:
            return {
                "request_id": self.request_id,
                "thread_id": self.thread_id,
                "state": self.shown_state,
                "since": self.created_at,
                "attempts": self.attempts,
                "next_at": self.next_at,
                "last_error": self.last_error,
                "updated_at": self.updated_at,
            }
        common = {
            "state": self.shown_state,
            "attempts": self.attempts,
            "next_at": self.next_at,
            "last_error": self.last_error,
        }
        if self.kind == DELIVERY:
            return {
                "delivery_id": self.work_id,
                "subscription": self.target,
                "notice": self.topic,
                "request_id": self.request_id,
                "thread_id": self.thread_id,
                **common,
                "created_at": self.created_at,
                "updated_at": self.updated_at,
            }
        return {
            "kind": self.kind,
            "work_id": self.work_id,
            "target": self.target,
            "topic": self.topic,
            "request_id": self.request_id,
            "thread_id": self.thread_id,
            **common,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }


def shown_states(kind: str, names: Iterable[str]) -> tuple[WorkState, ...]:
    """The stored states a listing filter in the kind's own words selects (``pending``
    deliveries: due and claimed); a name that is no state selects nothing."""
    shown = _SHOWN.get(kind, {})
    return tuple(state for state in WORK_STATES if shown.get(state, state) in set(names))


def new_work(
    kind: str,
    work_id: str,
    request_id: str,
    now: float,
    *,
    thread_id: str | None = None,
    target: str | None = None,
    topic: str | None = None,
    coalesce_key: str | None = None,
    not_before: float | None = None,
) -> Work:
    """A due row: at ``not_before`` (default: at once).

    Args:
        kind: What work it is (:data:`RESUME`, :data:`DELIVERY`, ...).
        work_id: Its id within the kind.
        request_id: The request it is about.
        now: When its cause was recorded (epoch seconds).
        thread_id: The request's thread, if it has one.
        target: Who it is for (a delivery's subscription).
        topic: What it says (a delivery's notice).
        coalesce_key: A newer row with this key replaces it while due and unclaimed.
        not_before: Not due before this moment (never earlier than ``now``).
    """
    next_at = now if not_before is None else max(not_before, now)
    return Work(
        kind,
        work_id,
        request_id,
        thread_id,
        "due",
        0,
        next_at,
        None,
        now,
        now,
        target=target,
        topic=topic,
        coalesce_key=coalesce_key,
    )


@dataclass(frozen=True)
class Backoff:
    """How long a failed attempt waits: ``first`` seconds, doubling, at most ``most``."""

    first: float
    most: float

    def after(self, attempts: int) -> float:
        """Seconds before attempt ``attempts + 1``."""
        return float(min(self.first * 2 ** min(attempts, 30), self.most))


def claimed(work: Work, holder: str, until: float) -> Work:
    """``work`` claimed by ``holder`` until ``until`` (what a claim stores)."""
    return replace(work, state="claimed", claimed_by=holder, claim_until=until)


def retried_change(
    error: str,
    now: float,
    *,
    backoff: Backoff,
    sooner: float | None = None,
    holder: str | None = None,
    max_attempts: int | None = None,
) -> WorkChange:
    """An attempt failed with ``error``: count it and back off (to ``sooner`` when that
    comes first, e.g. the moment a held lease expires), or give up (``dead``) after
    ``max_attempts``. With ``holder``, only that worker's claim is changed (a claim
    another worker took since is left alone).

    Args:
        error: Why it failed, in words that hold no value.
        now: The current time (epoch seconds).
        backoff: How long to wait, from the attempts before this one.
        sooner: Try again no later than this moment (never before ``now``).
        holder: The worker whose claim failed (None: unclaimed work).
        max_attempts: Dead after this many failures (None: retried for ever).
    """

    def change(current: Work | None) -> Work | None:
        if current is None or current.state not in ("due", "claimed"):
            return current
        if holder is not None and current.claimed_by != holder:
            return current
        attempts = current.attempts + 1
        next_at = now + backoff.after(current.attempts)
        if sooner is not None:
            next_at = min(next_at, max(sooner, now))
        given_up = max_attempts is not None and attempts >= max_attempts
        return replace(
            current,
            state="dead" if given_up else "due",
            attempts=attempts,
            next_at=next_at,
            claimed_by=None,
            claim_until=0.0,
            last_error=error[:ERROR_LIMIT],
            updated_at=now,
        )

    return change


def settled_change(
    state: Literal["done", "unknown"],
    now: float,
    *,
    reason: str | None = None,
    counted: bool = False,
    result: str | None = None,
) -> WorkChange:
    """Finished (``done``, whoever held the claim by now; ``counted``: the attempt that
    did it counts; ``result``, when given, is kept for later work), or a human must look
    first (``unknown``; ``reason``, when given, is kept as its ``last_error``). Done work
    stays done.

    Args:
        state: ``done`` or ``unknown``.
        now: the moment (epoch seconds).
        reason: kept as ``last_error`` for ``unknown``.
        counted: the attempt that did it counts.
        result: kept with the row for later work (a posted message's channel and ts).
    """

    def change(current: Work | None) -> Work | None:
        if current is None or current.state in (state, "done"):
            return current
        return replace(
            current,
            state=state,
            attempts=current.attempts + (1 if counted else 0),
            claimed_by=None,
            claim_until=0.0,
            last_error=current.last_error if reason is None else reason[:ERROR_LIMIT],
            result=current.result if result is None else result,
            updated_at=now,
        )

    return change


def skipped_change(reason: str, now: float) -> WorkChange:
    """Not to be done, for ``reason`` (words that hold no value)."""

    def change(current: Work | None) -> Work | None:
        if current is None or current.state not in ("due", "claimed", "dead"):
            return current
        return replace(
            current,
            state="skipped",
            claimed_by=None,
            claim_until=0.0,
            last_error=reason[:ERROR_LIMIT],
            updated_at=now,
        )

    return change


def reopened_change(now: float) -> WorkChange:
    """Hand ``dead`` or ``unknown`` work back: due at once. Dead work counts its attempts
    afresh (it used them up); unknown work keeps them (a human looked, nothing failed)."""

    def change(current: Work | None) -> Work | None:
        if current is None or current.state not in ("dead", "unknown"):
            return current
        attempts = 0 if current.state == "dead" else current.attempts
        return replace(current, state="due", attempts=attempts, next_at=now, updated_at=now)

    return change


def coalesces(earlier: Work, newer: Work, now: float) -> bool:
    """Whether ``newer`` replaces ``earlier``: the same kind, target and coalesce key,
    and ``earlier`` due and not claimed by a worker now."""
    return (
        newer.coalesce_key is not None
        and (earlier.kind, earlier.target, earlier.coalesce_key)
        == (newer.kind, newer.target, newer.coalesce_key)
        and earlier.work_id != newer.work_id
        and earlier.state in ("due", "claimed")
        and earlier.claim_until <= now
    )

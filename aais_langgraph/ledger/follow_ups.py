"""Follow-ups: the reminders, escalations and requester notices a request's rule asks for.

The access policy's approver rule of a request may ask that its approvers are
reminded, that it escalates to other groups after a while, and that its requester
is told when it is denied, expires or is cancelled. Each is one outbox row
(:mod:`.outbox`) of kind :data:`~.outbox.FOLLOW_UP`, written in the same transaction
as its cause: the reminders and the escalation with the request (each due at its
moment, counted from the request's ``created_at``, the authority's clock), the
requester notice with the resolution. Its ``target`` says which follow-up it is
(:data:`FollowUpTarget`), so every worker claims them all.

A worker that runs one (:class:`~aais_langgraph.webhooks.FollowUpRunner`) records,
in one transaction with the row turning ``done``, the deliveries it causes (their
ids are stable, so a retry records nothing twice) and a ``follow_up`` audit entry
with no human actor (:func:`follow_up_audit`). One that finds the request resolved
(or, for a reminder or escalation, past its expiry) skips it: a follow-up never
approves, denies or expires anything.

An escalation that ran is a durable fact: its row is ``done`` and its ``follow_up``
audit entry records it (:func:`escalation_entry`; retention carries that entry while the
request stays). The access object asks that fact, never a clock, whether the rule's
``escalate_to`` groups may now view and decide the request, and only once the entry is
vouched for (intact, on the recorded chain, sealed with a key) and was due
(:func:`escalation_problem`: its time at or after the request's ``created_at`` plus the
rule's delay). Who it reaches and when comes from the policy's rule
(:class:`EscalationRule`), never from the entry: the groups an entry names are only
what the runner told.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Literal, get_args

from ..protocol import AAISValidationError, format_timestamp, parse_timestamp
from .audit import chain_hash
from .integrity import entry_seal_problem
from .outbox import FOLLOW_UP, Work, WorkChange, new_work
from .records import AuditEntry

if TYPE_CHECKING:
    from .base import Ledger

__all__ = [
    "FOLLOW_UP_TARGETS",
    "EscalationRule",
    "FollowUpTarget",
    "escalated",
    "escalated_to",
    "escalation_entry",
    "escalation_id",
    "escalation_problem",
    "follow_up_audit",
    "followed_change",
    "new_escalation",
    "new_reminder",
    "new_requester_notice",
]

FollowUpTarget = Literal["reminder", "escalation", "requester"]
FOLLOW_UP_TARGETS: tuple[FollowUpTarget, ...] = get_args(FollowUpTarget)
"""Which follow-up a row is: a reminder to the approvers, an escalation to other
groups, a notice to the requester."""

SYSTEM = "system"
"""Who a follow-up's audit entry names as its cause: no human, the runtime's schedule."""


def escalation_id(request_id: str) -> str:
    """The id of the request's escalation row (one per request)."""
    return f"{request_id}#escalation"


def new_reminder(
    request_id: str, thread_id: str | None, number: int, due_at: float, now: float
) -> Work:
    """Reminder ``number`` of the request, due at ``due_at``.

    Args:
        request_id: the request reminded of.
        thread_id: its thread, if any.
        number: which reminder (from 1).
        due_at: when it is due (epoch seconds).
        now: the moment it is recorded (epoch seconds).
    """
    return new_work(
        FOLLOW_UP,
        f"{request_id}#reminder-{number}",
        request_id,
        min(now, due_at),
        thread_id=thread_id,
        target="reminder",
        topic="approval.reminder",
        not_before=due_at,
    )


def new_escalation(request_id: str, thread_id: str | None, due_at: float, now: float) -> Work:
    """The request's escalation, due at ``due_at``.

    Args:
        request_id: the request escalated.
        thread_id: its thread, if any.
        due_at: when it is due (epoch seconds).
        now: the moment it is recorded (epoch seconds).
    """
    return new_work(
        FOLLOW_UP,
        escalation_id(request_id),
        request_id,
        min(now, due_at),
        thread_id=thread_id,
        target="escalation",
        topic="approval.escalated",
        not_before=due_at,
    )


def new_requester_notice(request_id: str, thread_id: str | None, now: float) -> Work:
    """The notice to the request's requester of how it was resolved: due at once (its
    runner skips an outcome the policy does not notify)."""
    return new_work(
        FOLLOW_UP,
        f"{request_id}#requester",
        request_id,
        now,
        thread_id=thread_id,
        target="requester",
        topic="approval.requester_notice",
    )


def followed_change(holder: str, now: float) -> WorkChange:
    """The follow-up ran: ``done``, only while ``holder`` still holds its claim (a claim
    another worker took since is theirs to finish; done work stays done)."""

    def change(current: Work | None) -> Work | None:
        if current is None or current.state != "claimed" or current.claimed_by != holder:
            return current
        return replace(
            current,
            state="done",
            attempts=current.attempts + 1,
            claimed_by=None,
            claim_until=0.0,
            updated_at=now,
        )

    return change


def follow_up_audit(work: Work, now: float | None = None, **facts: Any) -> dict[str, Any]:
    """The ``follow_up`` audit payload of ``work``: the request, which follow-up, its id,
    when it ran by the authority's clock (``ran_at``, from ``now`` in epoch seconds: what
    an escalation's due time is compared with) and ``facts`` (the groups escalated to,
    the outcome told), caused by no human."""
    payload: dict[str, Any] = {
        "request_id": work.request_id,
        "follow_up": work.target,
        "work_id": work.work_id,
        "by": SYSTEM,
        **facts,
    }
    if now is not None:
        payload["ran_at"] = format_timestamp(datetime.fromtimestamp(now, timezone.utc))
    return payload


@dataclass(frozen=True)
class EscalationRule:
    """What the policy's rule says of a request's escalation: ``after`` seconds from its
    ``created_at``, the groups ``to`` may view and decide it."""

    after: float
    to: frozenset[str]


def escalation_entry(ledger: Ledger, request_id: str) -> AuditEntry | None:
    """The ``follow_up`` audit entry of the request's escalation when its row is ``done``
    (None while it has not run). Not vouched for: :func:`escalation_problem` says whether
    it counts, and the authority's vouched read checks its place on the chain."""
    found = ledger.get_work(FOLLOW_UP, escalation_id(request_id))
    if found is None or found.state != "done":
        return None
    for entry in ledger.follow_up_entries(request_id):
        if (
            entry.payload.get("work_id") == found.work_id
            and entry.payload.get("follow_up") == "escalation"
            and entry.payload.get("request_id") == request_id
        ):
            return entry
    return None


def escalation_problem(
    entry: AuditEntry,
    created_at: str,
    rule: EscalationRule,
    key: bytes | None,
    *,
    now: float | None = None,
) -> str | None:
    """Why ``entry`` does not count as the escalation ``rule`` asks of a request created
    at ``created_at``, or None if it does: its hash must match its content, its seal
    verify under ``key`` (with one), and the time it ran (``ran_at``, the authority's
    clock, like ``created_at``) be at or after the moment it was due.

    Args:
        entry: the request's escalation entry (:func:`escalation_entry`).
        created_at: the request's ``created_at`` (RFC 3339, the authority's clock).
        rule: the policy's rule for the request.
        key: the authority key (None: no seal to check).
        now: the authority's clock in epoch seconds (None: not compared): an entry dated
            later has not run yet.
    """
    if not _intact(entry):
        return f"its audit entry {entry.index} does not match its hash"
    sealed = entry_seal_problem(key, entry)
    if sealed is not None:
        return f"its audit entry {entry.index}: {sealed}"
    ran_at = entry.payload.get("ran_at")
    try:
        due = parse_timestamp(created_at).timestamp() + rule.after
        ran = parse_timestamp(ran_at if isinstance(ran_at, str) else "").timestamp()
    except AAISValidationError:
        return f"its audit entry {entry.index} has no valid time"
    if ran < due:
        return f"its audit entry {entry.index} records it before it was due"
    if now is not None and ran > now:
        return f"its audit entry {entry.index} records it later than now"
    return None


def escalated(ledger: Ledger, request_id: str) -> bool:
    """Whether the request's escalation ran: its row is ``done`` and the audit chain vouches
    for it (a ``follow_up`` entry of that escalation whose hash matches its content, as
    the runner writes in the same transaction). The durable fact the access object asks."""
    return escalated_to(ledger, request_id) is not None


def escalated_to(ledger: Ledger, request_id: str) -> frozenset[str] | None:
    """The groups the request's escalation entry names, once it ran (its row ``done``, its
    audit entry intact); None while it has not. What the runner told, for display: who
    may act comes from the policy's rule (:class:`EscalationRule`), never from this."""
    entry = escalation_entry(ledger, request_id)
    if entry is None or not _intact(entry):
        return None
    groups = entry.payload.get("escalated_to")
    if not isinstance(groups, list):
        return frozenset()
    return frozenset(item for item in groups if isinstance(item, str))


def _intact(entry: AuditEntry) -> bool:
    try:
        recomputed = chain_hash(
            entry.index, entry.kind, entry.occurred_at, entry.payload, entry.prev_hash
        )
    except AAISValidationError:
        return False
    return recomputed == entry.entry_hash

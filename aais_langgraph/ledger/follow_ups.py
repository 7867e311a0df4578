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
audit entry vouches for it (:func:`escalated`; retention carries that entry while the
request stays), and the access object asks those, never a clock, whether the rule's
``escalate_to`` groups may now view and decide the request.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal, get_args

from ..protocol import AAISValidationError
from .audit import chain_hash
from .outbox import FOLLOW_UP, Work, WorkChange, new_work
from .records import AuditEntry

if TYPE_CHECKING:
    from .base import Ledger

__all__ = [
    "FOLLOW_UP_TARGETS",
    "FollowUpTarget",
    "escalated",
    "escalated_to",
    "escalation_id",
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


def follow_up_audit(work: Work, **facts: Any) -> dict[str, Any]:
    """The ``follow_up`` audit payload of ``work``: the request, which follow-up, its id
    and ``facts`` (the groups escalated to, the outcome told), caused by no human."""
    return {
        "request_id": work.request_id,
        "follow_up": work.target,
        "work_id": work.work_id,
        "by": SYSTEM,
        **facts,
    }


def escalated(ledger: Ledger, request_id: str) -> bool:
    """Whether the request's escalation ran: its row is ``done`` and the audit chain vouches
    for it (a ``follow_up`` entry of that escalation whose hash matches its content, as
    the runner writes in the same transaction). The durable fact the access object asks."""
    return escalated_to(ledger, request_id) is not None


def escalated_to(ledger: Ledger, request_id: str) -> frozenset[str] | None:
    """The groups the request's escalation named, once it ran (as :func:`escalated`
    reads it: its row ``done``, its audit entry intact); None while it has not."""
    found = ledger.get_work(FOLLOW_UP, escalation_id(request_id))
    if found is None or found.state != "done":
        return None
    for entry in ledger.follow_up_entries(request_id):
        if (
            entry.payload.get("work_id") == found.work_id
            and entry.payload.get("follow_up") == "escalation"
            and _intact(entry)
        ):
            groups = entry.payload.get("escalated_to")
            if not isinstance(groups, list):
                return frozenset()
            return frozenset(item for item in groups if isinstance(item, str))
    return None


def _intact(entry: AuditEntry) -> bool:
    try:
        recomputed = chain_hash(
            entry.index, entry.kind, entry.occurred_at, entry.payload, entry.prev_hash
        )
    except AAISValidationError:
        return False
    return recomputed == entry.entry_hash

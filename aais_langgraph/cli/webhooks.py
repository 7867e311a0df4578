"""``aais-langgraph webhooks list|retry|follow-ups``: the ledger's webhook deliveries and
follow-ups that wait or gave up.

``list`` shows the deliveries still pending and the dead ones (``--state`` picks
others); ``retry ID`` hands a dead delivery back to the senders (``retry --dead``:
every dead one). A running server sends it again, with the same ``webhook-id``.
``follow-ups`` shows the reminders, escalations and requester notices still to run
(``--state`` picks others: ``done``, ``skipped``), each with when it is due.

``--access-policy FILE`` (any command) makes the command's own writes (an
approval, a cancel, an expiry) record the notices of the file's ``[[webhooks]]``,
as a server given the same file does.
"""

from __future__ import annotations

import argparse
import time
from datetime import datetime, timezone
from typing import Any, TextIO

from ..authority import ApprovalAuthority
from ..ledger import (
    DELIVERY,
    FOLLOW_UP,
    Delivery,
    DeliveryPlan,
    DeliveryState,
    Work,
    WorkState,
    retry_delivery,
    shown_states,
)
from .render import escape

__all__ = ["add_parser", "add_policy_option", "follow_up_history", "plan_from_policy", "run"]

_STATES: tuple[DeliveryState, ...] = ("pending", "delivered", "dead", "coalesced", "skipped")


def add_parser(commands: Any) -> None:
    """Register the ``webhooks`` subcommand on the CLI's subparsers."""
    sub = commands.add_parser("webhooks", help="webhook deliveries: list, retry dead ones")
    action = sub.add_subparsers(dest="webhooks_command", required=True)
    listing = action.add_parser("list", help="pending and dead deliveries")
    listing.add_argument(
        "--state",
        action="append",
        choices=_STATES,
        help="these states only (repeatable; default: pending and dead)",
    )
    follow_ups = action.add_parser(
        "follow-ups", help="reminders, escalations and requester notices still to run"
    )
    follow_ups.add_argument(
        "--state",
        action="append",
        choices=("due", "claimed", "done", "skipped", "dead"),
        help="these states only (repeatable; default: due and claimed)",
    )
    retry = action.add_parser("retry", help="send a dead delivery again")
    target = retry.add_mutually_exclusive_group(required=True)
    target.add_argument("delivery_id", nargs="?", help="its webhook-id (msg_...)")
    target.add_argument("--dead", action="store_true", help="every dead delivery")


def add_policy_option(parsers: Any) -> None:
    """Add ``--access-policy`` to the command's parser and each subcommand's."""
    for parser in parsers:
        parser.add_argument(
            "--access-policy",
            metavar="TOML",
            default=argparse.SUPPRESS,
            help="record the notices of this file's [[webhooks]] with this command's writes",
        )


def plan_from_policy(path: str | None, out: TextIO) -> tuple[DeliveryPlan | None, int | None]:
    """``(plan, None)``: the deliveries of the subscriptions in ``path`` and the follow-ups
    its rules ask for, for the ledger to record (None: it asks for neither), or
    ``(None, 2)`` after one line naming a bad setting or an unreadable file."""
    if path is None:
        return None, None
    from ..webhooks import load_plan

    try:
        return load_plan(path), None
    except (ValueError, OSError) as error:
        out.write(f"error: access policy: {error}\n")
        return None, 2


def follow_up_history(authority: ApprovalAuthority, request_id: str) -> list[str]:
    """The request's follow-ups as ``show`` lists them: which, its state, and when it ran
    (or is due), oldest first; an escalation that ran reads ``escalation done``."""
    states: tuple[WorkState, ...] = ("due", "claimed", "done", "skipped", "dead")
    found = authority.ledger.list_work(FOLLOW_UP, states=states, request_id=request_id)
    lines = []
    for work in found:
        ran = work.state in ("done", "skipped")
        moment = _moment(work.updated_at if ran else work.next_at)
        when = f"{'at' if ran else 'due'} {moment}"
        lines.append(f"follow-up {work.target} {work.state}  {when}")
    return lines


def _moment(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def follow_up_line(work: Work) -> str:
    """One follow-up as a line: id, which follow-up, request, state, due, attempts, reason."""
    due = _moment(work.next_at)
    reason = "" if work.last_error is None else f"  {escape(work.last_error)}"
    return (
        f"{escape(work.work_id)}  {work.target}  {escape(work.request_id)}  {work.state}  "
        f"due {due}  attempts {work.attempts}{reason}"
    )


def delivery_line(delivery: Delivery) -> str:
    """One delivery as a line: id, subscription, notice, request, state, attempts, error."""
    error = "" if delivery.last_error is None else f"  {escape(delivery.last_error)}"
    return (
        f"{delivery.work_id}  {escape(str(delivery.target))}  {delivery.topic}  "
        f"{escape(delivery.request_id)}  {delivery.shown_state}  "
        f"attempts {delivery.attempts}{error}"
    )


def run(authority: ApprovalAuthority, args: argparse.Namespace, stdout: TextIO) -> int:
    """Run ``webhooks list`` or ``webhooks retry``; the exit status."""
    ledger = authority.ledger
    if args.webhooks_command == "follow-ups":
        chosen = tuple(args.state) if args.state else ("due", "claimed")
        waiting = ledger.list_work(FOLLOW_UP, states=chosen)
        for work in waiting:
            stdout.write(follow_up_line(work) + "\n")
        stdout.write(f"{len(waiting)} follow-ups\n")
        return 0
    if args.webhooks_command == "list":
        states = tuple(args.state) if args.state else ("pending", "dead")
        found = ledger.list_work(DELIVERY, states=shown_states(DELIVERY, states))
        for delivery in found:
            stdout.write(delivery_line(delivery) + "\n")
        dead = sum(1 for delivery in found if delivery.state == "dead")
        stdout.write(f"{len(found)} deliveries, {dead} dead\n")
        return 0
    targets = (
        [delivery.work_id for delivery in ledger.list_work(DELIVERY, states=("dead",))]
        if args.dead
        else [args.delivery_id]
    )
    retried = 0
    for delivery_id in targets:
        retried += retry_delivery(ledger, delivery_id, now=time.time()) is not None
    if not args.dead and retried == 0:
        stdout.write("no dead delivery with that id\n")
        return 1
    stdout.write(f"{retried} handed back to the senders\n")
    return 0

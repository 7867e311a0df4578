"""``aais-langgraph compact --keep-days N | --keep-last N``: bound the ledger's history.

Removes the resolved requests the policy lets go (with their events, grants,
execution records and audit entries) and leaves a ``compacted`` checkpoint, sealed
with the authority key when one is configured, so ``audit verify`` still passes and
reports the compacted range. ``--witness FILE|URL`` (repeatable) publishes the
compaction, so ``audit verify --witness`` accounts for the witnessed entries it
removed. What is still needed stays: pending requests, open resume work, unfinished
executions, live grants.
"""

from __future__ import annotations

import argparse
import time
from typing import Any, TextIO

from ..authority import ApprovalAuthority
from ..ledger.retention import RetentionPolicy
from ..ledger.witness import WitnessError, open_witness, publish_compaction

__all__ = ["add_parser", "policy_of", "run"]


def _days(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("expected a number of days") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError("expected a number of days, 0 or more")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("expected a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError("expected a whole number, 0 or more")
    return value


def add_parser(commands: Any) -> None:
    """Register the ``compact`` subcommand on the CLI's subparsers."""
    sub = commands.add_parser(
        "compact",
        help="remove old resolved requests (--keep-days N and/or --keep-last N)",
        description="Remove resolved requests older than --keep-days days and beyond the "
        "--keep-last most recent (a request either keeps stays), with their events and "
        "audit entries; a checkpoint entry keeps the chain verifiable. Pending requests, "
        "open resume work, unfinished executions and live grants always stay.",
    )
    sub.add_argument("--keep-days", metavar="N", type=_days, help="keep what resolved in N days")
    sub.add_argument("--keep-last", metavar="N", type=_count, help="keep the N latest resolved")
    sub.add_argument(
        "--witness",
        metavar="FILE|URL",
        action="append",
        default=[],
        help="publish the compaction to this witness (JSON-lines file or HTTP URL; repeatable)",
    )


def policy_of(keep_days: float | None, keep_last: int | None) -> RetentionPolicy | None:
    """The policy the two options give (None when neither is set)."""
    if keep_days is None and keep_last is None:
        return None
    return RetentionPolicy(keep_days=keep_days, keep_last=keep_last)


def run(authority: ApprovalAuthority, args: argparse.Namespace, stdout: TextIO) -> int:
    """Compact once and report what went; exit status 2 without a policy."""
    policy = policy_of(args.keep_days, args.keep_last)
    if policy is None:
        stdout.write("error: compact: give --keep-days N or --keep-last N\n")
        return 2
    try:
        key = authority.key
        witnesses = [open_witness(target) for target in args.witness]
    except ValueError as error:
        stdout.write(f"error: {error}\n")
        return 2
    report = authority.ledger.compact_history(policy, now=time.time(), key=key)
    if report.compacted_through is None:
        stdout.write("nothing to compact\n")
        return 0
    stdout.write(
        f"compacted: {report.requests_removed} requests, {report.entries_removed} audit "
        f"entries and {report.events_removed} events removed; entries "
        f"0..{report.compacted_through} now covered by a checkpoint ({report.carried} carried)\n"
    )
    if witnesses:
        try:
            publish_compaction(report, witnesses, key=key)
        except WitnessError as error:
            stdout.write(f"error: {error}\n")
            return 2
        stdout.write(f"published the compaction to {len(witnesses)} witness(es)\n")
    return 0

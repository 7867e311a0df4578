"""``aais-langgraph`` command line: inspect and answer approvals in a ledger.

Every command takes ``--db PATH|URL`` (a SQLite file or a Postgres URL, the same
value the demo and server take), before or after the command; without it the
``AAIS_DB`` environment variable names the ledger. A decision made here is recorded by the
authority like any presenter's; a running server notices it and resumes the run.
Every command but ``init`` needs an existing ledger: a missing, empty, foreign or
damaged file is one line of error and exit status 2, never an empty ledger. The
authority key, if any, comes from ``AAIS_AUTHORITY_KEY_FILE`` or ``AAIS_AUTHORITY_KEY``.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import re
import sys
from collections.abc import Sequence
from typing import Literal, TextIO

from ..authority import ApprovalAuthority, Principal, UnknownRequestError, explain_constraints
from ..gate import reconcile_execution
from ..ledger import AuditVerification, open_ledger
from ..observability import decision_channel
from ..protocol import Actor, DecisionKind, Scope, build_decision, id_for
from ..protocol.patterns import DIGEST_PATTERN
from ..threads import (
    AnswerPlanner,
    Cancellation,
    IntegrityProblem,
    reconcile_checkpoints,
    waiting_resumes,
)
from . import compact, presenter, render, webhooks, witness
from .checkpoints import holds_checkpoints, open_checkpointer
from .db_option import DB_ENV, add_db_option, chosen_db, command_parsers
from .failures import report_failure

__all__ = ["DB_ENV", "add_db_option", "chosen_db", "escape", "main"]

escape = render.escape


def _actor() -> Principal:
    """The CLI's authenticated channel is the operating-system account running it, which
    can read and write the ledger file: it acts as an administrator (every access allowed;
    its actor is still the one recorded)."""
    actor = Actor(
        id=id_for(getpass.getuser() or "unknown"), type="human", authenticated_by="os-user"
    )
    return Principal(actor, administrator=True)


_ASKS = " (asks y/N first; --yes skips)"
_REQUEST_ID = "the request's id, as pending lists it"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="aais-langgraph",
        description="Inspect and answer the approvals in a ledger (a SQLite file or a "
        "PostgreSQL database), the one a server serving the graph uses.",
        epilog="approve and deny show the request, and they and cancel ask y/N before they "
        "submit anything (--yes skips the question, and without a terminal it is needed; "
        "any answer but y submits nothing). A running "
        "server resumes the paused run.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("init", help="create the ledger (or migrate an older one)")
    pending = commands.add_parser("pending", help="list pending approvals")
    pending.add_argument(
        "--checkpoints",
        metavar="PATH|URL",
        help="the graph's LangGraph checkpointer, to report runs paused on requests the "
        "ledger does not hold (default: --db itself, when it holds checkpoints)",
    )
    for name in ("show", "deny", "cancel"):
        sub = commands.add_parser(name, help=f"{name} a request" + _ASKS * (name != "show"))
        sub.add_argument("request_id", help=_REQUEST_ID)
        if name != "show":
            sub.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    approve = commands.add_parser(
        "approve",
        help="approve a request" + _ASKS,
        description="Show the request's complete values and what the scope covers, ask "
        "y/N, then record the approval with the operating-system user as the actor. "
        "Anything but y or yes (an empty line) submits nothing: exit status 1. Without a "
        "terminal to answer on (input ended), it says to pass --yes: exit status 2.",
    )
    approve.add_argument("request_id", help=_REQUEST_ID)
    approve.add_argument(
        "--scope",
        choices=("once", "session", "persistent"),
        default="once",
        help="default once; session and persistent only when the request offers them",
    )
    approve.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    commands.add_parser("unknown", help="list approved actions whose outcome is unknown")
    reconcile = commands.add_parser(
        "reconcile", help="settle an unknown outcome: --done (it happened) or --retry"
    )
    reconcile.add_argument("request_id", help=_REQUEST_ID)
    settled = reconcile.add_mutually_exclusive_group(required=True)
    settled.add_argument("--done", action="store_true", help="it took effect; do not run it again")
    settled.add_argument(
        "--retry", action="store_true", help="ask again: the run raises a fresh request"
    )
    presenter.add_parser(commands)
    webhooks.add_parser(commands)
    commands.add_parser("grants", help="list grants")
    revoke = commands.add_parser("revoke", help="revoke a grant")
    revoke.add_argument("grant_id", help="the grant's id, as grants lists it")
    commands.add_parser("expire", help="resolve overdue requests as expired")
    compact.add_parser(commands)
    audit = commands.add_parser(
        "audit", help="the audit log: verify its chain, export it, publish its tip"
    )
    audit.add_argument(
        "audit_command",
        choices=("verify", "export", "publish"),
        help="verify: check the hash chain (and --witness, --expect-tip); export: every "
        "entry as one JSON object per line; publish: append the tip to each --witness",
    )
    audit.add_argument(
        "--witness",
        metavar="FILE|URL",
        action="append",
        default=[],
        help="a witness of the tip (JSON-lines file or HTTP URL; repeatable): publish "
        "appends the tip to it, verify checks for a rollback (exit 3) or a fork (exit 4)",
    )
    audit.add_argument(
        "--expect-tip",
        metavar="N:HASH",
        type=_tip,
        help="a tip printed by an earlier verify and kept elsewhere: detects a rollback",
    )
    every = command_parsers(parser)
    add_db_option(every, f"SQLite file path or postgresql:// URL (default: ${DB_ENV})")
    webhooks.add_policy_option(every)
    return parser


_TIP = re.compile(f"(0|[1-9][0-9]{{0,17}}):({DIGEST_PATTERN})")


def _tip(text: str) -> tuple[int, str]:
    """``N:sha256:HEX`` as printed by ``audit verify``."""
    match = _TIP.fullmatch(text)
    if match is None:
        raise argparse.ArgumentTypeError("expected N:sha256:<64 hex digits>, as verify prints it")
    return int(match.group(1)), match.group(2)


def _reconcile(authority: ApprovalAuthority, target: str, optional: bool) -> list[IntegrityProblem]:
    """Runs paused in ``target``'s checkpoints on requests the ledger does not vouch for."""
    if optional and not holds_checkpoints(target):
        return []
    with open_checkpointer(target) as checkpointer:
        return reconcile_checkpoints(authority, checkpointer)


def _verification_line(result: AuditVerification) -> str:
    if result.ok:
        tip = "no tip" if result.tip is None else f"tip {result.tip[0]}:{result.tip[1]}"
        compacted = result.compacted
        kept = "" if compacted is None else f" (entries {compacted[0]}..{compacted[1]} compacted)"
        return f"audit ok: {result.checked} entries, {tip}{kept}"
    return f"audit FAILED at {result.table} {result.row_id}: {result.reason}"


NO_ANSWER_STATUS = 2
"""Exit status of a question nobody could answer (no terminal, or its input ended)."""


def _confirm(question: str, assume_yes: bool, stdin: TextIO, stdout: TextIO) -> bool | None:
    """True for y or yes, False for any other answer, None when there is nothing to read."""
    if assume_yes:
        return True
    stdout.write(f"{question} [y/N] ")
    stdout.flush()
    line = stdin.readline()
    if not line:  # the input ended without even an empty line: nobody is there to answer
        return None
    return line.strip().lower() in ("y", "yes")


def _no_answer(command: str, stdout: TextIO) -> int:
    stdout.write(
        f"\nno answer: {command} asks for confirmation on a terminal, and its input ended "
        f"without one; pass --yes to {command} without asking. Nothing submitted.\n"
    )
    return NO_ANSWER_STATUS


def _decide(
    authority: ApprovalAuthority, args: argparse.Namespace, stdin: TextIO, stdout: TextIO
) -> int:
    stored = authority.get_stored_request(args.request_id)
    if stored is None:
        raise UnknownRequestError("/request_id")
    requested = authority.vouched_request(stored)
    request = requested.request
    recorded = authority.get_resolution(request.id)
    if recorded is not None:
        stdout.write(f"already resolved: {recorded.resolution.outcome}\n")
        return 1
    decision: DecisionKind = "approve" if args.command == "approve" else "deny"
    scope: Scope = getattr(args, "scope", "once")
    choice = request.offers(decision, scope)
    stdout.write(render.request_details(request) + "\n\n")
    if choice is None:
        stdout.write(f"error: {decision}/{scope} is not offered for this request\n")
        return 2
    if choice.scope_constraints:
        stdout.write(f"{decision}/{scope} will also cover:\n")
        for line in explain_constraints(choice.scope_constraints):
            stdout.write(f"  - {render.escape(line)}\n")
    confirmed = _confirm(f"{decision} {request.id} as {scope}?", args.yes, stdin, stdout)
    if confirmed is None:
        return _no_answer(args.command, stdout)
    if not confirmed:
        stdout.write("nothing submitted\n")
        return 1
    actor = _actor()
    decided = build_decision(requested, decision=decision, scope=scope, actor=actor.actor)
    resolved = AnswerPlanner(authority).record_decision(decided, actor, stored=stored).resolution
    stdout.write(f"{resolved.outcome}: {resolved.message}\n")
    return 0 if resolved.outcome in ("approved", "denied", "cancelled") else 1


def _executions(authority: ApprovalAuthority, args: argparse.Namespace, stdout: TextIO) -> int:
    """List unknown outcomes, or reconcile one (the runtime's record; AAIS is unchanged)."""
    if args.command == "unknown":
        unknown = authority.unknown_executions()
        for entry in unknown:
            stdout.write(render.unknown_line(entry) + "\n")
        stdout.write(f"{len(unknown)} outcome unknown\n")
        return 0
    outcome: Literal["done", "retry"] = "done" if args.done else "retry"
    settled = reconcile_execution(authority, args.request_id, outcome, actor=_actor())
    if settled is None:
        stdout.write("nothing to reconcile: no unknown outcome with that id\n")
        return 1
    follow = (
        "its run continues without running it again"
        if outcome == "done"
        else "its run asks again with a fresh request"
    )
    stdout.write(f"{outcome}: {follow} when it is next resumed\n")
    return 0


def _run(
    authority: ApprovalAuthority, args: argparse.Namespace, stdin: TextIO, stdout: TextIO
) -> int:
    if args.command == "init":
        stdout.write("ledger ready\n")
        return 0
    if args.command == "pending":
        problems = _reconcile(authority, args.checkpoints or args.db, args.checkpoints is None)
        suspect = {problem.request_id for problem in problems}
        pending = [r for r in authority.snapshot().snapshot.pending if r.id not in suspect]
        for request in pending:
            stdout.write(render.request_line(request) + "\n")
        for problem in problems:
            stdout.write(
                f"INTEGRITY {render.escape(problem.thread_id)} "
                f"{render.escape(problem.request_id)}: {problem.reason}\n"
            )
        stdout.write(f"{len(pending)} pending\n")
        resuming = waiting_resumes(authority)
        for work in resuming:
            stdout.write(render.resuming_line(work) + "\n")
        if resuming:
            stdout.write(
                f"{len(resuming)} answered, waiting to resume "
                "(any process serving the graph resumes them)\n"
            )
        unknown = authority.unknown_executions()
        if unknown:
            stdout.write(
                f"{len(unknown)} approved with outcome unknown "
                "(aais-langgraph unknown; reconcile ID --done|--retry)\n"
            )
        return 1 if problems else 0
    if args.command in ("unknown", "reconcile"):
        return _executions(authority, args, stdout)
    if args.command == "webhooks":
        return webhooks.run(authority, args, stdout)
    if args.command == "show":
        requested = authority.get_request(args.request_id)
        if requested is None:
            raise UnknownRequestError("/request_id")
        stdout.write(render.request_details(requested.request) + "\n")
        recorded = authority.get_resolution(args.request_id)
        state = "pending" if recorded is None else recorded.resolution.outcome
        stdout.write(f"status    {state}\n")
        execution = authority.execution(args.request_id)
        if execution is not None:
            stdout.write(f"execution {execution.state}\n")
        for work in waiting_resumes(authority, request_id=args.request_id):
            stdout.write(f"resume    {render.resume_state(work)}\n")
        for line in webhooks.follow_up_history(authority, args.request_id):
            stdout.write(f"{line}\n")
        return 0
    if args.command in ("approve", "deny"):
        return _decide(authority, args, stdin, stdout)
    if args.command == "cancel":
        confirmed = _confirm(f"cancel {args.request_id}?", args.yes, stdin, stdout)
        if confirmed is None:
            return _no_answer(args.command, stdout)
        if not confirmed:
            stdout.write("nothing submitted\n")
            return 1
        cancellation = Cancellation(args.request_id)
        resolved = AnswerPlanner(authority).record_cancel(cancellation, _actor()).resolution
        stdout.write(f"{resolved.outcome}: {resolved.message}\n")
        return 0
    if args.command == "grants":
        for grant in authority.list_grants(include_revoked=True):
            stdout.write(render.grant_line(grant) + "\n")
        return 0
    if args.command == "revoke":
        revoked = authority.revoke_grant(args.grant_id, actor=_actor())
        stdout.write("revoked\n" if revoked else "no live grant with that id\n")
        return 0 if revoked else 1
    if args.command == "expire":
        expired = authority.expire_due()
        stdout.write(f"{len(expired)} expired\n")
        return 0
    if args.command == "compact":
        return compact.run(authority, args, stdout)
    if args.audit_command == "publish":
        return witness.publish(authority, args.witness, stdout)
    if args.audit_command == "verify":
        result = authority.verify_audit(expected_tip=args.expect_tip)
        stdout.write(_verification_line(result) + "\n")
        if not result.ok:
            return 1
        return witness.verify(authority, args.witness, stdout)
    for entry in authority.ledger.audit_entries():
        record = {
            "index": entry.index,
            "kind": entry.kind,
            "occurred_at": entry.occurred_at,
            "payload": entry.payload,
            "prev_hash": entry.prev_hash,
            "hash": entry.entry_hash,
        }
        stdout.write(json.dumps(record, ensure_ascii=True, sort_keys=True) + "\n")
    return 0


CLOSED_PIPE_STATUS = 141
"""The exit status when the reader of the output went away (``| head``): 128 + SIGPIPE,
what the shell reports for a Unix tool that stopped on it."""


def main(
    argv: Sequence[str] | None = None, *, stdin: TextIO | None = None, stdout: TextIO | None = None
) -> int:
    """Run the CLI; returns the exit status (0 ok, 1 refused or failed check, 2 bad input
    or no usable ledger; ``audit verify --witness``: 3 a rollback, 4 a fork; 141 the
    reader of the output went away). Errors are one line on ``stdout``, never a
    traceback; bad arguments are argparse's usage error (exit status 2)."""
    try:
        return _main(argv, stdin, stdout)
    except BrokenPipeError:
        if stdout is None:
            _discard_stdout()
        return CLOSED_PIPE_STATUS


def _discard_stdout() -> None:
    """Point the process's stdout at the null device, so the interpreter's last flush of
    what the gone reader did not take raises nothing either."""
    try:
        descriptor = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, descriptor)
    os.close(null)


def _main(argv: Sequence[str] | None, stdin: TextIO | None, stdout: TextIO | None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    args.db = chosen_db(args)
    if args.db is None:
        parser.error(f"no ledger: give --db PATH|URL or set {DB_ENV}")
    if args.command == "presenter":  # NDJSON on stdout: its errors go to stderr
        with decision_channel("stdio"):
            return presenter.main(args, actor=_actor(), stdin=stdin, stdout=stdout)
    out = stdout if stdout is not None else sys.stdout
    try:
        policy = getattr(args, "access_policy", None)
        plan, failed = webhooks.plan_from_policy(policy, out)
        if failed is not None:
            return failed
        create = args.command == "init"
        with (
            open_ledger(args.db, create=create, delivery_plan=plan) as ledger,
            decision_channel("cli"),
        ):
            return _run(ApprovalAuthority(ledger), args, stdin or sys.stdin, out)
    except Exception as error:
        status = report_failure(error, out)
        if status is None:
            raise
        return status

"""``aais-langgraph`` command line: inspect and answer approvals in a ledger.

Every command takes ``--db PATH|URL`` (a SQLite file or a Postgres URL, the same
value the demo and server take). A decision made here is recorded by the
authority like any presenter's; a running server notices it and resumes the run.
"""

from __future__ import annotations

import argparse
import getpass
import json
import sys
from collections.abc import Sequence
from typing import Literal, TextIO

from ..authority import ApprovalAuthority, UnknownRequestError, explain_constraints
from ..gate.execution import reconcile_execution
from ..ledger import open_ledger
from ..protocol import AAISValidationError, Actor, DecisionKind, Scope, build_decision, id_for
from . import render

__all__ = ["main"]


def _actor() -> Actor:
    """The CLI's authenticated channel is the operating-system account running it."""
    return Actor(
        id=id_for(getpass.getuser() or "unknown"), type="human", authenticated_by="os-user"
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="aais-langgraph", description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, help="SQLite file path or postgresql:// URL")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("pending", help="list pending approvals")
    for name in ("show", "deny", "cancel"):
        sub = commands.add_parser(name, help=f"{name} a request")
        sub.add_argument("request_id")
        if name != "show":
            sub.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    approve = commands.add_parser("approve", help="approve a request")
    approve.add_argument("request_id")
    approve.add_argument("--scope", choices=("once", "session", "persistent"), default="once")
    approve.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    commands.add_parser("unknown", help="list approved actions whose outcome is unknown")
    reconcile = commands.add_parser(
        "reconcile", help="settle an unknown outcome: --done (it happened) or --retry"
    )
    reconcile.add_argument("request_id")
    settled = reconcile.add_mutually_exclusive_group(required=True)
    settled.add_argument("--done", action="store_true", help="it took effect; do not run it again")
    settled.add_argument(
        "--retry", action="store_true", help="ask again: the run raises a fresh request"
    )
    commands.add_parser("grants", help="list grants")
    revoke = commands.add_parser("revoke", help="revoke a grant")
    revoke.add_argument("grant_id")
    commands.add_parser("expire", help="resolve overdue requests as expired")
    audit = commands.add_parser("audit", help="audit log")
    audit.add_argument("audit_command", choices=("verify", "export"))
    return parser


def _confirm(question: str, assume_yes: bool, stdin: TextIO, stdout: TextIO) -> bool:
    if assume_yes:
        return True
    stdout.write(f"{question} [y/N] ")
    stdout.flush()
    return stdin.readline().strip().lower() in ("y", "yes")


def _decide(
    authority: ApprovalAuthority, args: argparse.Namespace, stdin: TextIO, stdout: TextIO
) -> int:
    requested = authority.get_request(args.request_id)
    if requested is None:
        raise UnknownRequestError("/request_id")
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
    if not _confirm(f"{decision} {request.id} as {scope}?", args.yes, stdin, stdout):
        stdout.write("nothing submitted\n")
        return 1
    actor = _actor()
    decided = build_decision(requested, decision=decision, scope=scope, actor=actor)
    resolved = authority.decide(decided, actor=actor).resolution
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
    settled = reconcile_execution(authority, args.request_id, outcome, actor=_actor().id)
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
    if args.command == "pending":
        pending = authority.snapshot().snapshot.pending
        for request in pending:
            stdout.write(render.request_line(request) + "\n")
        stdout.write(f"{len(pending)} pending\n")
        unknown = authority.unknown_executions()
        if unknown:
            stdout.write(
                f"{len(unknown)} approved with outcome unknown "
                "(aais-langgraph unknown; reconcile ID --done|--retry)\n"
            )
        return 0
    if args.command in ("unknown", "reconcile"):
        return _executions(authority, args, stdout)
    if args.command == "show":
        requested = authority.get_request(args.request_id)
        if requested is None:
            raise UnknownRequestError("/request_id")
        stdout.write(render.request_details(requested.request) + "\n")
        recorded = authority.get_resolution(args.request_id)
        state = "pending" if recorded is None else recorded.resolution.outcome
        stdout.write(f"status    {state}\n")
        execution = authority.ledger.get_execution(args.request_id)
        if execution is not None:
            stdout.write(f"execution {execution.state}\n")
        return 0
    if args.command in ("approve", "deny"):
        return _decide(authority, args, stdin, stdout)
    if args.command == "cancel":
        if not _confirm(f"cancel {args.request_id}?", args.yes, stdin, stdout):
            return 1
        resolved = authority.cancel(args.request_id).resolution
        stdout.write(f"{resolved.outcome}: {resolved.message}\n")
        return 0
    if args.command == "grants":
        for grant in authority.list_grants(include_revoked=True):
            stdout.write(render.grant_line(grant) + "\n")
        return 0
    if args.command == "revoke":
        revoked = authority.revoke_grant(args.grant_id)
        stdout.write("revoked\n" if revoked else "no live grant with that id\n")
        return 0 if revoked else 1
    if args.command == "expire":
        expired = authority.expire_due()
        stdout.write(f"{len(expired)} expired\n")
        return 0
    if args.audit_command == "verify":
        result = authority.verify_audit()
        if result.ok:
            stdout.write(f"audit ok: {result.checked} entries\n")
            return 0
        stdout.write(f"audit FAILED at entry {result.first_bad_index}: {result.reason}\n")
        return 1
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


def main(
    argv: Sequence[str] | None = None, *, stdin: TextIO | None = None, stdout: TextIO | None = None
) -> int:
    """Run the CLI; returns the exit status (0 ok, 1 refused or failed check, 2 bad input)."""
    args = _parser().parse_args(argv)
    out = stdout if stdout is not None else sys.stdout
    try:
        with open_ledger(args.db) as ledger:
            return _run(ApprovalAuthority(ledger), args, stdin or sys.stdin, out)
    except AAISValidationError as error:
        out.write(f"error: {error}\n")
        return 2

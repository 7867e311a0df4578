"""``aais-langgraph --db … presenter``: the AAIS NDJSON stdio presenter profile.

docs/integration.md ("NDJSON stdio profile"): one complete envelope per line on
stdout, decision envelopes on stdin, diagnostics on stderr only.

- stdout, the authority's stream (``stream`` = ``aais-langgraph.authority``, SPEC §3:
  durable bindings carry ``stream``): an ``approval.snapshot`` first, then every event
  after its ``as_of_sequence`` in sequence order (SPEC §4.4), followed in the ledger
  as the SSE profile does. Should events be compacted away before they are read, a
  fresh snapshot replaces the pending set.
- stdin: ``approval.decided`` lines, read as strict I-JSON and at most
  ``--max-line-bytes`` (default 1,000,000, as HTTP bodies). The actor is the
  operating-system user, as in the CLI; it replaces the body's actor (SPEC §10).
- stdout, this session's reply stream (``stream`` = ``aais-langgraph.stdio_<hex>``,
  its own sequences from 1): exactly one line per non-blank input line, in input
  order — the ``approval.resolved`` for a decision (any outcome: ``conflict``,
  ``stale``, ``invalid`` included; its ``resolution.request_id`` and, when it has
  one, ``decision_id`` name the decision, and the envelope's
  ``aais-langgraph.org/in_reply_to`` extension gives ``{"line": N, "decision_id"}``),
  or an error object ``{"error": {"code", "pointer", "message", "line"}}`` for a line
  that is not a decision of a known request; an error changes nothing. Edited
  arguments inside a decision are an unknown field, refused (SPEC §4.2: an edit
  is a new request).

A recorded decision also appears on the authority's stream (``approval.decided``,
``approval.resolved`` with the same ``resolution.id``). The presenter only records
decisions: a served app (``watch_decisions=True``) or ``resume_stranded`` resumes the
paused run, as after ``aais-langgraph approve``. The end of stdin (after the events
recorded so far are written), SIGINT, SIGTERM and a closed stdout end it with exit
status 0.
"""

from __future__ import annotations

import argparse
import os
import select
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from ..authority import (
    ApprovalAuthority,
    EventFollower,
    ForbiddenError,
    LedgerIntegrityError,
    Principal,
    ReplyStream,
    UnknownRequestError,
)
from ..ledger import open_ledger
from ..protocol import (
    DEFAULT_MAX_BYTES,
    AAISValidationError,
    Actor,
    ApprovalDecided,
    parse_envelope,
)
from ..protocol.extensions import IN_REPLY_TO_EXTENSION
from ..protocol.refusals import INVALID_ENVELOPE, LEDGER_INTEGRITY, LINE_TOO_LARGE, UNKNOWN_REQUEST
from ..threads import AnswerPlanner
from .failures import report_failure
from .ndjson import LineFrames, encode_line, error_line
from .render import escape

__all__ = ["IN_REPLY_TO", "StdioPresenter", "add_parser", "main"]

IN_REPLY_TO = IN_REPLY_TO_EXTENSION
"""Envelope extension of a reply: ``{"line": N, "decision_id": ID}`` of the decision."""

_CHUNK = 65536


class _OutputClosed(Exception):
    """The reader closed stdout: nobody is listening any more."""


class StdioPresenter:
    """One presenter session over a ledger: the snapshot, the events, the replies.

    Args:
        authority: the authority whose stream is written and which records the decisions.
        actor: the operating-system user, recorded as every decision's actor.
        output: where envelopes and replies go (stdout).
        diagnostics: where notes go (stderr).
        max_line_bytes: the longest input line accepted.
        stream: the authority stream followed (default: the authority's).
    """

    def __init__(
        self,
        authority: ApprovalAuthority,
        *,
        actor: Actor | Principal,
        output: TextIO,
        diagnostics: TextIO,
        max_line_bytes: int = DEFAULT_MAX_BYTES,
        stream: str | None = None,
    ) -> None:
        self.authority = authority
        self.planner = AnswerPlanner(authority)  # the one answer path, as every binding's
        self.actor = actor
        self.output = output
        self.diagnostics = diagnostics
        self.max_line_bytes = max_line_bytes
        self.stream = stream if stream is not None else authority.stream
        self.replies = ReplyStream("aais-langgraph.stdio")
        self.reply_stream = self.replies.stream
        self._lines = 0
        self._follower: EventFollower | None = None

    # -- the authority's stream --------------------------------------------------------

    def snapshot(self) -> None:
        """Write a snapshot and follow the events after its ``as_of_sequence``."""
        current = self.authority.snapshot(stream=self.stream)
        self._write(current.to_json())
        after = current.snapshot.as_of_sequence
        self._follower = EventFollower(self.authority, after, stream=self.stream)

    def follow(self) -> None:
        """Write every event recorded since the last one written."""
        if self._follower is None:
            self.snapshot()
        while self._follower is not None:
            page = self._follower.read()
            if page.gap:
                self.note("events were compacted before they were read: a fresh snapshot")
                self.snapshot()
                continue
            for envelope in page.events:
                self._write(envelope)
            if not self._follower.full:
                return

    # -- decisions ---------------------------------------------------------------------

    def answer(self, line: bytes | None) -> None:
        """Judge one input line (``None``: oversized) and write its one reply line."""
        self._lines += 1
        if line is not None and not line.strip():
            return
        reply = self._reply(line, self._lines)
        self._write(reply)
        if "error" in reply:
            self.note(
                f"line {self._lines}: {reply['error']['code']} at "
                f"{escape(reply['error']['pointer'] or '/')}"  # keys may hold control characters
            )
        else:
            resolution = reply["resolution"]
            self.note(f"line {self._lines}: {resolution['outcome']} {resolution['request_id']}")

    def _reply(self, line: bytes | None, number: int) -> dict[str, Any]:
        if line is None:
            return error_line(
                LINE_TOO_LARGE,
                "",
                f"/: lines are limited to {self.max_line_bytes} bytes",
                line=number,
            )
        try:
            decided = parse_envelope(line, expected=ApprovalDecided, max_bytes=self.max_line_bytes)
            resolved = self.planner.record_decision(decided, self.actor)
        except UnknownRequestError as error:
            return error_line(UNKNOWN_REQUEST, error.pointer, str(error), line=number)
        except AAISValidationError as error:
            return error_line(INVALID_ENVELOPE, error.pointer, str(error), line=number)
        except LedgerIntegrityError as error:
            return error_line(LEDGER_INTEGRITY, "", str(error), line=number)
        except ForbiddenError as error:
            return error_line(error.code, "/decision", error.reason, line=number)
        return self.replies.reply(resolved, {"line": number, "decision_id": decided.decision.id})

    # -- the loop ----------------------------------------------------------------------

    def run(
        self, input_fd: int, *, poll_interval: float = 0.2, stop: Callable[[], bool] = lambda: False
    ) -> int:
        """Serve until stdin ends, ``stop()`` turns true or stdout closes; exit status 0."""
        frames = LineFrames(self.max_line_bytes)
        try:
            self.snapshot()
            while not stop():
                self.follow()
                readable, _, _ = select.select([input_fd], [], [], poll_interval)
                if not readable:
                    continue
                data = os.read(input_fd, _CHUNK)
                for line in frames.feed(data) if data else frames.finish():
                    self.answer(line)
                if not data:
                    self.follow()
                    self.note("stdin closed: done")
                    return 0
            self.note("stopped by a signal")
        except _OutputClosed:
            self.note("stdout closed: done")
        return 0

    def _write(self, document: dict[str, Any]) -> None:
        try:
            self.output.write(encode_line(document))
            self.output.flush()
        except BrokenPipeError:
            raise _OutputClosed from None

    def note(self, text: str) -> None:
        self.diagnostics.write(f"presenter: {text}\n")
        self.diagnostics.flush()


def add_parser(commands: Any) -> None:
    """Register the ``presenter`` subcommand on the CLI's subparsers."""
    sub = commands.add_parser(
        "presenter", help="AAIS NDJSON stdio presenter: envelopes out, decisions in"
    )
    sub.add_argument(
        "--max-line-bytes",
        type=_positive,
        default=DEFAULT_MAX_BYTES,
        metavar="N",
        help="longest accepted input line (default: 1000000, as HTTP bodies)",
    )
    sub.add_argument(
        "--poll-interval",
        type=float,
        default=0.2,
        metavar="SECONDS",
        help="how often the ledger is read for new events",
    )


def _positive(text: str) -> int:
    if not text.isascii() or not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError("expected a positive integer")
    return int(text)


@contextmanager
def _stop_on_signals() -> Iterator[Callable[[], bool]]:
    """SIGINT and SIGTERM end the session between lines (main thread only)."""
    stopped = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stopped.is_set
        return
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in previous:
        signal.signal(sig, lambda *_: stopped.set())
    try:
        yield stopped.is_set
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def main(
    args: argparse.Namespace,
    *,
    actor: Actor | Principal,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Run the presenter on ``args.db``; errors are one line on stderr (stdout stays NDJSON):
    exit status 2 for no usable ledger or stdin, 1 for a ledger that fails its checks.

    Args:
        args: the parsed command line (``db``, ``max_line_bytes``, ``poll_interval``).
        actor: who decides: the operating-system user.
        stdin: the decisions (default: ``sys.stdin``; it must have a file descriptor).
        stdout: the NDJSON output (default: ``sys.stdout``).
        stderr: diagnostics (default: ``sys.stderr``).
    """
    output = stdout if stdout is not None else sys.stdout
    diagnostics = stderr if stderr is not None else sys.stderr
    try:
        input_fd = (stdin if stdin is not None else sys.stdin).fileno()
    except (AttributeError, OSError, ValueError):
        diagnostics.write("error: stdin: the presenter reads a file descriptor\n")
        return 2
    try:
        with open_ledger(args.db, create=False) as ledger, _stop_on_signals() as stop:
            presenter = StdioPresenter(
                ApprovalAuthority(ledger),
                actor=actor,
                output=output,
                diagnostics=diagnostics,
                max_line_bytes=args.max_line_bytes,
            )
            presenter.note(
                f"ready; decisions are recorded as {actor.id}; "
                f"replies on stream {presenter.reply_stream}"
            )
            return presenter.run(input_fd, poll_interval=args.poll_interval, stop=stop)
    except Exception as error:
        status = report_failure(error, diagnostics)
        if status is None:
            raise
        return status

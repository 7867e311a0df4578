"""Durable resume work: a thread that must be resumed with a resolution the ledger recorded.

An answer recorded from outside a run (a presenter, the CLI, a sweep, a cancel)
leaves the thread paused on its request until something resumes it. So that no
crash between recording and resuming can lose that, the ledger writes "this
thread must be resumed" in the same transaction as the resolution: one row per
resolved request of a thread, in the runtime's own table ``aais_resume_work``
(AAIS says nothing about resuming; SPEC §4.3 leaves execution to the runtime):

- ``due``: the thread may still be paused on the request; any process serving
  the graph picks it up once ``next_at`` has passed, takes the thread's run
  lease and resumes it; a failed attempt counts in ``attempts``, names its
  ``last_error`` (an error type or a rule, never a value) and backs off;
- ``done``: the thread no longer waits on the request (it was resumed, or it
  moved on);
- ``unknown``: resuming ran into an execution of unknown outcome, which a human
  reconciles (:mod:`.executions`; reconciling hands it back as ``due``), or the
  thread never paused on the request however often it was tried (``last_error``
  names why): listed for a human, never due for ever.

The transitions are pure functions; a backend reads the row, applies one under
its write lock and stores the result (:meth:`Ledger.update_resume_work`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

__all__ = [
    "POSTGRES_RESUME_WORK_SCHEMA",
    "RESUME_WORK_COLUMNS",
    "SQLITE_RESUME_WORK_SCHEMA",
    "UPSERT_RESUME_WORK",
    "ResumeWork",
    "ResumeWorkChange",
    "ResumeWorkState",
    "attempt_change",
    "backoff",
    "due_change",
    "new_resume_work",
    "resume_work_from_row",
    "resume_work_row",
    "settle_change",
]

ResumeWorkState = Literal["due", "done", "unknown"]
ResumeWorkChange = Callable[["ResumeWork | None"], "ResumeWork | None"]
"""Given the stored row (or None), the row to store (None or the same: no change)."""

MAX_BACKOFF = 30.0
"""The longest a failing resume waits before its next attempt (seconds)."""


@dataclass(frozen=True)
class ResumeWork:
    """One resolved request whose thread must be resumed with the recorded resolution."""

    request_id: str
    thread_id: str
    state: ResumeWorkState
    since: float
    """When the resolution was recorded (epoch seconds)."""
    attempts: int
    """Resume attempts that failed so far."""
    next_at: float
    """Not picked up before this moment (epoch seconds)."""
    last_error: str | None
    updated_at: float

    def due(self, now: float) -> bool:
        """True when a process serving the graph should try to resume it now."""
        return self.state == "due" and self.next_at <= now

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict of the row (what listings show)."""
        return {
            "request_id": self.request_id,
            "thread_id": self.thread_id,
            "state": self.state,
            "since": self.since,
            "attempts": self.attempts,
            "next_at": self.next_at,
            "last_error": self.last_error,
            "updated_at": self.updated_at,
        }


def new_resume_work(request_id: str, thread_id: str, now: float) -> ResumeWork:
    """The row a resolution write records: due at once."""
    return ResumeWork(request_id, thread_id, "due", now, 0, now, None, now)


def backoff(attempts: int) -> float:
    """Seconds before attempt ``attempts + 1``: 0.5 s doubling, at most :data:`MAX_BACKOFF`."""
    return float(min(0.5 * 2 ** min(attempts, 16), MAX_BACKOFF))


def attempt_change(error: str, now: float, *, retry_at: float | None = None) -> ResumeWorkChange:
    """A resume attempt failed with ``error``: count it and back off (sooner when
    ``retry_at``, e.g. the moment a held lease expires, comes first)."""

    def change(current: ResumeWork | None) -> ResumeWork | None:
        if current is None or current.state != "due":
            return current
        wait_until = now + backoff(current.attempts)
        if retry_at is not None:
            wait_until = min(wait_until, max(retry_at, now))
        return replace(
            current,
            attempts=current.attempts + 1,
            next_at=wait_until,
            last_error=error[:500],
            updated_at=now,
        )

    return change


def settle_change(
    state: Literal["done", "unknown"], now: float, *, reason: str | None = None
) -> ResumeWorkChange:
    """The thread no longer waits on the request (``done``), or a human must look first
    (``unknown``: its execution's outcome is unknown, or ``reason`` names why resuming
    cannot finish; ``reason`` is kept as its ``last_error``)."""

    def change(current: ResumeWork | None) -> ResumeWork | None:
        if current is None or current.state == state or current.state == "done":
            return current
        error = current.last_error if reason is None else reason[:500]
        return replace(current, state=state, updated_at=now, last_error=error)

    return change


def due_change(now: float) -> ResumeWorkChange:
    """Hand ``unknown`` work back (a human reconciled the execution): due at once."""

    def change(current: ResumeWork | None) -> ResumeWork | None:
        if current is None or current.state != "unknown":
            return current
        return replace(current, state="due", next_at=now, updated_at=now)

    return change


RESUME_WORK_COLUMNS = (
    "request_id, thread_id, state, since, attempts, next_at, last_error, updated_at"
)

UPSERT_RESUME_WORK = (
    f"INSERT INTO aais_resume_work ({RESUME_WORK_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (request_id) DO UPDATE SET thread_id = excluded.thread_id, "
    "state = excluded.state, since = excluded.since, attempts = excluded.attempts, "
    "next_at = excluded.next_at, last_error = excluded.last_error, "
    "updated_at = excluded.updated_at"
)
"""Store a row, replacing the request's previous one (``?`` marks; both SQL backends)."""

_STATES = "('due', 'done', 'unknown')"

SQLITE_RESUME_WORK_SCHEMA = (
    f"""CREATE TABLE IF NOT EXISTS aais_resume_work (
        request_id TEXT PRIMARY KEY,
        thread_id TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN {_STATES}),
        since REAL NOT NULL,
        attempts INTEGER NOT NULL,
        next_at REAL NOT NULL,
        last_error TEXT,
        updated_at REAL NOT NULL
    ) WITHOUT ROWID""",
    # Only open work is indexed: picking up due work costs what waits, not the history.
    "CREATE INDEX IF NOT EXISTS aais_resume_work_open ON aais_resume_work "
    "(next_at, request_id) WHERE state <> 'done'",
)
"""The SQLite table (created by ``setup()``; an older ledger file gains it there)."""

POSTGRES_RESUME_WORK_SCHEMA = (
    f"""CREATE TABLE IF NOT EXISTS aais_resume_work (
        request_id TEXT PRIMARY KEY,
        thread_id TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN {_STATES}),
        since DOUBLE PRECISION NOT NULL,
        attempts INTEGER NOT NULL,
        next_at DOUBLE PRECISION NOT NULL,
        last_error TEXT,
        updated_at DOUBLE PRECISION NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS aais_resume_work_open ON aais_resume_work "
    "(next_at, request_id) WHERE state <> 'done'",
)
"""The Postgres table (created by ``setup()``; an older schema gains it there)."""


def resume_work_from_row(row: tuple[Any, ...]) -> ResumeWork:
    """A row of :data:`RESUME_WORK_COLUMNS` as a record."""
    request_id, thread_id, state, since, attempts, next_at, last_error, updated_at = row
    return ResumeWork(
        request_id,
        thread_id,
        state,
        float(since),
        int(attempts),
        float(next_at),
        last_error,
        float(updated_at),
    )


def resume_work_row(work: ResumeWork) -> tuple[Any, ...]:
    """The values of :data:`RESUME_WORK_COLUMNS` for ``work``."""
    return (
        work.request_id,
        work.thread_id,
        work.state,
        work.since,
        work.attempts,
        work.next_at,
        work.last_error,
        work.updated_at,
    )

"""Durable resume work: a thread that must be resumed with a resolution the ledger recorded.

An answer recorded from outside a run (a presenter, the CLI, a sweep, a cancel)
leaves the thread paused on its request until something resumes it. So that no
crash between recording and resuming can lose that, the ledger writes "this
thread must be resumed" in the same transaction as the resolution: one outbox row
(:mod:`.outbox`) of kind :data:`~.outbox.RESUME` per resolved request of a thread,
its id the request's:

- ``due``: the thread may still be paused on the request; any process serving
  the graph picks it up once ``next_at`` has passed, takes the thread's run
  lease and resumes it; a failed attempt counts and backs off
  (:data:`RESUME_BACKOFF`);
- ``done``: the thread no longer waits on the request (it was resumed, or it
  moved on);
- ``unknown``: resuming ran into an execution of unknown outcome, which a human
  reconciles (:mod:`.executions`; reconciling reopens it as ``due``), or the
  thread never paused on the request however often it was tried (``last_error``
  names why): listed for a human, never due for ever.
"""

from __future__ import annotations

from typing import Literal

from .outbox import RESUME, Backoff, Work, new_work

__all__ = ["RESUME_BACKOFF", "ResumeWork", "ResumeWorkState", "new_resume_work"]

ResumeWork = Work
"""A resume-work row: an outbox row of kind :data:`~.outbox.RESUME`."""
ResumeWorkState = Literal["due", "done", "unknown"]
"""The states resume work takes."""

RESUME_BACKOFF = Backoff(first=0.5, most=30.0)
"""A failing resume waits 0.5 s, doubling, at most 30 s before its next attempt."""


def new_resume_work(request_id: str, thread_id: str, now: float) -> Work:
    """The row a resolution write records: due at once."""
    return new_work(RESUME, request_id, request_id, now, thread_id=thread_id)

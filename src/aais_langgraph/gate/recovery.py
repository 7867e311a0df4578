"""After a crash: find runs whose approval was decided but that never resumed, and resume them.

A replica that dies after the authority recorded a resolution, but before the run
it belongs to finished, leaves the thread paused on an interrupt whose request is
no longer pending: :func:`~aais_langgraph.gate.pending_approvals` does not list it
(nobody has to decide anything), yet nothing drives it on. The presenter retrying
its decision unsticks it (an identical decision replays the recorded resolution),
and so does :func:`resume_stranded`, which a replica can run at start-up or on a
timer. The approved action runs at most once: a crash after the gate claimed its
execution (during the action) makes the re-run raise
:class:`~aais_langgraph.gate.ExecutionUnknownError` rather than run it again, and
the thread stays paused until a human reconciles it (:mod:`.execution`); an action
declared idempotent runs again instead.
"""

from __future__ import annotations

from typing import Any

from ..authority import DEFAULT_LEASE_TTL, ApprovalAuthority, LeaseHeldError
from ..protocol import ApprovalResolved
from .inbox import _thread_config, resume_resolved
from .response import RejectedResumeError
from .resume import pending_interrupt_ids

_PAGE = 1000


def stranded_threads(
    graph: Any, authority: ApprovalAuthority, *, after_sequence: int = 0
) -> dict[str, list[str]]:
    """Threads paused on requests that already have a resolution: thread id -> request ids.

    Approvals whose execution outcome is unknown are left out until a human
    reconciles them (:func:`~aais_langgraph.gate.unknown_executions`).

    Reads the ``approval.resolved`` events after ``after_sequence`` (0: all the
    ledger keeps; pass the sequence a previous sweep ended at to look only at what
    is new) and one ``get_state`` per thread they name.
    """
    resolved_by_thread: dict[str, set[str]] = {}
    sequence = after_sequence
    while True:
        page = authority.events_after(sequence, limit=_PAGE)
        for event in page.events:
            if event.get("type") != "approval.resolved":
                continue
            request_id = str(event["resolution"]["request_id"])
            stored = authority.get_stored_request(request_id)
            if stored is not None and stored.thread_id is not None:
                resolved_by_thread.setdefault(stored.thread_id, set()).add(request_id)
        if not page.events:
            break
        sequence = int(page.events[-1]["sequence"])
        if sequence >= page.last_sequence:
            break
    stranded: dict[str, list[str]] = {}
    for thread_id, request_ids in sorted(resolved_by_thread.items()):
        waiting = pending_interrupt_ids(graph.get_state(_thread_config(thread_id)).interrupts)
        answered = request_ids.intersection(waiting)
        hit = sorted(rid for rid in answered if not _unknown(authority, rid))
        if hit:
            stranded[thread_id] = hit
    return stranded


def _unknown(authority: ApprovalAuthority, request_id: str) -> bool:
    """An approval whose outcome is unknown waits for a human, not for a resume."""
    record = authority.ledger.get_execution(request_id)
    return record is not None and record.state == "unknown"


def resume_stranded(
    graph: Any,
    authority: ApprovalAuthority,
    *,
    after_sequence: int = 0,
    context: Any = None,
    lease_ttl: float = DEFAULT_LEASE_TTL,
) -> list[ApprovalResolved]:
    """Resume every thread :func:`stranded_threads` finds with its recorded resolutions.

    Each thread is resumed under its run lease, so a sweep racing a presenter's
    retry resumes it once. A thread whose lease stays held (a live run drives it,
    or a crashed holder's lease has not expired yet), or whose gate refuses the
    resume for now (another run's execution claim on the approval, or an outcome
    that is unknown until a human reconciles it), is left for the next sweep.
    """
    resumed: list[ApprovalResolved] = []
    for thread_id in stranded_threads(graph, authority, after_sequence=after_sequence):
        try:
            resumed += resume_resolved(
                graph, authority, thread_id, context=context, lease_ttl=lease_ttl
            )
        except (LeaseHeldError, RejectedResumeError):
            continue
    return resumed

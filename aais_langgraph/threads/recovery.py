"""After a crash: find runs paused on a request that already has a resolution.

A replica that dies after the authority recorded a resolution, but before the run
it belongs to finished, leaves the thread paused on an interrupt whose request is
no longer pending. The resolution's durable resume work drives it on
(:meth:`~.driver.ThreadDriver.resume_due`); :func:`stranded_threads` finds such
threads from the event stream as well, for
:meth:`~.driver.ThreadDriver.resume_stranded` (ledgers written before resume work
existed, or a sweep at start-up). The approved action runs at most once: a crash
after the gate claimed its execution (during the action) makes the re-run raise
:class:`~aais_langgraph.gate.ExecutionUnknownError` rather than run it again, and
the thread stays paused until a human reconciles it
(:mod:`aais_langgraph.gate.execution`); an action declared idempotent runs again.

:func:`resolved_threads` is the one scan of the event stream for resolutions
(the ``aais_agui`` decision watcher follows the stream with it too).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..authority import ApprovalAuthority
from ..ledger import StoredRequest
from .runs import run_config
from .views import ThreadView, aread_view, read_view

__all__ = [
    "ResolvedScan",
    "aresolved_threads",
    "astranded_threads",
    "resolved_threads",
    "stranded_threads",
]

_PAGE = 500


@dataclass
class ResolvedScan:
    """Threads named by ``approval.resolved`` events, and the last sequence read."""

    after: int
    threads: dict[str, set[str]] = field(default_factory=dict)
    """Thread id -> ids of its requests that resolved in the events read."""

    def add(self, envelope: Mapping[str, Any], stored: StoredRequest | None) -> None:
        """Note one event (``stored``: the request it resolved, if it is a resolution)."""
        self.after = max(self.after, int(envelope["sequence"]))
        if stored is not None and stored.thread_id is not None:
            self.threads.setdefault(stored.thread_id, set()).add(stored.request_id)


def _resolved_id(envelope: Mapping[str, Any]) -> str | None:
    if envelope.get("type") != "approval.resolved":
        return None
    return str(envelope["resolution"]["request_id"])


def resolved_threads(authority: ApprovalAuthority, *, after_sequence: int = 0) -> ResolvedScan:
    """Read every event after ``after_sequence``; collect the threads of resolved requests."""
    scan = ResolvedScan(after_sequence)
    while True:
        page = authority.events_after(scan.after, limit=_PAGE)
        for envelope in page.events:
            request_id = _resolved_id(envelope)
            stored = None if request_id is None else authority.get_stored_request(request_id)
            scan.add(envelope, stored)
        if len(page.events) < _PAGE:
            return scan


async def aresolved_threads(
    authority: ApprovalAuthority, *, after_sequence: int = 0
) -> ResolvedScan:
    """Async twin of :func:`resolved_threads`."""
    scan = ResolvedScan(after_sequence)
    while True:
        page = await authority.aevents_after(scan.after, limit=_PAGE)
        for envelope in page.events:
            request_id = _resolved_id(envelope)
            stored = None if request_id is None else await authority.aget_stored_request(request_id)
            scan.add(envelope, stored)
        if len(page.events) < _PAGE:
            return scan


def _stranded(authority: ApprovalAuthority, request_ids: set[str], view: ThreadView) -> list[str]:
    answered = request_ids.intersection(view.interrupts)
    return sorted(rid for rid in answered if not _unknown(authority, rid))


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
    stranded: dict[str, list[str]] = {}
    scan = resolved_threads(authority, after_sequence=after_sequence)
    for thread_id, request_ids in sorted(scan.threads.items()):
        view = read_view(graph, run_config(None, authority, thread_id=thread_id))
        hit = _stranded(authority, request_ids, view)
        if hit:
            stranded[thread_id] = hit
    return stranded


async def astranded_threads(
    graph: Any, authority: ApprovalAuthority, *, after_sequence: int = 0
) -> dict[str, list[str]]:
    """Async twin of :func:`stranded_threads`."""
    stranded: dict[str, list[str]] = {}
    scan = await aresolved_threads(authority, after_sequence=after_sequence)
    for thread_id, request_ids in sorted(scan.threads.items()):
        view = await aread_view(graph, run_config(None, authority, thread_id=thread_id))
        hit = await asyncio.to_thread(_stranded, authority, request_ids, view)
        if hit:
            stranded[thread_id] = hit
    return stranded


def _unknown(authority: ApprovalAuthority, request_id: str) -> bool:
    """An approval whose outcome is unknown waits for a human, not for a resume."""
    record, _ = authority.ledger.execution_with_entry(request_id)
    return record is not None and record.state == "unknown"

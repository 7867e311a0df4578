"""The cross-thread inbox and housekeeping: what is really waiting, and unsticking runs."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..authority import DEFAULT_LEASE_TTL, ApprovalAuthority
from ..authority.outcomes import snapshot_envelope
from ..ledger import StoredRequest
from ..protocol import ApprovalResolved, ApprovalSnapshot
from .driver import DEFAULT_LEASE_WAIT, ThreadView, adrive, awaiting_among, drive, waiting_among
from .reconcile import (
    INTEGRITY_ERRORS_EXTENSION,
    IntegrityProblem,
    apaused_requests,
    interrupted_by_thread,
    paused_requests,
    problems_in,
)


@dataclass
class _Listing:
    """The ledger's side of a pending listing: what is pending and unexpired, as of when."""

    as_of: int
    moment: datetime
    records: list[StoredRequest]

    @classmethod
    def read(
        cls, authority: ApprovalAuthority, session_id: str | None, now: datetime | None
    ) -> _Listing:
        as_of = authority.ledger.last_sequence()
        moment = now if now is not None else authority.clock()
        records = [
            stored
            for stored in authority.ledger.list_pending(session_id=session_id)
            if moment < authority.expiry_of(stored)
        ]
        return cls(as_of, moment, records)

    def by_id(self) -> dict[str, StoredRequest]:
        return {stored.request_id: stored for stored in self.records}

    def snapshot(
        self,
        authority: ApprovalAuthority,
        session_id: str | None,
        waiting: set[str] | None,
        problems: list[IntegrityProblem],
    ) -> ApprovalSnapshot:
        suspect = {problem.request_id for problem in problems}
        pending = [
            dict(stored.envelope["request"])
            for stored in self.records
            if (waiting is None or stored.request_id in waiting)
            and stored.request_id not in suspect
        ]
        snapshot = snapshot_envelope(
            pending,
            as_of=self.as_of,
            now=self.moment,
            stream=authority.stream,
            unknown_executions=authority.unknown_executions(session_id=session_id),
        )
        if not problems:
            return snapshot
        extensions = {
            **(snapshot.extensions or {}),
            INTEGRITY_ERRORS_EXTENSION: [problem.to_json() for problem in problems],
        }
        return snapshot.model_copy(update={"extensions": extensions})


def pending_approvals(
    authority: ApprovalAuthority,
    graph: Any | None = None,
    *,
    session_id: str | None = None,
    now: datetime | None = None,
    reconcile: bool = True,
) -> ApprovalSnapshot:
    """``approval.snapshot`` of unexpired requests that are pending in the ledger *and*,
    when ``graph`` is given, still waited for by their thread
    (:meth:`~aais_langgraph.gate.driver.ThreadView.waiting`).

    A request whose task is gone (the run finished, or moved on after an edit of
    its state) is left out; one whose task is live is listed even before its
    interrupt is checkpointed. One indexed ledger query for the pending requests
    and one checkpoint read per thread that has any (``get_state`` only for a
    thread whose latest checkpoint lacks the request's interrupt), so this listing
    costs what is pending, not the history. ``now`` defaults to the authority's clock.

    With ``graph`` and ``reconcile`` (the default), the checkpointer is also read
    for runs paused on requests the ledger does not hold, or holds differently
    (an emptied, replaced or edited ledger): they are not listed as pending but
    reported in the snapshot's ``aais-langgraph.org/integrity_errors`` extension
    (``thread_id``, ``request_id``, ``reason``), so no paused approval vanishes
    silently. With ``SqliteSaver`` that is one query over each thread's latest
    checkpoint, whose interrupts also serve the waiting rule; other checkpointers
    are read in full once (cost follows their history); ``reconcile=False`` skips it.
    """
    listing = _Listing.read(authority, session_id, now)
    if graph is None:
        return listing.snapshot(authority, session_id, None, [])
    if not reconcile or graph.checkpointer is None:
        waiting = waiting_among(graph, authority, listing.records)
        return listing.snapshot(authority, session_id, waiting, [])
    # One pass over the checkpointer serves both the reconciliation and the waiting rule.
    paused = paused_requests(graph.checkpointer)
    problems = problems_in(authority, paused, listing.by_id())
    waiting = waiting_among(graph, authority, listing.records, interrupted_by_thread(paused))
    return listing.snapshot(authority, session_id, waiting, problems)


async def apending_approvals(
    authority: ApprovalAuthority,
    graph: Any | None = None,
    *,
    session_id: str | None = None,
    now: datetime | None = None,
    reconcile: bool = True,
) -> ApprovalSnapshot:
    """Async twin of :func:`pending_approvals` (async checkpointers welcome)."""
    listing = await asyncio.to_thread(_Listing.read, authority, session_id, now)
    waiting: set[str] | None = None
    problems: list[IntegrityProblem] = []
    if graph is not None and reconcile and graph.checkpointer is not None:
        paused = await apaused_requests(graph.checkpointer)
        problems = await asyncio.to_thread(problems_in, authority, paused, listing.by_id())
        interrupted = interrupted_by_thread(paused)
        waiting = await awaiting_among(graph, authority, listing.records, interrupted)
    elif graph is not None:
        waiting = await awaiting_among(graph, authority, listing.records)
    return await asyncio.to_thread(listing.snapshot, authority, session_id, waiting, problems)


def _recorded(
    authority: ApprovalAuthority,
) -> Callable[[ThreadView], tuple[dict[str, Any], list[ApprovalResolved]]]:
    """The plan resuming every waiting request that has a recorded resolution with it."""

    def plan(view: ThreadView) -> tuple[dict[str, Any], list[ApprovalResolved]]:
        resume: dict[str, Any] = {}
        results: list[ApprovalResolved] = []
        for request_id, interrupt_id in view.interrupts.items():
            recorded = authority.get_resolution(request_id)
            if recorded is not None:
                resume[interrupt_id] = recorded.to_json()
                results.append(recorded)
        return resume, results

    return plan


def resume_resolved(
    graph: Any,
    authority: ApprovalAuthority,
    thread_id: str,
    *,
    config: Mapping[str, Any] | None = None,
    context: Any = None,
    lease_ttl: float = DEFAULT_LEASE_TTL,
    lease_wait: float = DEFAULT_LEASE_WAIT,
    recorded_only: bool = False,
) -> list[ApprovalResolved]:
    """Resume a thread whose waiting requests were resolved elsewhere (CLI, sweep, cancel,
    a decisions endpoint), each with its recorded resolution; the others stay pending.

    ``config`` is the base run config (``thread_id`` is set from the argument);
    ``recorded_only`` is for servers (see :func:`~aais_langgraph.gate.driver.run_config`).
    """
    return drive(
        graph,
        _with_thread(config, thread_id),
        _recorded(authority),
        authority=authority,
        context=context,
        lease_ttl=lease_ttl,
        lease_wait=lease_wait,
        recorded_only=recorded_only,
    )


async def aresume_resolved(
    graph: Any,
    authority: ApprovalAuthority,
    thread_id: str,
    *,
    config: Mapping[str, Any] | None = None,
    context: Any = None,
    lease_ttl: float = DEFAULT_LEASE_TTL,
    lease_wait: float = DEFAULT_LEASE_WAIT,
    recorded_only: bool = False,
) -> list[ApprovalResolved]:
    """Async twin of :func:`resume_resolved`."""
    return await adrive(
        graph,
        _with_thread(config, thread_id),
        _recorded(authority),
        authority=authority,
        context=context,
        lease_ttl=lease_ttl,
        lease_wait=lease_wait,
        recorded_only=recorded_only,
    )


def _with_thread(config: Mapping[str, Any] | None, thread_id: str) -> dict[str, Any]:
    base: dict[str, Any] = dict(config or {})
    return {**base, "configurable": {**(base.get("configurable") or {}), "thread_id": thread_id}}


def sweep_expired(
    graph: Any, authority: ApprovalAuthority, *, now: datetime | None = None, context: Any = None
) -> list[ApprovalResolved]:
    """Resolve overdue requests ``expired`` and resume their runs so none hangs forever."""
    expired = authority.expire_due(now=now)
    threads = set()
    for resolved in expired:
        record = authority.get_stored_request(resolved.resolution.request_id)
        if record is not None and record.thread_id is not None:
            threads.add(record.thread_id)
    for thread_id in sorted(threads):
        resume_resolved(graph, authority, thread_id, context=context)
    return expired


def cancel_thread(
    graph: Any, authority: ApprovalAuthority, thread_id: str, *, context: Any = None
) -> list[ApprovalResolved]:
    """Cancel every pending request of a thread and let its run continue past them."""
    cancelled = authority.cancel_thread(thread_id)
    if cancelled:
        resume_resolved(graph, authority, thread_id, context=context)
    return cancelled

"""The cross-thread inbox and housekeeping: what is really waiting, and unsticking runs."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.types import Command

from ..authority import DEFAULT_LEASE_TTL, ApprovalAuthority, run_lease
from ..authority.outcomes import snapshot_envelope
from ..ledger import StoredRequest
from ..protocol import ApprovalResolved, ApprovalSnapshot, parse_timestamp
from .reconcile import INTEGRITY_ERRORS_EXTENSION, reconcile_checkpoints
from .resume import pending_interrupt_ids
from .run_context import AUTHORITY_KEY, CLAIM_TTL_KEY, claim_ttl_for_lease


def _thread_config(
    thread_id: str, authority: ApprovalAuthority | None = None, lease_ttl: float | None = None
) -> RunnableConfig:
    configurable: dict[str, Any] = {"thread_id": thread_id}
    if authority is not None:
        # Gates that find their authority in ``configurable`` must find it on resume too.
        configurable[AUTHORITY_KEY] = authority
    if lease_ttl is not None:
        configurable[CLAIM_TTL_KEY] = claim_ttl_for_lease(lease_ttl)
    return {"configurable": configurable}


def _unexpired(stored: StoredRequest, authority: ApprovalAuthority, moment: datetime) -> bool:
    if stored.expires_at is not None:
        return moment.timestamp() < stored.expires_at
    created = parse_timestamp(str(stored.envelope["request"]["created_at"]))
    return moment < created + authority.default_expiry


def pending_approvals(
    authority: ApprovalAuthority,
    graph: Any | None = None,
    *,
    session_id: str | None = None,
    now: datetime | None = None,
    reconcile: bool = True,
) -> ApprovalSnapshot:
    """``approval.snapshot`` of unexpired requests that are pending in the ledger *and*,
    when ``graph`` is given, still paused in its checkpointer.

    A request whose interrupt is gone (the run finished, or moved on after an
    edit of its state) is left out. One indexed ledger query for the pending
    requests and one ``get_state`` per thread that has any, so this listing costs
    what is pending, not the history. ``now`` defaults to the authority's clock.

    With ``graph`` and ``reconcile`` (the default), the checkpointer is also read
    for runs paused on requests the ledger does not hold, or holds differently
    (an emptied, replaced or edited ledger): they are not listed as pending but
    reported in the snapshot's ``aais-langgraph.org/integrity_errors`` extension
    (``thread_id``, ``request_id``, ``reason``), so no paused approval vanishes
    silently. That reads every checkpoint once (cost follows the checkpointer's
    history); ``reconcile=False`` skips it.
    """
    as_of = authority.ledger.last_sequence()
    moment = now if now is not None else authority.clock()
    records = [
        stored
        for stored in authority.ledger.list_pending(session_id=session_id)
        if _unexpired(stored, authority, moment)
    ]
    if graph is not None:
        by_thread: dict[str, set[str]] = defaultdict(set)
        for stored in records:
            if stored.thread_id is not None:
                by_thread[stored.thread_id].add(stored.request_id)
        gone: set[str] = set()
        for thread_id, request_ids in by_thread.items():
            waiting = pending_interrupt_ids(graph.get_state(_thread_config(thread_id)).interrupts)
            gone.update(request_ids.difference(waiting))
        records = [stored for stored in records if stored.request_id not in gone]
    problems = (
        reconcile_checkpoints(authority, graph.checkpointer)
        if graph is not None and reconcile
        else []
    )
    suspect = {problem.request_id for problem in problems}
    pending = [
        dict(stored.envelope["request"]) for stored in records if stored.request_id not in suspect
    ]
    snapshot = snapshot_envelope(
        pending,
        as_of=as_of,
        now=moment,
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


def resume_resolved(
    graph: Any,
    authority: ApprovalAuthority,
    thread_id: str,
    *,
    context: Any = None,
    lease_ttl: float = DEFAULT_LEASE_TTL,
) -> list[ApprovalResolved]:
    """Resume a thread whose waiting requests were resolved elsewhere (CLI, sweep, cancel)."""
    config = _thread_config(thread_id, authority, lease_ttl)
    with run_lease(authority.ledger, thread_id, ttl=lease_ttl, wait=10.0):
        waiting = pending_interrupt_ids(graph.get_state(config).interrupts)
        resume: dict[str, Any] = {}
        results: list[ApprovalResolved] = []
        for request_id, interrupt_id in waiting.items():
            recorded = authority.get_resolution(request_id)
            if recorded is not None:
                resume[interrupt_id] = recorded.to_json()
                results.append(recorded)
        if resume:
            kwargs = {} if context is None else {"context": context}
            graph.invoke(Command(resume=resume), config, **kwargs)
    return results


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

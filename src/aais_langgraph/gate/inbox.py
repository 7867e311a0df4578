"""The cross-thread inbox and housekeeping: what is really waiting, and unsticking runs."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.types import Command

from ..authority import DEFAULT_LEASE_TTL, ApprovalAuthority, run_lease
from ..ledger import StoredRequest
from ..protocol import ApprovalResolved, ApprovalSnapshot, format_timestamp, new_id
from .resume import pending_interrupt_ids
from .run_context import AUTHORITY_KEY


def _thread_config(thread_id: str, authority: ApprovalAuthority | None = None) -> RunnableConfig:
    configurable: dict[str, Any] = {"thread_id": thread_id}
    if authority is not None:
        # Gates that find their authority in ``configurable`` must find it on resume too.
        configurable[AUTHORITY_KEY] = authority
    return {"configurable": configurable}


def pending_approvals(
    authority: ApprovalAuthority,
    graph: Any | None = None,
    *,
    session_id: str | None = None,
    now: datetime | None = None,
) -> ApprovalSnapshot:
    """``approval.snapshot`` of requests that are pending in the ledger *and* still
    paused in the graph's checkpointer (one ``get_state`` per waiting thread, so the
    cost follows what is pending, not the history)."""
    snapshot = authority.snapshot(session_id=session_id)
    if graph is None:
        return snapshot
    by_thread: dict[str | None, list[str]] = defaultdict(list)
    stored: dict[str, StoredRequest] = {}
    for request in snapshot.snapshot.pending:
        record = authority.get_stored_request(request.id)
        if record is not None:
            stored[request.id] = record
            by_thread[record.thread_id].append(request.id)
    visible: set[str] = set(by_thread.pop(None, []))
    for thread_id, request_ids in by_thread.items():
        assert thread_id is not None
        waiting = pending_interrupt_ids(graph.get_state(_thread_config(thread_id)).interrupts)
        visible.update(rid for rid in request_ids if rid in waiting)
    pending = [r.to_json() for r in snapshot.snapshot.pending if r.id in visible]
    moment = now if now is not None else authority.clock()
    return ApprovalSnapshot.from_data(
        {
            **snapshot.to_json(),
            "id": new_id("evt"),
            "occurred_at": format_timestamp(moment),
            "snapshot": {"as_of_sequence": snapshot.snapshot.as_of_sequence, "pending": pending},
        }
    )


def resume_resolved(
    graph: Any,
    authority: ApprovalAuthority,
    thread_id: str,
    *,
    context: Any = None,
    lease_ttl: float = DEFAULT_LEASE_TTL,
) -> list[ApprovalResolved]:
    """Resume a thread whose waiting requests were resolved elsewhere (CLI, sweep, cancel)."""
    config = _thread_config(thread_id, authority)
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

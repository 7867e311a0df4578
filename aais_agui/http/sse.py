"""The AAIS event stream over Server-Sent Events: envelopes in sequence order, resumable.

Each AAIS envelope is one SSE message whose ``id`` is its ``sequence`` and whose
``data`` is the envelope's JSON, so a browser ``EventSource`` resumes with
``Last-Event-ID`` by itself. A new connection (or a resume whose events were
compacted away) starts from an ``approval.snapshot``; a compaction gap is first
announced with an ``event: aais.gap`` message, so the client knows to replace
its state from the snapshot that follows.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from aais_langgraph.authority import ApprovalAuthority, EventFollower, Principal
from aais_langgraph.protocol import ApprovalSnapshot
from aais_langgraph.threads import EventFilter, apending_approvals

GAP_EVENT = "aais.gap"


def format_message(
    data: Mapping[str, Any], *, event_id: int | None = None, event: str | None = None
) -> str:
    """One SSE message (``data`` is compact JSON on a single line)."""
    lines = []
    if event is not None:
        lines.append(f"event: {event}")
    if event_id is not None:
        lines.append(f"id: {event_id}")
    lines.append("data: " + json.dumps(data, separators=(",", ":"), ensure_ascii=False))
    return "\n".join(lines) + "\n\n"


async def pending_snapshot(
    authority: ApprovalAuthority, graph: Any | None, viewer: Principal | None = None
) -> ApprovalSnapshot:
    """``approval.snapshot`` of pending requests whose run still waits for them:
    :func:`~aais_langgraph.gate.apending_approvals` without reconciliation (its
    waiting rule, :meth:`~aais_langgraph.threads.ThreadView.waiting`, and its
    vouched rows). A request is left out once its thread's checkpoint shows the
    task that raised it is gone (the run moved on, e.g. its state was edited); one
    whose task is still live is kept even before its interrupt is checkpointed, so
    a snapshot taken in that window does not hide it from a client that then
    follows the events after ``as_of_sequence``. Async checkpointers work (one
    ``aget_tuple`` per waiting thread; one query with ``SqliteSaver``). With
    ``viewer``, only what they may see (:func:`~aais_langgraph.threads.visible_snapshot`).
    """
    return await apending_approvals(authority, graph, reconcile=False, viewer=viewer)


async def event_stream(
    authority: ApprovalAuthority,
    *,
    after: int | None,
    snapshot: Callable[[], Awaitable[ApprovalSnapshot]],
    is_disconnected: Callable[[], Awaitable[bool]],
    poll_interval: float = 0.2,
    heartbeat: float = 15.0,
    page_size: int = 500,
    viewer: Principal | None = None,
) -> AsyncIterator[str]:
    """SSE text of every AAIS event after ``after`` (a snapshot first when ``after`` is None)
    that ``viewer`` may see (:class:`~aais_langgraph.threads.EventFilter`)."""
    visible = EventFilter(authority, viewer)
    yield f"retry: {int(max(poll_interval, 0.5) * 1000)}\n\n"
    last = after
    if last is not None:
        page = await asyncio.to_thread(authority.events_after, last, limit=1)
        if page.gap or last > page.last_sequence:
            yield format_message(
                {"gap": True, "after_sequence": last, "last_sequence": page.last_sequence},
                event=GAP_EVENT,
            )
            last = None
    if last is None:
        current = await snapshot()
        last = current.snapshot.as_of_sequence
        yield format_message(current.to_json(), event_id=last)
    follower = EventFollower(authority, last, page_size=page_size)
    quiet_since = time.monotonic()
    while not await is_disconnected():
        page = await follower.aread()
        shown = (
            page.events if visible.trusted else await asyncio.to_thread(visible.keep, page.events)
        )
        for envelope in shown:
            yield format_message(envelope, event_id=int(envelope["sequence"]))
        if page.events:
            quiet_since = time.monotonic()
            if follower.full:
                continue
        elif time.monotonic() - quiet_since >= heartbeat:
            quiet_since = time.monotonic()
            yield ": keep-alive\n\n"
        await asyncio.sleep(poll_interval)

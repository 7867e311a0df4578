"""The AAIS event stream over Server-Sent Events: envelopes in sequence order, resumable.

Each AAIS envelope is one SSE message whose ``id`` is its ``sequence`` and whose
``data`` is the envelope's JSON, so a browser ``EventSource`` resumes with
``Last-Event-ID`` by itself. A new connection (or a resume whose events were
compacted away) starts from an ``approval.snapshot``; a compaction gap is first
announced with an ``event: aais.gap`` message, so the client knows to replace
its state from the snapshot that follows.

A request that escalates to the viewer while the stream is open
(:meth:`~aais_langgraph.threads.EventFilter.aescalated`) is sent as an
``approval.requested`` envelope of the request on the stream's own ``stream`` id and
sequence (``aais-langgraph.sse_<hex>``, from 1; SPEC §3), in a message without an
``id``: the authority's events stay in order and a resume's ``Last-Event-ID`` is theirs.

A stream never outlives its login: given ``still_signed_in`` (the app's
``authenticate`` run again on the connection's headers), it is asked every
``reauth_interval`` seconds, before anything more is sent once that interval has
passed; when it fails the stream sends one ``event: aais.unauthenticated`` message
and ends (a browser ``EventSource`` then reconnects and meets the 401).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from aais_langgraph.authority import ApprovalAuthority, EventFollower, Principal, ReplyStream
from aais_langgraph.protocol import ApprovalSnapshot, envelope_text
from aais_langgraph.threads import EventFilter, apending_approvals

GAP_EVENT = "aais.gap"
SIGNED_OUT_EVENT = "aais.unauthenticated"


def format_message(
    data: Mapping[str, Any] | str, *, event_id: int | None = None, event: str | None = None
) -> str:
    """One SSE message (``data`` is compact JSON on a single line, or that JSON's text)."""
    lines = []
    if event is not None:
        lines.append(f"event: {event}")
    if event_id is not None:
        lines.append(f"id: {event_id}")
    text = (
        data
        if isinstance(data, str)
        else json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    )
    lines.append("data: " + text)
    return "\n".join(lines) + "\n\n"


async def presenter_snapshot(
    authority: ApprovalAuthority, graph: Any | None, viewer: Principal | None = None
) -> ApprovalSnapshot:
    """``approval.snapshot`` of pending requests whose run still waits for them:
    :func:`~aais_langgraph.threads.apending_approvals` without reconciliation (its
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
    still_signed_in: Callable[[], Awaitable[bool]] | None = None,
    reauth_interval: float = 15.0,
) -> AsyncIterator[str]:
    """SSE text of every AAIS event after ``after`` (a snapshot first when ``after`` is None)
    that ``viewer`` may see (:class:`~aais_langgraph.threads.EventFilter`), while
    ``still_signed_in()`` holds (asked every ``reauth_interval`` seconds).

    Args:
        authority: whose event stream is followed.
        after: the sequence to resume after, or None for a snapshot first.
        snapshot: makes the ``approval.snapshot`` a new stream starts from.
        is_disconnected: whether the client has gone.
        poll_interval: seconds between two reads of the ledger when it is quiet.
        heartbeat: seconds of quiet before a keep-alive comment.
        page_size: events read per page.
        viewer: whose visibility filters the events (None: everything).
        still_signed_in: authenticates the stream's actor again; False ends the stream.
        reauth_interval: seconds between two ``still_signed_in`` checks.
    """
    visible = EventFilter(authority, viewer)
    own = ReplyStream("aais-langgraph.sse")
    checked_at = time.monotonic()

    async def signed_in() -> bool:
        nonlocal checked_at
        if still_signed_in is None or time.monotonic() - checked_at < reauth_interval:
            return True
        checked_at = time.monotonic()
        return await still_signed_in()

    yield f"retry: {int(max(poll_interval, 0.5) * 1000)}\n\n"
    await visible.aescalated()  # escalations from here on, before the snapshot
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
        # Request texts are written once per listed model (envelope_text).
        yield format_message(await asyncio.to_thread(envelope_text, current), event_id=last)
    follower = EventFollower(authority, last, page_size=page_size)
    quiet_since = time.monotonic()
    while not await is_disconnected():
        if not await signed_in():
            yield format_message(
                {"code": SIGNED_OUT_EVENT, "message": "the login ended; sign in again"},
                event=SIGNED_OUT_EVENT,
            )
            return
        for envelope in await visible.aescalated():
            # On the stream's own sequence (SPEC §3): no id, so Last-Event-ID stays put.
            yield format_message(own.shown(envelope, now=authority.clock()))
        page = await follower.aread()
        for envelope in await visible.akeep(page.events):
            yield format_message(envelope, event_id=int(envelope["sequence"]))
        if page.events:
            quiet_since = time.monotonic()
            if follower.full:
                continue
        elif time.monotonic() - quiet_since >= heartbeat:
            quiet_since = time.monotonic()
            yield ": keep-alive\n\n"
        await asyncio.sleep(poll_interval)

"""The two streams of every presenter binding: the authority's, followed; the binding's own.

The ledger's event stream is the authority's one producer stream (SPEC §3): its
sequences order only its own envelopes. A presenter binding (SSE, WebSocket, NDJSON
stdio) reads it page by page after the snapshot's ``as_of_sequence`` (SPEC §4.4) with an
:class:`EventFollower`; how it waits between pages is the binding's business. Its
replies to decisions go on a :class:`ReplyStream` of its own, with its own sequences,
and so does a request it is shown anew once an escalation lets its viewer see it
(:meth:`ReplyStream.shown`): the authority's stream stays in order after the
snapshot's ``as_of_sequence``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..protocol import ApprovalRequested, ApprovalResolved, format_timestamp, new_id
from ..protocol.extensions import IN_REPLY_TO_EXTENSION
from .screening import EventPage

if TYPE_CHECKING:
    from .authority import ApprovalAuthority

__all__ = ["EventFollower", "ReplyStream"]


class EventFollower:
    """Reads the events after ``after``, one page per :meth:`read`, each page after the last.

    Every event is given the authority's ``stream`` id (or ``stream``): the ledger
    assigned its sequence, so it belongs to that stream whatever a presenter wrote there.

    Args:
        authority: the authority whose ledger is read.
        after: the sequence to read after.
        stream: the stream id given to every event (default: the authority's).
        page_size: the most events one :meth:`read` returns.
    """

    def __init__(
        self,
        authority: ApprovalAuthority,
        after: int,
        *,
        stream: str | None = None,
        page_size: int = 500,
    ) -> None:
        self.authority = authority
        self.last = after
        self.stream: str = stream if stream is not None else authority.stream
        self.page_size = page_size
        self.full = False
        """Whether the last page was full (more may be waiting: read again at once)."""

    def read(self) -> EventPage:
        """The next page of events (possibly empty); ``gap`` when some were compacted away."""
        page = self.authority.events_after(self.last, limit=self.page_size)
        events: list[dict[str, Any]] = page.events
        events = [{**envelope, "stream": self.stream} for envelope in events]
        if events:
            self.last = int(events[-1]["sequence"])
        self.full = len(events) >= self.page_size
        return EventPage(events=events, gap=page.gap, last_sequence=page.last_sequence)

    async def aread(self) -> EventPage:
        return await asyncio.to_thread(self.read)


class ReplyStream:
    """A binding connection's own stream (SPEC §3: distinct stream ids and sequence spaces):
    each reply is a new envelope, numbered from 1, naming the input it answers
    (``aais-langgraph.org/in_reply_to``)."""

    def __init__(self, prefix: str) -> None:
        self.stream = new_id(prefix)
        self.sent = 0

    def reply(self, resolved: ApprovalResolved, in_reply_to: Mapping[str, Any]) -> dict[str, Any]:
        """``resolved`` as the next envelope on this stream, answering ``in_reply_to``."""
        self.sent += 1
        envelope = resolved.to_json()
        extensions = dict(envelope.get("extensions") or {})
        extensions[IN_REPLY_TO_EXTENSION] = dict(in_reply_to)
        envelope.update(id=new_id("evt"), stream=self.stream, sequence=self.sent)
        envelope["extensions"] = extensions
        return ApprovalResolved.from_data(envelope).to_json()

    def shown(self, requested: Mapping[str, Any], *, now: datetime) -> dict[str, Any]:
        """The request of ``requested`` (an ``approval.requested`` of the authority's stream)
        as the next envelope on this stream, at ``now``: the same request (SPEC §4.1), a
        new event id, time and sequence."""
        self.sent += 1
        envelope = dict(requested)
        envelope.update(
            id=new_id("evt"),
            stream=self.stream,
            sequence=self.sent,
            occurred_at=format_timestamp(now),
        )
        return ApprovalRequested.from_data(envelope).to_json()

"""Following the authority's event stream forward from a sequence, for every presenter binding.

The ledger's event stream is the authority's one producer stream (SPEC §3): its
sequences order only its own envelopes. A presenter binding (SSE, NDJSON stdio)
reads it page by page after the snapshot's ``as_of_sequence`` (SPEC §4.4) with an
:class:`EventFollower`; how it waits between pages is the binding's business.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from .standing import EventPage

if TYPE_CHECKING:
    from .reads import AuthorityReads

__all__ = ["EventFollower"]


class EventFollower:
    """Reads the events after ``after``, one page per :meth:`read`, each page after the last.

    Every event is given the authority's ``stream`` id (or ``stream``): the ledger
    assigned its sequence, so it belongs to that stream whatever a presenter wrote there.
    """

    def __init__(
        self,
        authority: AuthorityReads,
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

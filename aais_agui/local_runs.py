"""The threads this process is driving right now, so its decision watcher waits for their
runs to end instead of polling their run leases.

An AG-UI resume records its answers and then runs the thread under the thread's lease; the
watcher sees the ``approval.resolved`` events while that run is still going. Polling the
lease (two ledger calls every 50 ms, for up to the lease wait) would cost every answered
thread hundreds of ledger calls under load, for a run this process knows about: the watcher
waits for it instead, then looks at the thread as before.

The registry is per ledger (whose leases these are) and per event loop (the watcher waits
in the loop the runs report in); a run elsewhere is found by its lease, as before.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

__all__ = ["LocalRuns", "local_runs"]


class LocalRuns:
    """Thread id -> the runs of this process driving it, with an event set when none is."""

    def __init__(self) -> None:
        self._running: dict[str, tuple[int, asyncio.Event]] = {}

    @asynccontextmanager
    async def driving(self, thread_id: str) -> AsyncIterator[None]:
        """Count the block as a run of ``thread_id``."""
        entry = self._running.get(thread_id)
        count, done = entry if entry is not None else (0, asyncio.Event())
        self._running[thread_id] = (count + 1, done)
        try:
            yield
        finally:
            count, event = self._running[thread_id]
            if count == 1:
                del self._running[thread_id]
                event.set()
            else:
                self._running[thread_id] = (count - 1, event)

    def is_driving(self, thread_id: str) -> bool:
        """True while a run of this process drives ``thread_id``."""
        return thread_id in self._running

    def driven(self) -> frozenset[str]:
        """The threads runs of this process drive now."""
        return frozenset(self._running)

    async def finished(self, thread_id: str) -> None:
        """Return once no run of this process drives ``thread_id``."""
        while (entry := self._running.get(thread_id)) is not None:
            await entry[1].wait()


_REGISTRIES: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, weakref.WeakKeyDictionary[Any, LocalRuns]
] = weakref.WeakKeyDictionary()


def local_runs(ledger: Any) -> LocalRuns:
    """The runs of ``ledger``'s threads that this process drives in the running event loop."""
    per_ledger = _REGISTRIES.setdefault(asyncio.get_running_loop(), weakref.WeakKeyDictionary())
    runs = per_ledger.get(ledger)
    if runs is None:
        runs = per_ledger[ledger] = LocalRuns()
    return runs

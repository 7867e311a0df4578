"""Resume threads whose approvals were answered by another process (CLI, another replica).

:class:`DecisionWatcher` does two things while a server runs:

- every poll it picks up the ledger's due resume work
  (:meth:`~aais_langgraph.threads.ThreadDriver.aresume_due`): every answer
  recorded outside a run left "this thread must be resumed" in the ledger with
  its resolution, so an approval recorded while the server was down, while a
  dead process held the thread's lease, or while a resume failed, is resumed
  here, retried with backoff until it is done (or its outcome is unknown);
- it follows the event stream from its start, so a thread named by a new
  ``approval.resolved`` is resumed at once, and a ledger written before resume
  work existed is caught up at startup;
- every ``orphan_interval`` seconds it cancels the pending requests their thread no
  longer waits on (a forked or regenerated run left them behind, SPEC §11); a thread
  a run of this process drives is left for the next pass, and a request younger than
  a minute for a later one.

Resuming is idempotent, so a thread this process already resumed (its decisions
endpoint, an AG-UI resume) is only looked at, never run twice.

Limits: a request that expires by the clock without a recorded resolution is
left to ``sweep_expired`` / ``aais-langgraph expire`` (whose resolutions the
watcher then applies).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from aais_langgraph.authority import DEFAULT_LEASE_TTL, ApprovalAuthority, LeaseHeldError
from aais_langgraph.gate import ExecutionUnknownError
from aais_langgraph.threads import DEFAULT_LEASE_WAIT, ThreadDriver, aresolved_threads

from ..local_runs import local_runs

logger = logging.getLogger(__name__)


ORPHAN_GRACE = 60.0
"""Seconds a request must have existed before the sweep may take it for an orphan."""


class DecisionWatcher:
    """Follows the ledger's events and resumes threads paused on resolved requests."""

    def __init__(
        self,
        graph: Any,
        authority: ApprovalAuthority,
        *,
        config: Mapping[str, Any] | None = None,
        poll_interval: float = 0.5,
        lease_ttl: float = DEFAULT_LEASE_TTL,
        lease_wait: float = DEFAULT_LEASE_WAIT,
        orphan_interval: float = 30.0,
    ) -> None:
        self.graph = graph
        self.authority = authority
        self.driver = ThreadDriver(
            graph, authority, config=config, lease_ttl=lease_ttl, lease_wait=lease_wait, served=True
        )
        self.poll_interval = poll_interval
        self.orphan_interval = orphan_interval
        self._orphans_at = 0.0
        self.after = 0
        self.resumed: list[str] = []
        """Request ids this watcher resumed, oldest first (for tests and logs)."""
        self._busy: dict[str, asyncio.Task[None]] = {}
        self._again: set[str] = set()

    async def catch_up(self) -> set[str]:
        """Read every event after the last one seen; return the threads worth a look
        (the scan :func:`~aais_langgraph.threads.recovery.resolved_threads` makes)."""
        scan = await aresolved_threads(self.authority, after_sequence=self.after)
        self.after = scan.after
        return set(scan.threads)

    async def settle(self, thread_id: str) -> list[str]:
        """Resume ``thread_id`` if it waits on a resolved request; returns the resumed ids.
        A thread that cannot be resumed now keeps its resume work due (see :meth:`due`).
        A thread a run of this process drives is looked at once that run ends
        (:mod:`aais_agui.local_runs`)."""
        await local_runs(self.authority.ledger).finished(thread_id)
        view = await self.driver.aview(thread_id)
        resolved = [rid for rid in view.interrupts if await self.authority.aget_resolution(rid)]
        if not resolved:
            return []
        try:
            resumed = await self.driver.aresume_resolved(thread_id)
        except LeaseHeldError:
            logger.info("decision watcher: a thread is busy; its resume work stays due")
            return []
        except ExecutionUnknownError as unknown:
            # A run executing the approved action died: a human reconciles it first.
            logger.warning("decision watcher: outcome unknown for %s", unknown.request_id)
            await self.due()  # records the unknown outcome on the resume work
            return []
        ids = [item.resolution.request_id for item in resumed]
        self.resumed.extend(ids)
        return ids

    async def due(self) -> list[str]:
        """One pass over the due resume work; returns the request ids it resumed."""
        report = await self.driver.aresume_due()
        self.resumed.extend(report.resumed)
        return report.resumed

    async def cancel_orphans(self) -> None:
        """Cancel the pending requests their thread no longer waits on, but for threads a
        run of this process drives now (:mod:`aais_agui.local_runs`): their turn is the
        next pass; and never a request younger than :data:`ORPHAN_GRACE` (a run of
        another replica may have recorded it before its checkpoint shows the task)."""
        runs = local_runs(self.authority.ledger)
        if not runs.driven():
            await self.driver.acancel_orphans(settled_for=ORPHAN_GRACE)
            return
        pending = await asyncio.to_thread(self.authority.ledger.list_pending)
        for thread_id in sorted({stored.thread_id for stored in pending if stored.thread_id}):
            if not runs.is_driving(thread_id):
                await self.driver.acancel_orphans(thread_id=thread_id, settled_for=ORPHAN_GRACE)

    def _schedule(self, thread_id: str) -> None:
        """Settle the thread in its own task; a thread already being settled goes again."""
        if thread_id in self._busy:
            self._again.add(thread_id)
            return
        task = asyncio.create_task(self._settle_logged(thread_id))
        self._busy[thread_id] = task

    async def _settle_logged(self, thread_id: str) -> None:
        try:
            while True:
                self._again.discard(thread_id)
                try:
                    await self.settle(thread_id)
                except Exception:
                    logger.exception("decision watcher: resuming a thread failed")
                if thread_id not in self._again:
                    return
        finally:
            self._busy.pop(thread_id, None)

    async def run(self) -> None:
        """Follow the event stream until cancelled."""
        while True:
            try:
                for thread_id in sorted(await self.catch_up()):
                    self._schedule(thread_id)
                if not self._busy:
                    await self.due()
                if time.monotonic() >= self._orphans_at:
                    self._orphans_at = time.monotonic() + self.orphan_interval
                    await self.cancel_orphans()
            except Exception:
                logger.exception("decision watcher: reading the ledger failed; retrying")
            await asyncio.sleep(self.poll_interval)

    async def idle(self) -> None:
        """Wait until no resume started by this watcher is still running."""
        while self._busy:
            await asyncio.gather(*self._busy.values(), return_exceptions=True)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[DecisionWatcher]:
        """Run the watcher in the background for the duration of the block."""
        task = asyncio.create_task(self.run(), name="aais-decision-watcher")
        try:
            yield self
        finally:
            task.cancel()
            for pending in [task, *self._busy.values()]:
                pending.cancel()
            await asyncio.gather(task, *self._busy.values(), return_exceptions=True)


def watcher_lifespan(
    graph: Any, authority: ApprovalAuthority, **options: Any
) -> Callable[[Any], AbstractAsyncContextManager[None]]:
    """A FastAPI ``lifespan`` running a :class:`DecisionWatcher` while the app serves."""

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        watcher = DecisionWatcher(graph, authority, **options)
        app.state.aais_watcher = watcher
        async with watcher.running():
            yield

    return lifespan

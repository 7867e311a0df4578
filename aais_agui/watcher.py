"""Resume threads whose approvals were answered by another process (CLI, another replica).

:class:`DecisionWatcher` is the state behind two periodic jobs of the one
:class:`~aais_agui.service.ApprovalService`, both run through its driver:

- ``resume_due`` (:meth:`DecisionWatcher.follow`) picks up the ledger's due resume work
  (:meth:`~aais_langgraph.threads.ThreadDriver.aresume_due`): every answer
  recorded outside a run left "this thread must be resumed" in the ledger with
  its resolution, so an approval recorded while the server was down, while a
  dead process held the thread's lease, or while a resume failed, is resumed
  here, retried with backoff until it is done (or its outcome is unknown);
- and follows the event stream from its start, so a thread named by a new
  ``approval.resolved`` is resumed at once, and a ledger written before resume
  work existed is caught up at startup;
- ``orphans`` (:meth:`DecisionWatcher.cancel_orphans`) cancels the pending requests
  their thread no longer waits on (a forked or regenerated run left them behind, SPEC
  §11); a thread a run of this process drives is left for the next pass, and a request
  younger than a minute for a later one.

Resuming is idempotent, so a thread this process already resumed (its decisions
endpoint, an AG-UI resume) is only looked at, never run twice.

Limits: a request that expires by the clock without a recorded resolution is
left to the ``sweep_expired`` job (off unless its interval is set) or
``aais-langgraph expire``, whose resolutions the watcher then applies.
"""

from __future__ import annotations

import asyncio
import logging

from aais_langgraph.authority import LeaseHeldError
from aais_langgraph.gate import ExecutionUnknownError
from aais_langgraph.threads import ThreadDriver, aresolved_threads

from .local_runs import local_runs

__all__ = ["ORPHAN_GRACE", "DecisionWatcher"]

logger = logging.getLogger(__name__)


ORPHAN_GRACE = 60.0
"""Seconds a request must have existed before the sweep may take it for an orphan."""


class DecisionWatcher:
    """Follows the ledger's events and resumes threads paused on resolved requests."""

    def __init__(self, driver: ThreadDriver) -> None:
        self.driver = driver
        self.authority = driver.authority
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

    async def follow(self) -> None:
        """One pass of the ``resume_due`` job: every thread named by a new event is settled
        in its own task, and the due resume work is picked up when none is being settled."""
        for thread_id in sorted(await self.catch_up()):
            self._schedule(thread_id)
        if not self._busy:
            await self.due()

    async def idle(self) -> None:
        """Wait until no resume started by this watcher is still running."""
        while self._busy:
            await asyncio.gather(*self._busy.values(), return_exceptions=True)

    async def stop(self) -> None:
        """Cancel the resumes this watcher started and wait for them to end."""
        busy = list(self._busy.values())
        for task in busy:
            task.cancel()
        await asyncio.gather(*busy, return_exceptions=True)

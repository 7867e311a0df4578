"""Resume threads whose approvals were decided by another process (CLI, another replica).

:class:`DecisionWatcher` follows the authority's event stream from its start:
every ``approval.resolved`` names a request, the request names its thread, and
a thread still paused on a resolved request is resumed with the recorded
resolution (:func:`~aais_agui.resume.aresume_recorded`, under the thread's run
lease). Starting from sequence 0 is also the catch-up at startup: decisions
recorded while the server was down are applied before new ones. Resuming is
idempotent, so a thread this process already resumed (its decisions endpoint,
an AG-UI resume) is only looked at, never run twice.

Limits: events compacted out of the ledger are not rescanned, and a request
that expires by the clock without a recorded resolution is left to
``sweep_expired`` / ``aais-langgraph expire`` (whose resolutions the watcher
then applies).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from langchain_core.runnables import RunnableConfig

from aais_langgraph.authority import DEFAULT_LEASE_TTL, ApprovalAuthority, LeaseHeldError
from aais_langgraph.gate import ExecutionUnknownError
from aais_langgraph.gate.driver import DEFAULT_LEASE_WAIT, run_config
from aais_langgraph.gate.recovery import aresolved_threads
from aais_langgraph.gate.views import aread_view

from .resume import aresume_recorded

logger = logging.getLogger(__name__)


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
        attempts: int = 3,
    ) -> None:
        self.graph = graph
        self.authority = authority
        self.config: RunnableConfig = run_config(config, authority)
        self.poll_interval = poll_interval
        self.lease_ttl = lease_ttl
        self.lease_wait = lease_wait
        self.attempts = attempts
        self.after = 0
        self.resumed: list[str] = []
        """Request ids this watcher resumed, oldest first (for tests and logs)."""
        self._busy: dict[str, asyncio.Task[None]] = {}
        self._again: set[str] = set()

    async def catch_up(self) -> set[str]:
        """Read every event after the last one seen; return the threads worth a look
        (the scan :func:`~aais_langgraph.gate.recovery.resolved_threads` makes)."""
        scan = await aresolved_threads(self.authority, after_sequence=self.after)
        self.after = scan.after
        return set(scan.threads)

    async def settle(self, thread_id: str) -> list[str]:
        """Resume ``thread_id`` if it waits on a resolved request; returns the resumed ids."""
        view = await aread_view(
            self.graph, run_config(self.config, self.authority, thread_id=thread_id)
        )
        resolved = [rid for rid in view.interrupts if await self.authority.aget_resolution(rid)]
        if not resolved:
            return []
        try:
            resumed = await aresume_recorded(
                self.graph,
                self.authority,
                thread_id,
                config=self.config,
                lease_ttl=self.lease_ttl,
                lease_wait=self.lease_wait,
                attempts=self.attempts,
            )
        except LeaseHeldError:
            logger.warning("decision watcher: a thread stayed busy; its resume is left for later")
            return []
        except ExecutionUnknownError as unknown:
            # A run executing the approved action died: a human reconciles it first.
            logger.warning("decision watcher: outcome unknown for %s", unknown.request_id)
            return []
        self.resumed.extend(resumed)
        return resumed

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

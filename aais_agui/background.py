"""Resuming in the background what a presenter endpoint recorded (HTTP decisions, WebSocket).

The decision's answer is returned at once; the thread is resumed afterwards
through the service's one driver, as this server drives it (gates accept only
resolutions the authority recorded). A resume that cannot happen now is not lost:
the resolution's durable resume work stays due, and the watcher picks it up.
"""

from __future__ import annotations

import asyncio
import logging

from aais_langgraph.authority import LeaseHeldError
from aais_langgraph.threads import ThreadDriver

from .local_runs import local_runs

__all__ = ["BackgroundResumes", "aresume_recorded"]

logger = logging.getLogger(__name__)


async def aresume_recorded(driver: ThreadDriver, thread_id: str) -> list[str]:
    """Resume a thread whose waiting requests were resolved elsewhere (the decisions
    endpoint, the watcher); returns the resumed request ids.

    :meth:`~aais_langgraph.threads.ThreadDriver.aresume_resolved` of a server's driver
    (gates accept only recorded resolutions). A thread whose lease stays held raises
    :class:`~aais_langgraph.LeaseHeldError`; its durable resume work stays due, and the
    watcher's pass over the due work resumes it later.
    """
    resumed = await driver.aresume_resolved(thread_id)
    return [resolved.resolution.request_id for resolved in resumed]


class BackgroundResumes:
    """Resume the thread of a request resolved through a presenter endpoint, in the
    background (the HTTP decisions endpoint and the WebSocket profile share the
    service's one): the decision's answer is returned at once, the run continues under
    the thread's lease. A resume that cannot happen now (a busy lease, an error) is left
    to the durable resume work the resolution recorded, which the watcher picks up."""

    def __init__(self, driver: ThreadDriver) -> None:
        self.driver = driver
        self.authority = driver.authority
        self._tasks: set[asyncio.Task[None]] = set()

    def later(self, request_id: str) -> None:
        """Start resuming ``request_id``'s thread (nothing without a graph)."""
        if self.driver.graph is None:
            return
        task = asyncio.create_task(self._resume(request_id))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _resume(self, request_id: str) -> None:
        stored = await asyncio.to_thread(self.authority.get_stored_request, request_id)
        if stored is None or stored.thread_id is None:
            return
        try:
            async with local_runs(self.authority.ledger).driving(stored.thread_id):
                await aresume_recorded(self.driver, stored.thread_id)
        except LeaseHeldError:
            logger.info("background resume: the thread is busy; its resume work stays due")
        except Exception:
            logger.exception("background resume of a thread failed; its resume work stays due")

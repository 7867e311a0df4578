"""Named periodic jobs of a served process: each runs at its own interval, and a failing one
is logged by its name and stops no other.

:class:`~aais_agui.service.ApprovalService` builds its jobs (``resume_due``,
``sweep_expired``, ``orphans``, ``deliveries``, ``follow_ups``, ``retention``,
``witness``) from its
settings and runs them here while it serves. A job runs once at the start, then again
``every`` seconds after each pass ends, so a slow pass never overlaps itself.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass

__all__ = ["PeriodicJob", "Scheduler"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PeriodicJob:
    """One named job: ``run()`` is awaited every ``every`` seconds."""

    name: str
    every: float
    run: Callable[[], Awaitable[object]]


class Scheduler:
    """Runs its jobs in the background for the duration of :meth:`running`."""

    def __init__(self, jobs: Iterable[PeriodicJob]) -> None:
        self.jobs = {job.name: job for job in jobs}
        self.passes: dict[str, int] = dict.fromkeys(self.jobs, 0)
        """Passes each job finished, failed ones included (for tests and logs)."""

    @property
    def names(self) -> list[str]:
        """The names of the scheduled jobs, in the order they start."""
        return list(self.jobs)

    async def run_once(self, name: str) -> None:
        """One pass of the job ``name``; a failure is logged with the job's name."""
        job = self.jobs[name]
        try:
            await job.run()
        except Exception:
            logger.exception("scheduled job %s failed; it runs again in %gs", job.name, job.every)
        finally:
            self.passes[name] += 1

    async def _loop(self, name: str) -> None:
        while True:
            await self.run_once(name)
            await asyncio.sleep(self.jobs[name].every)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Scheduler]:
        """Run every job in its own task for the duration of the block."""
        tasks = [asyncio.create_task(self._loop(name), name=f"aais-{name}") for name in self.jobs]
        try:
            yield self
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

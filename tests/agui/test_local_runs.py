"""The registry of this process's runs, which the decision watcher waits on."""

from __future__ import annotations

import asyncio

from aais_agui.local_runs import LocalRuns, local_runs
from aais_langgraph.ledger import InMemoryLedger


def test_one_registry_per_ledger_in_a_loop() -> None:
    async def registries() -> tuple[LocalRuns, LocalRuns, LocalRuns]:
        ledger, other = InMemoryLedger(), InMemoryLedger()
        return local_runs(ledger), local_runs(ledger), local_runs(other)

    first, again, other = asyncio.run(registries())
    assert first is again
    assert other is not first


def test_finished_returns_once_every_run_of_the_thread_ended() -> None:
    async def scenario() -> list[str]:
        runs = LocalRuns()
        seen: list[str] = []
        outer_may_end, inner_may_end = asyncio.Event(), asyncio.Event()

        async def run(may_end: asyncio.Event, name: str) -> None:
            async with runs.driving("t-1"):
                await may_end.wait()
                seen.append(f"{name} ended")

        async def watcher() -> None:
            await runs.finished("t-1")
            seen.append("watcher looked")

        outer = asyncio.create_task(run(outer_may_end, "outer"))
        await asyncio.sleep(0)
        inner = asyncio.create_task(run(inner_may_end, "inner"))
        await asyncio.sleep(0)
        looking = asyncio.create_task(watcher())
        await asyncio.sleep(0)
        assert runs.is_driving("t-1") and not runs.is_driving("t-2")
        await runs.finished("t-2")  # nothing drives it: returns at once
        outer_may_end.set()
        await outer
        await asyncio.sleep(0)
        assert not looking.done()  # the inner run still drives the thread
        inner_may_end.set()
        await asyncio.gather(inner, looking)
        assert not runs.is_driving("t-1")
        return seen

    assert asyncio.run(scenario()) == ["outer ended", "inner ended", "watcher looked"]


def test_a_run_that_fails_still_ends() -> None:
    async def scenario() -> bool:
        runs = LocalRuns()
        try:
            async with runs.driving("t-1"):
                raise RuntimeError("the run failed")
        except RuntimeError:
            pass
        await runs.finished("t-1")
        return runs.is_driving("t-1")

    assert asyncio.run(scenario()) is False


def test_the_orphan_sweep_leaves_threads_this_process_drives_for_the_next_pass() -> None:
    from types import SimpleNamespace

    from aais_agui.watcher import ORPHAN_GRACE, DecisionWatcher
    from aais_langgraph import ApprovalAuthority
    from aais_langgraph.threads import ThreadDriver

    authority = ApprovalAuthority(InMemoryLedger())
    watcher = DecisionWatcher(ThreadDriver(None, authority, served=True))
    swept: list[str | None] = []

    async def acancel_orphans(
        *, thread_id: str | None = None, settled_for: float = 0.0
    ) -> list[object]:
        assert settled_for == ORPHAN_GRACE  # never a request another run just recorded
        swept.append(thread_id)
        return []

    watcher.driver = SimpleNamespace(acancel_orphans=acancel_orphans)  # type: ignore[assignment]
    pending = [SimpleNamespace(thread_id=t) for t in ("t-1", "t-2", "t-2", None)]
    authority.ledger.list_pending = lambda **_: pending  # type: ignore[method-assign]

    async def scenario() -> None:
        await watcher.cancel_orphans()  # no run of this process: one sweep of everything
        assert swept == [None]
        swept.clear()
        async with local_runs(authority.ledger).driving("t-1"):
            await watcher.cancel_orphans()
        assert swept == ["t-2"]

    asyncio.run(scenario())

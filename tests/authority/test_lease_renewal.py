"""The run lease's renewal: no OS thread per run, and a held lease outlives its TTL."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from aais_langgraph import LeaseHeldError
from aais_langgraph.authority import run_lease
from aais_langgraph.ledger import SqliteLedger


def _started_during(block: Callable[[], None]) -> int:
    started = 0
    original = threading.Thread.start

    def counting(self: threading.Thread) -> None:
        nonlocal started
        started += 1
        original(self)

    threading.Thread.start = counting  # type: ignore[method-assign]
    try:
        block()
    finally:
        threading.Thread.start = original  # type: ignore[method-assign]
    return started


def test_many_runs_start_at_most_one_renewer_thread(tmp_path: Path) -> None:
    with SqliteLedger.from_path(tmp_path / "ledger.db") as ledger:
        ledger.setup()

        def runs() -> None:
            for i in range(20):
                with run_lease(ledger, f"thr_{i}", ttl=30):
                    pass

        assert _started_during(runs) <= 1


@pytest.mark.timeout(30)
def test_a_held_lease_is_renewed_past_its_ttl(tmp_path: Path) -> None:
    ttl = 0.6
    with SqliteLedger.from_path(tmp_path / "ledger.db") as ledger:
        ledger.setup()
        with run_lease(ledger, "thr", ttl=ttl), run_lease(ledger, "other", ttl=ttl):
            time.sleep(3 * ttl)
            with pytest.raises(LeaseHeldError), run_lease(ledger, "thr", ttl=ttl):
                pass
        with run_lease(ledger, "thr", ttl=ttl):  # released: free again at once
            pass

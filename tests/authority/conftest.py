"""Fixtures for authority tests: a controllable clock and one authority per ledger backend."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from aais_langgraph.authority import ApprovalAuthority
from aais_langgraph.ledger import InMemoryLedger, Ledger, SqliteLedger

from .support import START, FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START)


@pytest.fixture
def sqlite_path(tmp_path: Path) -> Path:
    return tmp_path / "authority.db"


@pytest.fixture(params=["memory", "sqlite"])
def ledger(request: pytest.FixtureRequest, sqlite_path: Path) -> Iterator[Ledger]:
    if request.param == "memory":
        yield InMemoryLedger()
        return
    with SqliteLedger.from_path(sqlite_path, synchronous="OFF") as backend:
        backend.setup()
        yield backend


@pytest.fixture
def authority(ledger: Ledger, clock: FakeClock) -> ApprovalAuthority:
    return ApprovalAuthority(ledger, clock=clock)

"""Tool-approval fixtures: agent tests run on InMemorySaver and on a SqliteSaver file."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver

from aais_langgraph import ApprovalAuthority, InMemoryLedger, SqliteLedger

from .helpers import Recorder


class ManualClock:
    """The authority's clock, moved by hand."""

    def __init__(self) -> None:
        self.now = datetime(2030, 1, 1, 12, 0, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


@pytest.fixture(params=["memory", "sqlite"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def saver(backend: str, tmp_path: Path) -> Iterator[Any]:
    """The LangGraph checkpointer: in memory, or a SQLite file."""
    if backend == "memory":
        yield InMemorySaver()
        return
    conn = sqlite3.connect(tmp_path / "checkpoints.db", check_same_thread=False)
    try:
        yield SqliteSaver(conn)
    finally:
        conn.close()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def authority(backend: str, tmp_path: Path, clock: ManualClock) -> Iterator[ApprovalAuthority]:
    """An authority whose ledger matches the checkpointer: memory, or a SQLite file."""
    if backend == "memory":
        yield ApprovalAuthority(InMemoryLedger(), clock=clock)
        return
    with SqliteLedger.from_path(tmp_path / "ledger.db", synchronous="OFF") as ledger:
        ledger.setup()
        yield ApprovalAuthority(ledger, clock=clock)


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()

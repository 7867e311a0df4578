"""One ``ledger`` fixture that runs every contract test against each backend."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from aais_langgraph.ledger import InMemoryLedger, Ledger, SqliteLedger


@pytest.fixture
def sqlite_path(tmp_path: Path) -> Path:
    return tmp_path / "ledger.db"


@pytest.fixture(params=["memory", "sqlite"])
def ledger(request: pytest.FixtureRequest, sqlite_path: Path) -> Iterator[Ledger]:
    if request.param == "memory":
        yield InMemoryLedger()
        return
    with SqliteLedger.from_path(sqlite_path) as backend:
        backend.setup()
        yield backend

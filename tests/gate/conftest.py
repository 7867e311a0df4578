"""Fixtures for gate tests: one backend per checkpointer/ledger pair, and an effects log."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .support import Backend, Effects, open_backend


@pytest.fixture(params=["memory", "sqlite"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """InMemorySaver + InMemoryLedger, or SqliteSaver + SqliteLedger sharing one file."""
    with open_backend(request.param, tmp_path) as opened:
        yield opened


@pytest.fixture
def sqlite_backend(tmp_path: Path) -> Iterator[Backend]:
    with open_backend("sqlite", tmp_path) as opened:
        yield opened


@pytest.fixture
def memory_backend(tmp_path: Path) -> Iterator[Backend]:
    with open_backend("memory", tmp_path) as opened:
        yield opened


@pytest.fixture
def effects() -> Effects:
    return Effects()

"""Fixtures for tests/distributed: a scene per backend (SQLite file, Postgres schema).

The Postgres server is the session's throwaway cluster (tests/conftest.py); it is
started only when a Postgres case runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .harness import Scene


@pytest.fixture(params=["sqlite", "postgres"])
def scene(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Scene]:
    """A fresh backend shared by this process and the test's worker processes."""
    if request.param == "postgres":
        db = request.getfixturevalue("postgres_url")
    else:
        db = str(tmp_path / "replicas.db")
    opened = Scene(db, tmp_path)
    try:
        yield opened
    finally:
        opened.kill_all()

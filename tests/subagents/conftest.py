"""Fixtures for the deep-agent tests: the agent over SQLite files, opened again for a restart."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver

from aais_langgraph import ApprovalAuthority, SqliteLedger

from .deep_agent import EffectLog, build_deep_agent

THREAD = "deep-1"


@dataclass
class Opened:
    """The deep agent and its authority, on the scene's files."""

    agent: Any
    authority: ApprovalAuthority

    @property
    def config(self) -> dict[str, Any]:
        return {"configurable": {"thread_id": THREAD}}


@dataclass
class Files:
    """The checkpoint and ledger files of one scene and its effects log."""

    folder: Path

    @property
    def checkpoints(self) -> Path:
        return self.folder / "checkpoints.db"

    @property
    def ledger(self) -> Path:
        return self.folder / "ledger.db"

    @property
    def effects(self) -> EffectLog:
        return EffectLog(self.folder / "effects.log")

    @contextmanager
    def open(self, **options: Any) -> Iterator[Opened]:
        """The agent on these files, as a process opening them would (a restart: the
        objects of an earlier ``open`` are gone)."""
        conn = sqlite3.connect(self.checkpoints, check_same_thread=False)
        try:
            with SqliteLedger.from_path(self.ledger, synchronous="OFF") as ledger:
                ledger.setup()
                authority = ApprovalAuthority(ledger)
                agent = build_deep_agent(
                    self.effects, SqliteSaver(conn), authority=authority, **options
                )
                yield Opened(agent, authority)
        finally:
            conn.close()


@pytest.fixture
def files(tmp_path: Path) -> Files:
    return Files(tmp_path)

"""Fixtures for the AG-UI tests: the demo graph in memory, its authority, and an agent."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from aais_agui.agent import AAISLangGraphAgent
from aais_langgraph import ApprovalAuthority
from aais_langgraph.ledger import SqliteLedger

from .demo_graph import EffectLog, build_demo_graph

ALICE = {"id": "alice", "type": "human", "authenticated_by": "test"}


class Clock:
    """A settable clock for the authority (starts at real time so LangGraph ids stay sane)."""

    def __init__(self) -> None:
        self.now = datetime.now(timezone.utc)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta) -> None:
        self.now += delta


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # ag-ui-langgraph 0.0.47 still calls a LangGraph 1.x deprecated API on every run.
    for item in items:
        if "tests/agui/" in str(item.path).replace("\\", "/"):
            item.add_marker(pytest.mark.filterwarnings("ignore:`get_config_jsonschema`"))


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def effects(tmp_path: Path) -> EffectLog:
    return EffectLog(tmp_path / "effects.db")


@pytest.fixture
def authority(tmp_path: Path, clock: Clock) -> ApprovalAuthority:
    ledger = SqliteLedger(tmp_path / "ledger.db", synchronous="NORMAL")
    ledger.setup()
    return ApprovalAuthority(ledger, clock=clock)


@pytest.fixture
def graph(effects: EffectLog) -> Any:
    return build_demo_graph(effects, InMemorySaver())


@pytest.fixture
def make_agent(graph: Any, authority: ApprovalAuthority) -> Callable[..., AAISLangGraphAgent]:
    def make(**options: Any) -> AAISLangGraphAgent:
        return AAISLangGraphAgent(name="demo", graph=graph, authority=authority, **options)

    return make


@pytest.fixture
def agent(make_agent: Callable[..., AAISLangGraphAgent]) -> AAISLangGraphAgent:
    return make_agent()

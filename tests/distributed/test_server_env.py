"""``authority_from_env``: the authority of a hosted graph, configured by ``AAIS_LEDGER_URL``."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from aais_langgraph import ApprovalRequested, build_decision, request_approval
from aais_langgraph.ledger.postgres import PostgresLedger
from aais_langgraph.server_env import (
    authority_from_env,
    close_env_authorities,
    env_authority_configured,
)
from aais_langgraph.threads import resume_with_decisions

HUMAN = {"id": "user_alex", "type": "human"}


@pytest.fixture(autouse=True)
def _close_ledgers() -> Iterator[None]:
    yield
    close_env_authorities()


class State(TypedDict, total=False):
    command: str
    outcome: str


def _unconfigured_graph() -> Any:
    """A graph whose gate is given no authority at all (as on LangGraph Server)."""

    def act(state: State) -> dict[str, Any]:
        resolved = request_approval(
            {
                "kind": "process.exec",
                "name": "shell.exec",
                "summary": "Run a command",
                "arguments": {"command": state["command"]},
            }
        )
        return {"outcome": resolved.resolution.outcome}

    builder = StateGraph(State)
    builder.add_node("act", act)
    builder.add_edge(START, "act")
    builder.add_edge("act", END)
    return builder.compile(checkpointer=InMemorySaver())


def test_the_gate_and_the_resume_use_the_ledger_the_environment_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AAIS_LEDGER_URL", str(tmp_path / "env-ledger.db"))
    graph = _unconfigured_graph()
    config: Any = {"configurable": {"thread_id": "t-env"}}

    [pending] = graph.invoke({"command": "ls"}, config)["__interrupt__"]
    requested = ApprovalRequested.from_data(pending.value)
    authority = authority_from_env()
    assert authority is authority_from_env()  # one per process and setting
    assert [r.id for r in authority.snapshot().snapshot.pending] == [requested.request.id]

    decided = build_decision(requested, decision="approve", scope="once", actor=HUMAN)
    [resolved] = resume_with_decisions(graph, config, [decided], actor=HUMAN)

    assert resolved.approved and graph.get_state(config).values["outcome"] == "approved"
    assert authority.get_resolution(requested.request.id) is not None


def test_a_postgres_url_opens_a_pooled_postgres_ledger(postgres_url: str) -> None:
    authority = authority_from_env({"AAIS_LEDGER_URL": postgres_url})
    assert isinstance(authority.ledger, PostgresLedger)
    assert authority.ledger.last_sequence() == 0  # set up: the tables exist


def test_without_the_variable_a_gate_asks_for_an_authority(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("AAIS_LEDGER_URL", raising=False)
    assert not env_authority_configured()
    with pytest.raises(RuntimeError, match="AAIS_LEDGER_URL"):
        _unconfigured_graph().invoke({"command": "ls"}, {"configurable": {"thread_id": "t"}})
    with pytest.raises(RuntimeError, match="AAIS_LEDGER_URL"):
        authority_from_env({})


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("AAIS_LEDGER_SETUP", "yes"),
        ("AAIS_APPROVAL_EXPIRY_SECONDS", "soon"),
        ("AAIS_APPROVAL_EXPIRY_SECONDS", "0"),
        ("AAIS_APPROVAL_EXPIRY_SECONDS", "inf"),
        ("AAIS_APPROVAL_EXPIRY_SECONDS", "nan"),
    ],
)
def test_bad_settings_are_refused_before_anything_opens(
    tmp_path: Path, name: str, value: str
) -> None:
    target = tmp_path / "never.db"
    with pytest.raises(ValueError, match=name):
        authority_from_env({"AAIS_LEDGER_URL": str(target), name: value})
    assert not target.exists()


def test_the_expiry_setting_reaches_the_authority(tmp_path: Path) -> None:
    authority = authority_from_env(
        {"AAIS_LEDGER_URL": str(tmp_path / "expiry.db"), "AAIS_APPROVAL_EXPIRY_SECONDS": "60"}
    )
    assert authority.default_expiry.total_seconds() == 60


def test_setup_off_leaves_a_sqlite_file_without_tables(tmp_path: Path) -> None:
    path = tmp_path / "no-setup.db"
    env = {"AAIS_LEDGER_URL": str(path), "AAIS_LEDGER_SETUP": "0"}

    ledger = authority_from_env(env).ledger
    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        ledger.list_pending()
    assert ledger.is_set_up() is False

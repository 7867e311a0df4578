"""A served graph's gates record approvals in the ledger the server reads, or it is refused:
at start when a node holds an authority over another ledger, at the first request when a
node builds one as it runs; both refusals name the two places."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypedDict

import pytest
from fastapi.testclient import TestClient
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from aais_agui import ApprovalService, bearer_token_authenticator, create_app, run_agent_input
from aais_langgraph import ApprovalAuthority, InMemoryLedger, SqliteLedger, request_approval
from aais_langgraph.gate import LedgerMismatchError
from aais_langgraph.ledger import ledger_location
from aais_langgraph.tools import ApprovalMiddleware

TOKEN = {"Authorization": "Bearer t0ken"}
ACTION = {"kind": "fs.delete", "name": "rm", "summary": "Delete", "arguments": {"p": "/x"}}


class State(TypedDict, total=False):
    result: str


class ToolCallingModel(FakeMessagesListChatModel):
    def bind_tools(self, tools: Any, **kwargs: Any) -> ToolCallingModel:
        return self


@tool
def send_email(to: str) -> str:
    """Send an email."""
    return f"sent to {to}"


def agent_gated_by(authority: ApprovalAuthority) -> Any:
    """The migration page's agent: ApprovalMiddleware handed its own authority."""
    call = {"name": "send_email", "args": {"to": "ann@example.com"}, "id": "c1"}
    model = ToolCallingModel(responses=[AIMessage(content="", tool_calls=[call])])
    middleware = ApprovalMiddleware({"send_email": True}, authority=authority)
    return create_agent(model, [send_email], middleware=[middleware])


def node_graph(node: Any) -> Any:
    builder = StateGraph(State)
    builder.add_node("gate", node)
    builder.add_edge(START, "gate")
    builder.add_edge("gate", END)
    return builder.compile(checkpointer=InMemorySaver())


def closing_over(authority: ApprovalAuthority) -> Any:
    def gate(state: State) -> State:
        return {"result": request_approval(ACTION, authority=authority).resolution.outcome}

    return node_graph(gate)


def files(tmp_path: Path) -> tuple[ApprovalAuthority, ApprovalAuthority]:
    gates = ApprovalAuthority(SqliteLedger(tmp_path / "approvals.db"))
    served = ApprovalAuthority(SqliteLedger(tmp_path / "aais-agui.db"))
    return gates, served


@pytest.mark.parametrize("build", [agent_gated_by, closing_over], ids=["middleware", "node"])
def test_a_gate_over_another_ledger_file_is_refused_at_start_naming_both(
    build: Any, tmp_path: Path
) -> None:
    gates, served = files(tmp_path)
    with pytest.raises(LedgerMismatchError) as refused:
        ApprovalService(build(gates), served)
    said = str(refused.value)
    assert str(tmp_path / "approvals.db") in said and str(tmp_path / "aais-agui.db") in said
    assert "authority=" in said


def test_an_agent_over_the_servers_ledger_file_is_served(tmp_path: Path) -> None:
    gates = ApprovalAuthority(SqliteLedger(tmp_path / "aais-agui.db"))
    served = ApprovalAuthority(SqliteLedger(tmp_path / "aais-agui.db"))
    ApprovalService(agent_gated_by(gates), served, checkpointer=InMemorySaver())


def test_a_gate_holding_the_servers_own_authority_is_served() -> None:
    authority = ApprovalAuthority(InMemoryLedger())
    ApprovalService(closing_over(authority), authority)


def test_a_gate_over_another_in_memory_ledger_is_refused() -> None:
    with pytest.raises(LedgerMismatchError, match="in-memory ledger"):
        ApprovalService(closing_over(ApprovalAuthority()), ApprovalAuthority())


GATES_AUTHORITY = ApprovalAuthority(InMemoryLedger())


def test_a_module_authority_a_node_names_is_found() -> None:
    def gate(state: State) -> State:
        return {"result": request_approval(ACTION, authority=GATES_AUTHORITY).resolution.outcome}

    with pytest.raises(LedgerMismatchError):
        ApprovalService(node_graph(gate), ApprovalAuthority())


def test_an_authority_a_node_builds_as_it_runs_is_refused_at_its_first_request(
    tmp_path: Path,
) -> None:
    gates_file = tmp_path / "approvals.db"

    def gate(state: State) -> State:
        authority = ApprovalAuthority(SqliteLedger(gates_file))  # not there before it runs
        return {"result": request_approval(ACTION, authority=authority).resolution.outcome}

    served = ApprovalAuthority(SqliteLedger(tmp_path / "aais-agui.db"))
    app = create_app(
        node_graph(gate),
        authority=served,
        authenticate=bearer_token_authenticator({"t0ken": {"id": "alice", "type": "human"}}),
    )
    with TestClient(app) as client:
        response = client.post("/agent", json=run_agent_input("t1"), headers=TOKEN)
    assert '"RUN_ERROR"' in response.text and '"INTERRUPT"' not in response.text
    assert served.ledger.list_pending_rows() == []
    assert SqliteLedger(gates_file).list_pending_rows() == []


def test_a_postgres_ledger_is_named_without_its_password() -> None:
    ledger = postgres_ledger("postgresql://app:s3cret-password@db.example:5432/approvals")
    assert ledger_location(ledger) == "postgresql://app@db.example:5432/approvals"


def postgres_ledger(url: str) -> Any:
    from psycopg_pool import ConnectionPool

    from aais_langgraph.ledger.postgres import PostgresLedger

    return PostgresLedger(ConnectionPool(url, open=False))


def test_a_postgres_database_spelled_two_ways_is_one_ledger() -> None:
    from aais_langgraph.ledger import same_ledger

    by_name = postgres_ledger("postgresql://app@localhost/approvals")
    by_address = postgres_ledger("postgresql://app:pw@127.0.0.1:5432/approvals")
    other = postgres_ledger("postgresql://app@localhost/other")
    assert same_ledger(by_name, by_address) and not same_ledger(by_name, other)

"""``create_app(graph, checkpointer=...)``: what it serves, what it refuses in one line, and
a ``typing.TypedDict`` state served on every supported Python."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any, TypedDict

import pytest
from fastapi.testclient import TestClient
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import START, StateGraph

from aais_agui import bearer_token_authenticator, create_app, run_agent_input
from aais_langgraph import ApprovalAuthority, SqliteLedger, request_approval

TOKEN = {"Authorization": "Bearer t0ken"}
ALICE = {"id": "alice", "type": "human"}


class State(TypedDict, total=False):  # typing.TypedDict, as the Quickstart writes it
    path: str
    result: str


def builder_for(authority: ApprovalAuthority) -> StateGraph[Any]:
    def delete_file(state: State) -> State:
        action = {
            "kind": "fs.delete",
            "name": "delete_file",
            "summary": "Delete a report",
            "arguments": {"path": state["path"]},
        }
        resolution = request_approval(action, authority=authority)
        return {"result": "deleted" if resolution.approved else resolution.resolution.outcome}

    builder = StateGraph(State)
    builder.add_node("delete_file", delete_file)
    builder.add_edge(START, "delete_file")
    return builder


def app_for(graph: Any, authority: ApprovalAuthority, **options: Any) -> Any:
    authenticate = bearer_token_authenticator({"t0ken": ALICE})
    return create_app(graph, authority=authority, authenticate=authenticate, **options)


def events(client: TestClient, thread_id: str) -> list[dict[str, Any]]:
    body = run_agent_input(thread_id)
    body["state"] = {"path": "/reports/q3.pdf"}
    response = client.post("/agent", json=body, headers=TOKEN)
    assert response.status_code == 200, response.text
    return [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]


def test_a_builder_with_an_async_sqlite_context_manager_serves_at_module_level(
    tmp_path: Path,
) -> None:
    authority = ApprovalAuthority(SqliteLedger(tmp_path / "app.db"))
    checkpoints = tmp_path / "app.checkpoints.db"
    app = app_for(
        builder_for(authority),
        authority,
        checkpointer=AsyncSqliteSaver.from_conn_string(str(checkpoints)),
    )
    with TestClient(app) as client:
        [finished] = [e for e in events(client, "t1") if e["type"] == "RUN_FINISHED"]
        [interrupt] = finished["outcome"]["interrupts"]
        request = interrupt["metadata"]["aais"]["request"]
        assert request["action"]["arguments"] == {"path": "/reports/q3.pdf"}
        snapshot = client.get("/approvals/snapshot", headers=TOKEN).json()
        assert [r["id"] for r in snapshot["snapshot"]["pending"]] == [request["id"]]
    with sqlite3.connect(checkpoints) as stored:  # the paused run is in the file
        [[threads]] = stored.execute("select count(distinct thread_id) from checkpoints")
    assert threads == 1


def test_a_typing_typeddict_state_runs_to_its_approval_not_to_a_run_error() -> None:
    authority = ApprovalAuthority()
    graph = builder_for(authority).compile(checkpointer=InMemorySaver())
    with TestClient(app_for(graph, authority)) as client:
        kinds = [event["type"] for event in events(client, "t1")]
    assert "RUN_ERROR" not in kinds
    assert kinds[-1] == "RUN_FINISHED"


def test_a_compiled_graph_without_a_checkpointer_is_given_the_one_passed() -> None:
    authority = ApprovalAuthority()
    saver = InMemorySaver()
    app = app_for(builder_for(authority).compile(), authority, checkpointer=saver)
    with TestClient(app) as client:
        events(client, "t1")
    assert saver.get_tuple({"configurable": {"thread_id": "t1"}}) is not None


def test_an_app_built_with_a_context_manager_serves_once() -> None:
    authority = ApprovalAuthority()
    opener = AsyncSqliteSaver.from_conn_string(":memory:")
    app = app_for(builder_for(authority), authority, checkpointer=opener)
    with TestClient(app) as client:
        assert client.get("/agent/health").status_code == 200
    assert TestClient(app).get("/agent/health").status_code == 404  # the routes went with it
    with pytest.raises(RuntimeError, match=r"^checkpointer: .*serves once"), TestClient(app):
        pass


SERVED = ApprovalAuthority()
"""The authority of the refused graphs' gates and of the app refusing them."""


def refusal(graph: Any, **options: Any) -> str:
    with pytest.raises(TypeError) as refused:
        app_for(graph, SERVED, **options)
    message = str(refused.value)
    assert "\n" not in message
    return message


def test_a_sync_sqlite_saver_is_refused_naming_its_async_twin(tmp_path: Path) -> None:
    builder = builder_for(SERVED)
    with SqliteSaver.from_conn_string(str(tmp_path / "c.db")) as saver:
        given = refusal(builder, checkpointer=saver)
        compiled_with = refusal(builder.compile(checkpointer=saver))
    assert given.startswith("checkpointer: SqliteSaver is synchronous")
    assert compiled_with.startswith("graph.checkpointer: SqliteSaver is synchronous")
    assert "AsyncSqliteSaver.from_conn_string" in given and "AsyncSqliteSaver" in compiled_with


def test_a_sync_context_manager_is_refused_before_it_is_opened(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    opener = SqliteSaver.from_conn_string(str(path))
    message = refusal(builder_for(SERVED), checkpointer=opener)
    assert message.startswith("checkpointer: a synchronous context manager")
    assert not path.exists()


def test_what_cannot_serve_is_refused_naming_the_field() -> None:
    builder = builder_for(SERVED)
    assert refusal(builder).startswith("checkpointer: a StateGraph builder needs one")
    own = builder.compile(checkpointer=InMemorySaver())
    assert refusal(own, checkpointer=InMemorySaver()).startswith("graph: it was compiled")
    assert refusal(builder, checkpointer="app.db").startswith("checkpointer: expected")
    assert refusal(object(), checkpointer=InMemorySaver()).startswith("graph: expected")
    opener = AsyncSqliteSaver.from_conn_string(":memory:")  # refused as it is built, too
    assert refusal(own, checkpointer=opener).startswith("graph: it was compiled")


def test_a_graph_compiled_without_a_checkpointer_is_refused_when_the_app_is_built() -> None:
    message = refusal(builder_for(SERVED).compile())
    assert message.startswith("checkpointer: the graph was compiled without one")
    assert "checkpointer=AsyncSqliteSaver.from_conn_string(path)" in message


def test_the_inbox_answers_the_browsers_icon_request_without_an_error() -> None:
    authority = ApprovalAuthority()
    graph = builder_for(authority).compile(checkpointer=InMemorySaver())
    with TestClient(app_for(graph, authority)) as client:
        icon = client.get("/favicon.ico")
    assert icon.status_code == 204 and icon.content == b""
    assert "default-src 'none'" in icon.headers["content-security-policy"]

"""``aais-agui demo`` and ``aais-agui serve module:graph`` as real processes on loopback."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import httpx
import pytest
from langgraph.checkpoint.memory import InMemorySaver

from aais_agui import run_agent_input
from aais_agui.cli import checkpoints_path, load_graph
from aais_langgraph import build_decision

from .support import (
    JSON_HEADERS,
    agui_run,
    finished,
    interrupts_of,
    running,
    wait_for,
)

HERE = Path(__file__).resolve().parent
ENTRY_POINT = Path(sys.executable).parent / "aais-agui"


def test_demo_command_serves_agui_the_approvals_profile_and_the_inbox(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    args = ["demo", "--port", "0", "--db", str(db), "--workspace", str(tmp_path / "ws")]
    with running(args, cwd=tmp_path, command=[str(ENTRY_POINT)]) as server:
        assert server.url.startswith("http://127.0.0.1:")
        with httpx.Client(base_url=server.url, timeout=30) as client:
            page = client.get("/")
            assert page.status_code == 200
            assert page.headers["content-type"].startswith("text/html")
            assert "default-src 'none'" in page.headers["content-security-policy"]
            assert client.get("/agent/health").json()["status"] == "ok"
            capabilities = client.get("/agent/capabilities").json()
            assert capabilities["humanInTheLoop"]["interrupts"] is True
            config = client.get("/inbox/config").json()
            assert config["actor"]["id"] == "local-developer"
            snapshot = client.get("/approvals/snapshot").json()
            assert snapshot["type"] == "approval.snapshot"
            assert snapshot["snapshot"]["pending"] == []
    assert "LOCAL DEVELOPMENT AUTHENTICATOR" in server.log()
    assert db.exists() and checkpoints_path(str(db)).exists()


def test_serve_runs_a_users_graph_and_its_approval(tmp_path: Path) -> None:
    log = tmp_path / "deleted.log"
    args = ["serve", "tiny_graph:builder", "--port", "0", "--db", str(tmp_path / "app.db")]
    args.append("--local-dev-login")
    with (
        running(args, cwd=HERE, env={"TINY_GRAPH_LOG": str(log)}) as server,
        httpx.Client(base_url=server.url, timeout=30) as client,
    ):
        [interrupt] = interrupts_of(agui_run(client, run_agent_input("t1", text="delete it")))
        assert interrupt["reason"] == "aais:approval"
        requested = interrupt["metadata"]["aais"]
        decided = build_decision(requested, decision="approve", actor={"id": "x", "type": "human"})
        request_id = requested["request"]["id"]
        response = client.post(
            f"/approvals/{request_id}/decisions",
            content=json.dumps(decided.to_json()),
            headers=JSON_HEADERS,
        )
        assert response.status_code == 200, response.text
        assert response.json()["resolution"]["outcome"] == "approved"
        view = wait_for(lambda: finished(client, "t1"), what="the run to finish")
        assert view["messages"][-1]["content"] == "Deleted the report."
    assert log.read_text() == "deleted\n"


def test_serve_with_a_bearer_token_refuses_anonymous_clients(tmp_path: Path) -> None:
    args = ["serve", "tiny_graph:make_graph", "--port", "0", "--db", str(tmp_path / "app.db")]
    args += ["--token-env", "AAIS_TEST_TOKEN"]
    with (
        running(args, cwd=HERE, env={"AAIS_TEST_TOKEN": "s3cret"}) as server,
        httpx.Client(base_url=server.url, timeout=30) as client,
    ):
        assert client.get("/approvals/snapshot").status_code == 401
        token = {"Authorization": "Bearer s3cret"}
        assert client.get("/approvals/snapshot", headers=token).status_code == 200
    assert "LOCAL DEVELOPMENT" not in server.log()


def test_serve_without_a_chosen_login_refuses_to_start(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from aais_agui.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["serve", "tiny_graph:graph", "--port", "0"])
    assert exited.value.code == 2
    assert "--local-dev-login" in capsys.readouterr().err


@pytest.mark.parametrize("attribute", ["graph", "builder", "make_graph"])
def test_serve_accepts_a_compiled_graph_a_builder_or_a_factory(
    attribute: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(HERE)
    monkeypatch.setattr(sys, "path", list(sys.path))  # load_graph adds the working directory
    saver = InMemorySaver()
    graph = load_graph(f"tiny_graph:{attribute}", saver)
    assert graph.checkpointer is saver


@pytest.mark.parametrize("spec", ["tiny_graph", "tiny_graph:State", "tiny_graph:"])
def test_serve_refuses_what_is_not_a_graph(spec: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(HERE)
    monkeypatch.setattr(sys, "path", list(sys.path))
    with pytest.raises(SystemExit, match="aais-agui"):
        load_graph(spec, InMemorySaver())


def test_sqlite_checkpoints_live_next_to_the_ledger() -> None:
    assert checkpoints_path("data/aais-demo.db") == Path("data/aais-demo.checkpoints.db")
    assert checkpoints_path("ledger") == Path("ledger.checkpoints.db")

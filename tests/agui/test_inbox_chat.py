"""``GET /inbox/config`` says whether the served graph takes chat messages: the page shows
the chat for a graph with a ``messages`` channel and the approvals only for one without."""

from __future__ import annotations

from pathlib import Path

import httpx
from langgraph.checkpoint.memory import InMemorySaver

from aais_agui import ServiceSettings, bearer_token_authenticator, create_app
from aais_langgraph import ApprovalAuthority
from aais_langgraph.ledger import SqliteLedger
from demo.no_chat_graph import builder as no_chat_builder

from .demo_graph import EffectLog, build_demo_graph
from .http_support import serve


def config_of(graph: object, folder: Path) -> dict[str, object]:
    ledger = SqliteLedger(folder / "ledger.db", synchronous="NORMAL")
    ledger.setup()
    authenticate = bearer_token_authenticator({"t": {"id": "alice", "type": "human"}})
    app = create_app(
        graph,
        authority=ApprovalAuthority(ledger),
        authenticate=authenticate,
        settings=ServiceSettings(resume_due_every=None, orphans_every=None),
    )
    with serve(app) as url:
        response = httpx.get(f"{url}/inbox/config", headers={"Authorization": "Bearer t"})
    assert response.status_code == 200
    config: dict[str, object] = response.json()
    return config


def test_a_graph_with_messages_gets_the_chat(tmp_path: Path) -> None:
    graph = build_demo_graph(EffectLog(tmp_path / "effects.db"), InMemorySaver())
    assert config_of(graph, tmp_path)["chat"] is True


def test_a_graph_without_messages_gets_the_approvals_only(tmp_path: Path) -> None:
    graph = no_chat_builder.compile(checkpointer=InMemorySaver())
    assert config_of(graph, tmp_path)["chat"] is False

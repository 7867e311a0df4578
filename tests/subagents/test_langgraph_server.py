"""The deep agent on LangGraph Server (``langgraph dev``), driven with ``langgraph-sdk``.

The server runs a copy of examples/langgraph_server (its custom auth) with two more
graphs: ``deep``, the deep agent of ``deep_agent.py`` with no authority of its own, so
``ApprovalMiddleware`` in the mailer finds it through ``AAIS_LEDGER_URL`` as a hosted
graph does, and ``deep_helper``, the same agent built by ``approval_deep_agent``. Each
test runs on a SQLite ledger file and on a Postgres ledger (a schema of the test
session's server). No ``--allow-blocking``: the server runs the parent and the
subagent on its event loop with its blocking-call detector on.

The subagent's request is in the thread's state and the ledger; alice's answer,
sent with ``command={"resume": {interrupt_id: decided}}`` whatever the body names, is
recorded as hers and resumes the subagent; the gated tool runs once (or never, denied)
and no sibling again.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from aais_langgraph import ApprovalRequested, build_decision
from aais_langgraph.ledger import open_ledger
from aais_langgraph.protocol.extensions import SUBAGENT_EXTENSION
from support.langgraph_dev import langgraph_dev, server_env
from support.pg_cluster import fresh_schema_url

from .deep_agent import GATED, SIBLINGS, EffectLog

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "langgraph_server"
STARTUP_TIMEOUT = 90.0
AS_ALICE = {"Authorization": "Bearer alice-token"}
MALLORY = {"id": "mallory", "type": "human"}
PAUSED = {GATED: 0, **{name: 1 for name in SIBLINGS}}
DEEP_GRAPH = '''"""The subagent tests' deep agent, its authority from AAIS_LEDGER_URL."""

import os

from tests.subagents.deep_agent import EffectLog, build_deep_agent

graph = build_deep_agent(EffectLog(os.environ["AAIS_EXAMPLE_EFFECTS"]), None)
graph_helper = build_deep_agent(
    EffectLog(os.environ["AAIS_EXAMPLE_EFFECTS"]), None, gate="helper"
)
'''


@dataclass
class Server:
    url: str
    folder: Path
    ledger_url: str

    @property
    def effects(self) -> EffectLog:
        return EffectLog(self.folder / "effects.log")

    def pending_in_ledger(self) -> list[str]:
        with open_ledger(self.ledger_url, setup=False) as ledger:
            return [stored.request_id for stored in ledger.list_pending()]

    def recorded_actor(self, request_id: str) -> str:
        with open_ledger(self.ledger_url, setup=False) as ledger:
            [decided] = [
                event
                for event in ledger.events_after(0, limit=10_000)
                if event["type"] == "approval.decided"
                and event["decision"]["request_id"] == request_id
            ]
        return str(decided["decision"]["actor"]["id"])

    def log(self) -> str:
        return (self.folder / "server.log").read_text(errors="replace")


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """``langgraph dev`` serving the example and the deep agents on a SQLite or a
    Postgres ledger; killed afterwards."""
    folder = tmp_path_factory.mktemp("deep") / "app"
    shutil.copytree(EXAMPLE, folder, ignore=shutil.ignore_patterns("__pycache__", ".langgraph_api"))
    (folder / "deep_graph.py").write_text(DEEP_GRAPH, encoding="utf-8")
    settings = json.loads((folder / "langgraph.json").read_text())
    settings["graphs"]["deep"] = "./deep_graph.py:graph"
    settings["graphs"]["deep_helper"] = "./deep_graph.py:graph_helper"
    (folder / "langgraph.json").write_text(json.dumps(settings))
    if request.param == "postgres":
        ledger_url = fresh_schema_url(request.getfixturevalue("postgres_cluster"))
    else:
        ledger_url = str(folder / "approvals.db")
    env = server_env(
        {
            "AAIS_LEDGER_URL": ledger_url,
            "AAIS_EXAMPLE_EFFECTS": str(folder / "effects.log"),
            "AAIS_EXAMPLE_TOKENS": "alice-token=alice",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        }
    )
    with langgraph_dev(folder, env, startup_timeout=STARTUP_TIMEOUT) as (url, _):
        yield Server(url, folder, ledger_url)


def paused(server: Server, graph: str = "deep") -> tuple[Any, str, dict[str, Any]]:
    """A fresh thread of ``graph`` run until the subagent's tool waits; the client,
    thread, interrupt."""
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=server.url, timeout=120, headers=AS_ALICE)
    thread_id = client.threads.create()["thread_id"]
    user_turn = {"messages": [{"role": "user", "content": "Email Bob and research X"}]}
    client.runs.wait(thread_id, graph, input=user_turn)
    [interrupt] = client.threads.get_state(thread_id)["interrupts"]
    return client, thread_id, interrupt


def counts_of(lines: list[str]) -> dict[str, int]:
    """Runs per tool in ``lines`` of the effects log."""
    return {name: sum(1 for line in lines if line.startswith(name + " ")) for name in PAUSED}


@pytest.mark.parametrize(("kind", "runs"), [("approve", 1), ("deny", 0)])
def test_the_subagents_approval_is_answered_through_the_server(
    server: Server, kind: str, runs: int
) -> None:
    before = server.effects.lines()
    client, thread_id, interrupt = paused(server)
    requested = ApprovalRequested.from_data(interrupt["value"])
    assert requested.request.action.name == GATED
    assert (requested.request.extensions or {})[SUBAGENT_EXTENSION]["name"] == "mailer"
    assert requested.request.id in server.pending_in_ledger()
    assert counts_of(server.effects.lines()[len(before) :]) == PAUSED

    # The body names mallory; the server authenticated alice.
    decided = build_decision(requested, decision=kind, scope="once", actor=MALLORY).to_json()
    client.runs.wait(thread_id, "deep", command={"resume": {interrupt["id"]: decided}})
    state = client.threads.get_state(thread_id)

    assert state["next"] == [] and state["interrupts"] == []
    assert counts_of(server.effects.lines()[len(before) :]) == {**PAUSED, GATED: runs}
    assert requested.request.id not in server.pending_in_ledger()
    assert server.recorded_actor(requested.request.id) == "alice"
    log = server.log()
    assert "BlockingError" not in log and "allow-blocking" not in log, log[-4000:]


def test_the_helper_built_agents_approval_is_answered_through_the_server(server: Server) -> None:
    before = server.effects.lines()
    client, thread_id, interrupt = paused(server, "deep_helper")
    requested = ApprovalRequested.from_data(interrupt["value"])
    assert (requested.request.extensions or {})[SUBAGENT_EXTENSION]["name"] == "mailer"
    assert requested.request.id in server.pending_in_ledger()

    decided = build_decision(requested, decision="approve", scope="once", actor=MALLORY)
    command = {"resume": {interrupt["id"]: decided.to_json()}}
    client.runs.wait(thread_id, "deep_helper", command=command)

    assert counts_of(server.effects.lines()[len(before) :]) == {**PAUSED, GATED: 1}
    assert server.recorded_actor(requested.request.id) == "alice"
    assert "BlockingError" not in server.log()

"""The example graph on LangGraph Server (``langgraph dev``), driven with ``langgraph-sdk``.

The server runs as its own process on a loopback port, from a copy of
examples/langgraph_server, with telemetry, tracing and the version check off.
The authority comes from ``AAIS_LEDGER_URL`` (a SQLite file, then a Postgres
schema). The example's custom auth (``auth.py``) maps bearer tokens to users:
a request without a token is refused, and a decision sent with alice's token is
recorded as alice's whatever its body names. The pending approval is visible in
``threads.get_state``; a decision whose digest was tampered with runs nothing and
leaves it pending; the genuine decision, sent through
``runs.wait(command={"resume": {interrupt_id: decided}})``, runs the action once,
and sending it again runs nothing more. Without auth, raw decisions are refused
and only a resolution the authority already recorded resumes the thread.

The example's ``create_agent`` agent (``agent_graph.py``) runs the async path: the
server runs it on its event loop with its blocking-call detector on (no
``--allow-blocking``), ``ApprovalMiddleware``'s async hook gates the tool call, the
first gated call opens the ledger, and the user whose token sends the decision is
recorded as its actor.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from aais_langgraph import ApprovalAuthority, ApprovalRequested, build_decision
from aais_langgraph.ledger import open_ledger
from support.langgraph_dev import langgraph_dev, server_env

pytestmark = pytest.mark.timeout(120)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "langgraph_server"
MALLORY = {"id": "mallory", "type": "human"}
TOKENS = "alice-token=alice,bob-token=bob"
AS_ALICE = {"Authorization": "Bearer alice-token"}
AS_BOB = {"Authorization": "Bearer bob-token"}


class Server:
    def __init__(
        self, url: str, folder: Path, ledger_url: str, process: subprocess.Popen[bytes]
    ) -> None:
        self.url = url
        self.folder = folder
        self.ledger_url = ledger_url
        self.process = process

    def pending_in_ledger(self) -> list[str]:
        with open_ledger(self.ledger_url, setup=False) as ledger:
            return [stored.request_id for stored in ledger.list_pending()]

    def recorded_actor(self, request_id: str) -> dict[str, Any]:
        with open_ledger(self.ledger_url, setup=False) as ledger:
            [decided] = [
                event
                for event in ledger.events_after(0, limit=10_000)
                if event["type"] == "approval.decided"
                and event["decision"]["request_id"] == request_id
            ]
        return dict(decided["decision"]["actor"])

    def effects(self) -> list[str]:
        path = self.folder / "effects.log"
        return path.read_text(encoding="utf-8").splitlines() if path.exists() else []

    def log(self) -> str:
        return (self.folder / "server.log").read_text(errors="replace")[-4000:]

    def full_log(self) -> str:
        return (self.folder / "server.log").read_text(errors="replace")


@pytest.fixture(params=["sqlite", "postgres"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Server]:
    """``langgraph dev`` serving a copy of the example with its auth, killed afterwards."""
    ledger_url = request.getfixturevalue("postgres_url") if request.param == "postgres" else None
    with _serve_example(tmp_path, ledger_url, auth=True) as running:
        yield running


@pytest.fixture
def server_without_auth(tmp_path: Path) -> Iterator[Server]:
    """The example with the ``"auth"`` entry removed from langgraph.json (SQLite ledger)."""
    with _serve_example(tmp_path, None, auth=False) as running:
        yield running


@contextmanager
def _serve_example(tmp_path: Path, ledger_url: str | None, *, auth: bool) -> Iterator[Server]:
    folder = tmp_path / "app"
    shutil.copytree(EXAMPLE, folder, ignore=shutil.ignore_patterns("__pycache__", ".langgraph_api"))
    if not auth:
        settings = json.loads((folder / "langgraph.json").read_text())
        del settings["auth"]
        (folder / "langgraph.json").write_text(json.dumps(settings))
    ledger_url = ledger_url or str(folder / "approvals.db")
    env = server_env(
        {
            "AAIS_LEDGER_URL": ledger_url,
            "AAIS_EXAMPLE_EFFECTS": str(folder / "effects.log"),
            "AAIS_EXAMPLE_TOKENS": TOKENS,
        }
    )
    with langgraph_dev(folder, env) as (url, process):
        yield Server(url, folder, ledger_url, process)


def test_approve_through_the_sdk_runs_the_action_once(server: Server) -> None:
    from langgraph_sdk import get_sync_client

    for refused_headers in ({}, {"Authorization": "Bearer mallory-token"}):
        response = httpx.post(f"{server.url}/threads", json={}, headers=refused_headers)
        assert response.status_code == 401, "the example's auth refuses unknown callers"
    client = get_sync_client(url=server.url, timeout=60, headers=AS_ALICE)
    thread_id = client.threads.create()["thread_id"]

    paused = client.runs.wait(thread_id, "approvals", input={"command": "ls -la"})
    state = client.threads.get_state(thread_id)
    [interrupt] = state["interrupts"]
    assert interrupt["value"]["type"] == "approval.requested"
    assert _interrupt_ids(paused) == [interrupt["id"]]
    requested = ApprovalRequested.from_data(interrupt["value"])
    assert requested.request.action.arguments == {"command": "ls -la"}
    assert state["next"] == ["act"] and server.effects() == []
    assert server.pending_in_ledger() == [requested.request.id]

    # The body names mallory; the server authenticated alice.
    decided = build_decision(requested, decision="approve", scope="once", actor=MALLORY).to_json()
    forged = "sha256:" + "0" * 64
    tampered = {**decided, "decision": {**decided["decision"], "action_digest": forged}}
    refused = client.runs.wait(
        thread_id, "approvals", command={"resume": {interrupt["id"]: tampered}}, raise_error=False
    )
    after = client.threads.get_state(thread_id)
    assert isinstance(refused, dict) and refused["__error__"]["error"] == "ValidationError"
    assert "action_digest" in refused["__error__"]["message"]
    assert [i["id"] for i in after["interrupts"]] == [interrupt["id"]]
    assert server.pending_in_ledger() == [requested.request.id]
    assert server.effects() == []

    done = client.runs.wait(thread_id, "approvals", command={"resume": {interrupt["id"]: decided}})
    assert isinstance(done, dict) and done["outcome"] == "approved", done
    assert server.effects() == [f"{requested.request.id} ls -la"]
    assert server.pending_in_ledger() == []
    assert server.recorded_actor(requested.request.id) == {
        "id": "alice",
        "type": "human",
        "display_name": "Alice",
        "authenticated_by": "langgraph-server auth",
    }

    again = client.runs.wait(
        thread_id, "approvals", command={"resume": {interrupt["id"]: decided}}, raise_error=False
    )
    final = client.threads.get_state(thread_id)
    assert final["next"] == [] and final["interrupts"] == [], again
    assert server.effects() == [f"{requested.request.id} ls -la"]
    assert "BlockingError" not in server.full_log(), server.log()


def test_without_auth_raw_decisions_are_refused(server_without_auth: Server) -> None:
    from langgraph_sdk import get_sync_client

    server = server_without_auth
    client = get_sync_client(url=server.url, timeout=60)
    thread_id = client.threads.create()["thread_id"]
    client.runs.wait(thread_id, "approvals", input={"command": "ls -la"})
    [interrupt] = client.threads.get_state(thread_id)["interrupts"]
    requested = ApprovalRequested.from_data(interrupt["value"])
    decided = build_decision(requested, decision="approve", actor=MALLORY)

    refused = client.runs.wait(
        thread_id,
        "approvals",
        command={"resume": {interrupt["id"]: decided.to_json()}},
        raise_error=False,
    )
    assert isinstance(refused, dict)
    assert refused["__error__"]["error"] == "RejectedResumeError", refused
    assert "AAIS_ALLOW_UNAUTHENTICATED_DECISIONS" in refused["__error__"]["message"]
    after = client.threads.get_state(thread_id)
    assert [i["id"] for i in after["interrupts"]] == [interrupt["id"]]
    assert server.pending_in_ledger() == [requested.request.id]
    assert server.effects() == []

    # A resolution the authority recorded under an authenticated actor still resumes it.
    with open_ledger(server.ledger_url, setup=False) as ledger:
        notice = ApprovalAuthority(ledger).decide(decided, actor={"id": "alice", "type": "human"})
    done = client.runs.wait(
        thread_id, "approvals", command={"resume": {interrupt["id"]: notice.to_json()}}
    )
    assert isinstance(done, dict) and done["outcome"] == "approved", done
    assert server.effects() == [f"{requested.request.id} ls -la"]


def test_agent_tool_call_waits_for_approval_and_runs_once_on_the_event_loop(
    server: Server,
) -> None:
    from langgraph_sdk import get_sync_client

    as_alice = get_sync_client(url=server.url, timeout=60, headers=AS_ALICE)
    thread_id = as_alice.threads.create()["thread_id"]
    user_turn = {"messages": [{"role": "user", "content": "ls -la"}]}

    as_alice.runs.wait(thread_id, "agent", input=user_turn)
    state = as_alice.threads.get_state(thread_id)
    [interrupt] = state["interrupts"]
    requested = ApprovalRequested.from_data(interrupt["value"])
    assert requested.request.action.name == "run_command"
    assert requested.request.action.arguments == {"command": "ls -la"}
    assert server.pending_in_ledger() == [requested.request.id]
    assert server.effects() == []

    # Bob answers alice's thread; the body names mallory; the server authenticated bob.
    as_bob = get_sync_client(url=server.url, timeout=60, headers=AS_BOB)
    decided = build_decision(requested, decision="approve", scope="once", actor=MALLORY).to_json()
    done = as_bob.runs.wait(thread_id, "agent", command={"resume": {interrupt["id"]: decided}})
    assert isinstance(done, dict), done
    assert done["messages"][-1]["content"] == "Done: ran `ls -la`", done
    assert server.effects() == [f"{requested.request.id} ls -la"]
    assert server.pending_in_ledger() == []
    assert server.recorded_actor(requested.request.id) == {
        "id": "bob",
        "type": "human",
        "display_name": "Bob",
        "authenticated_by": "langgraph-server auth",
    }

    as_bob.runs.wait(
        thread_id, "agent", command={"resume": {interrupt["id"]: decided}}, raise_error=False
    )
    final = as_alice.threads.get_state(thread_id)
    assert final["next"] == [] and final["interrupts"] == []
    assert server.effects() == [f"{requested.request.id} ls -la"]
    log = server.full_log()
    assert "BlockingError" not in log and "allow-blocking" not in log, server.log()


def _interrupt_ids(result: Any) -> list[str]:
    return [i["id"] for i in result.get("__interrupt__", [])] if isinstance(result, dict) else []

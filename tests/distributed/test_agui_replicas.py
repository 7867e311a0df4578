"""Two AG-UI server replicas (uvicorn processes on two loopback ports) on one Postgres.

Both run ``create_app`` over the same ``AsyncPostgresSaver`` checkpoints and
``PostgresLedger`` (tests/distributed/agui_replica.py). A run paused through
replica A is listed and approved through replica B's AAIS decisions endpoint;
B resumes it, the action runs once, and an AG-UI client connecting to B sees
the finished run. Then 20 presenters, half on each replica, post conflicting
decisions for one approval at the same moment.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from aais_agui import run_agent_input
from aais_langgraph import build_decision
from agui.demo_graph import EffectLog
from agui.http_support import sse_messages
from support.pg_cluster import PostgresCluster, free_port, fresh_schema_url

from .harness import ROOT

pytestmark = pytest.mark.timeout(180)

STARTUP_TIMEOUT = 60.0
TOKEN = "presenter"  # agui_replica.TOKEN (that module imports the demo graph as tests.agui)
SOMEONE = {"id": "someone", "type": "human"}  # replaced by the authenticated actor


class Replicas:
    def __init__(self, db: str, effects: Path, urls: list[str]) -> None:
        self.db = db
        self.effects = EffectLog(effects)
        self.urls = urls

    def client(self, index: int) -> httpx.Client:
        return httpx.Client(
            base_url=self.urls[index], headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60
        )

    def ran(self, thread_id: str) -> list[tuple[str, str, str]]:
        return self.effects.list(thread_id)

    def result(self, thread_id: str) -> str | None:
        """The thread's ``result`` in its latest checkpoint (set when the gated node ends)."""
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(self.db) as saver:
            found = saver.get_tuple({"configurable": {"thread_id": thread_id}})
        if found is None:
            return None
        value = found.checkpoint["channel_values"].get("result")
        return str(value) if value else None

    def resolutions(self, request_id: str) -> list[dict[str, Any]]:
        from aais_langgraph import ApprovalAuthority
        from aais_langgraph.ledger.postgres import PostgresLedger

        with PostgresLedger.from_conn_string(self.db) as ledger:
            events = ApprovalAuthority(ledger).events_after(0).events
        return [
            event
            for event in events
            if event["type"] == "approval.resolved"
            and event["resolution"]["request_id"] == request_id
        ]


@pytest.fixture(scope="module")
def replicas(
    postgres_cluster: PostgresCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Replicas]:
    from langgraph.checkpoint.postgres import PostgresSaver

    from aais_langgraph.ledger.postgres import PostgresLedger

    folder = tmp_path_factory.mktemp("replicas")
    db = fresh_schema_url(postgres_cluster)
    with PostgresLedger.from_conn_string(db) as ledger:
        ledger.setup()  # explicit, once, before any replica starts
    with PostgresSaver.from_conn_string(db) as saver:
        saver.setup()
    effects = folder / "effects.db"
    EffectLog(effects)
    ports = [free_port(), free_port()]
    processes: list[subprocess.Popen[bytes]] = []
    logs = [folder / f"replica-{i}.log" for i in range(2)]
    try:
        for port, log in zip(ports, logs, strict=True):
            with log.open("wb") as out:
                processes.append(
                    subprocess.Popen(
                        [
                            sys.executable, "-m", "tests.distributed.agui_replica",
                            "--db", db, "--port", str(port), "--effects", str(effects),
                        ],
                        cwd=ROOT, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )  # fmt: skip
        urls = [f"http://127.0.0.1:{port}" for port in ports]
        for url, process, log in zip(urls, processes, logs, strict=True):
            _wait_until_up(url, process, log)
        yield Replicas(db, effects, urls)
    finally:
        for process in processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def _wait_until_up(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"replica exited:\n{log.read_text(errors='replace')[-3000:]}")
        try:
            if httpx.get(f"{url}/agent/health", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    pytest.fail(f"replica {url} did not start:\n{log.read_text(errors='replace')[-3000:]}")


def agui_run(client: httpx.Client, body: dict[str, Any]) -> list[dict[str, Any]]:
    with client.stream("POST", "/agent", json=body) as response:
        response.raise_for_status()
        return [message["data"] for message in sse_messages(response.iter_lines())]


def pause_on(client: httpx.Client) -> tuple[str, dict[str, Any]]:
    """A new thread whose run pauses on one approval; its id and the AG-UI interrupt."""
    thread_id = f"thread_{uuid.uuid4().hex}"
    events = agui_run(client, run_agent_input(thread_id, text=f"delete /srv/{thread_id}"))
    assert events[-1]["type"] == "RUN_FINISHED", events[-1]
    [interrupt] = events[-1]["outcome"]["interrupts"]
    return thread_id, interrupt


def wait_for_effects(
    replicas: Replicas, thread_id: str, count: int, timeout: float = 20.0
) -> list[Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ran = replicas.ran(thread_id)
        if len(ran) >= count:
            return ran
        time.sleep(0.05)
    return replicas.ran(thread_id)


def decided(interrupt: dict[str, Any], kind: str = "approve") -> dict[str, Any]:
    return build_decision(interrupt["metadata"]["aais"], decision=kind, actor=SOMEONE).to_json()


def test_paused_on_a_listed_and_approved_on_b_runs_once(replicas: Replicas) -> None:
    with replicas.client(0) as a, replicas.client(1) as b:
        thread_id, interrupt = pause_on(a)
        request_id = interrupt["metadata"]["aais"]["request"]["id"]

        listed = b.get("/approvals/snapshot").json()["snapshot"]["pending"]
        assert request_id in {request["id"] for request in listed}
        assert replicas.ran(thread_id) == []

        response = b.post(f"/approvals/{request_id}/decisions", json=decided(interrupt))
        assert response.status_code == 200
        assert response.json()["resolution"]["outcome"] == "approved"
        assert wait_for_effects(replicas, thread_id, 1) == [
            (thread_id, "delete_file", f"/srv/{thread_id}")
        ]

        # An AG-UI client reconnecting to B sees the finished run, and nothing runs again.
        events = agui_run(b, run_agent_input(thread_id))
        time.sleep(0.5)
    finished = events[-1]
    assert finished["type"] == "RUN_FINISHED" and "outcome" not in finished, finished
    [messages] = [e["messages"] for e in events if e["type"] == "MESSAGES_SNAPSHOT"]
    assert f"Deleted /srv/{thread_id}." in [m.get("content") for m in messages]
    [state] = [e["snapshot"] for e in events if e["type"] == "STATE_SNAPSHOT"][-1:]
    assert state["result"] == "deleted"
    assert replicas.ran(thread_id) == [(thread_id, "delete_file", f"/srv/{thread_id}")]
    assert len(replicas.resolutions(request_id)) == 1


def test_twenty_presenters_on_both_replicas_race_conflicting_decisions(
    replicas: Replicas,
) -> None:
    with replicas.client(0) as a:
        thread_id, interrupt = pause_on(a)
    request_id = interrupt["metadata"]["aais"]["request"]["id"]
    envelopes = [decided(interrupt, kind) for kind in ("approve", "deny") * 2]
    go = threading.Barrier(20)

    def present(index: int) -> tuple[int, dict[str, Any], str]:
        envelope = envelopes[index % len(envelopes)]
        with replicas.client(index % 2) as client:
            go.wait(timeout=30)
            response = client.post(f"/approvals/{request_id}/decisions", json=envelope)
        return response.status_code, response.json(), envelope["decision"]["id"]

    with ThreadPoolExecutor(max_workers=20) as pool:
        answers = list(pool.map(present, range(20)))

    [recorded] = replicas.resolutions(request_id)
    resolution = recorded["resolution"]
    outcome = resolution["outcome"]
    assert outcome in ("approved", "denied")
    winners = [a for a in answers if a[2] == resolution["decision_id"]]
    losers = [a for a in answers if a[2] != resolution["decision_id"]]
    assert len(winners) == 5 and len(losers) == 15
    for status, body, _ in winners:
        assert status == 200 and body["resolution"]["id"] == resolution["id"], body
    for status, body, _ in losers:
        assert status == 409 and body["resolution"]["outcome"] == "conflict", body

    expected = [(thread_id, "delete_file", f"/srv/{thread_id}")] if outcome == "approved" else []
    deadline = time.monotonic() + 20
    while not replicas.result(thread_id) and time.monotonic() < deadline:
        time.sleep(0.1)  # both replicas may try to resume in the background; one does
    time.sleep(0.5)
    assert replicas.result(thread_id) == ("deleted" if outcome == "approved" else outcome)
    assert replicas.ran(thread_id) == expected

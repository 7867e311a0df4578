"""The deep agent served by ``create_app``: its subagent's approval in the snapshot, answered
over HTTP and over AG-UI, the tool run once and no sibling again.

One ``ApprovalService`` on loopback over a SQLite ledger, bearer user alice. The agent
keeps its checkpoints in memory (the AG-UI run drives it with ``astream``: the
subagent then runs through ``deepagents``' async ``task`` tool).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph.checkpoint.memory import InMemorySaver

from aais_agui import ApprovalService, bearer_token_authenticator, create_app, run_agent_input
from aais_langgraph import ApprovalAuthority, SqliteLedger, ThreadDriver, build_decision
from aais_langgraph.ledger import RESUME
from aais_langgraph.protocol.extensions import SUBAGENT_EXTENSION
from agui.http_support import agui_run, serve

from .deep_agent import GATED, SIBLINGS, EffectLog, build_deep_agent

ALICE = {"id": "alice", "type": "human", "authenticated_by": "test"}
HEADERS = {"Authorization": "Bearer alice-token"}
PAUSED = {GATED: 0, **{name: 1 for name in SIBLINGS}}
SETTLE_SECONDS = 30.0


@dataclass
class Served:
    url: str
    agent: Any
    authority: ApprovalAuthority
    effects: EffectLog
    client: httpx.Client

    def pause(self) -> tuple[str, dict[str, Any]]:
        """A fresh thread run in this process until the subagent's tool waits."""
        thread_id = f"deep_{uuid.uuid4().hex}"
        config = ThreadDriver(self.agent, self.authority).run_config(thread_id=thread_id)
        self.agent.invoke({"messages": [("user", "Email Bob and research X")]}, config)
        [interrupt] = self.agent.get_state(config).interrupts
        return thread_id, dict(interrupt.value)

    def settle(self, request_id: str) -> None:
        """Wait until the request's resume work is no longer due (a background resume)."""
        deadline = time.monotonic() + SETTLE_SECONDS
        while (
            work := self.authority.ledger.get_work(RESUME, request_id)
        ) is not None and work.state == "due":
            assert time.monotonic() < deadline, "a recorded answer was never resumed"
            time.sleep(0.05)

    def finished(self, thread_id: str) -> bool:
        state = self.agent.get_state({"configurable": {"thread_id": thread_id}})
        return state.next == () and not state.interrupts


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    ledger = SqliteLedger(tmp_path / "ledger.db")
    ledger.setup()
    authority = ApprovalAuthority(ledger)
    effects = EffectLog(tmp_path / "effects.log")
    agent = build_deep_agent(effects, InMemorySaver())
    service = ApprovalService(agent, authority)
    app = create_app(service, authenticate=bearer_token_authenticator({"alice-token": ALICE}))
    try:
        with serve(app) as url, httpx.Client(base_url=url, headers=HEADERS, timeout=60) as client:
            yield Served(url, agent, authority, effects, client)
    finally:
        ledger.close()


def test_the_snapshot_lists_the_subagents_request_with_its_subagent(served: Served) -> None:
    _, requested = served.pause()
    response = served.client.get("/approvals/snapshot")

    assert response.status_code == 200
    [listed] = response.json()["snapshot"]["pending"]
    assert listed["id"] == requested["request"]["id"]
    assert listed["extensions"][SUBAGENT_EXTENSION]["name"] == "mailer"


@pytest.mark.parametrize(("kind", "runs"), [("approve", 1), ("deny", 0)])
def test_the_decisions_endpoint_resumes_the_subagent(served: Served, kind: str, runs: int) -> None:
    thread_id, requested = served.pause()
    decided = build_decision(requested, decision=kind, scope="once", actor=ALICE)
    request_id = requested["request"]["id"]
    response = served.client.post(f"/approvals/{request_id}/decisions", json=decided.to_json())
    served.settle(request_id)

    assert response.status_code == 200, response.text
    assert response.json()["resolution"]["outcome"] == ("approved" if runs else "denied")
    assert served.finished(thread_id)
    assert served.effects.counts() == {**PAUSED, GATED: runs}


def test_an_agui_run_pauses_on_the_subagent_and_its_resume_runs_the_tool_once(
    served: Served,
) -> None:
    thread_id = f"deep_{uuid.uuid4().hex}"
    started = agui_run(
        served.client, "/agent", run_agent_input(thread_id, text="Email Bob and research X")
    )
    finished = started[-1]
    assert finished["type"] == "RUN_FINISHED" and finished["outcome"]["type"] == "interrupt"
    [interrupt] = finished["outcome"]["interrupts"]
    requested = interrupt["metadata"]["aais"]
    assert served.effects.counts() == PAUSED
    assert (
        interrupt["subagentRunId"]
        == requested["request"]["extensions"][SUBAGENT_EXTENSION]["run_id"]
    )

    decided = build_decision(requested, decision="approve", scope="once", actor=ALICE)
    entry = {"interruptId": interrupt["id"], "status": "resolved", "payload": decided.to_json()}
    resumed = agui_run(served.client, "/agent", run_agent_input(thread_id, resume=[entry]))

    assert resumed[-1]["type"] == "RUN_FINISHED", resumed[-1]
    assert served.finished(thread_id)
    assert served.effects.counts() == {**PAUSED, GATED: 1}
    resolved = served.authority.get_resolution(requested["request"]["id"])
    assert resolved is not None and resolved.approved

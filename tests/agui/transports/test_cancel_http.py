"""``POST /approvals/{request_id}/cancel`` over real HTTP on loopback, under the policy file's
rules: the requester withdraws their own request (the thread resumes past it, nothing runs),
another user is refused with 403 and nothing recorded, an unknown id is 404, and the
state-change checks of the decisions route apply."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aais
import httpx
import pytest
from langgraph.checkpoint.memory import InMemorySaver

from aais_agui import ServiceSettings, bearer_token_authenticator, create_app, run_agent_input
from aais_langgraph import ApprovalAuthority
from aais_langgraph.authority import AccessPolicy
from aais_langgraph.ledger import SqliteLedger
from hostile.report import record

from ..demo_graph import EffectLog, build_demo_graph
from ..http_support import agui_run, serve

ALICE = {"id": "alice", "type": "human"}  # starts the runs: the requester
BOB = {"id": "bob", "type": "human"}  # neither requester nor approver
POLICY = {"default_approvers": ["sre"], "requesters": {"view_own": True, "cancel_own": True}}


class Served:
    def __init__(self, folder: Path) -> None:
        ledger = SqliteLedger(folder / "ledger.db", synchronous="NORMAL")
        ledger.setup()
        self.authority = ApprovalAuthority(ledger, authorizer=AccessPolicy.from_mapping(POLICY))
        self.effects = EffectLog(folder / "effects.db")
        self.graph = build_demo_graph(self.effects, InMemorySaver())
        authenticate = bearer_token_authenticator({"alice-token": ALICE, "bob-token": BOB})
        self.app = create_app(
            self.graph,
            authority=self.authority,
            authenticate=authenticate,
            settings=ServiceSettings(stream_poll=0.05),
        )

    def result(self, thread_id: str, timeout: float = 10.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.graph.get_state({"configurable": {"thread_id": thread_id}})
            if state.values.get("result"):
                return str(state.values["result"])
            time.sleep(0.05)
        raise AssertionError("the thread was not resumed")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, str]]:
    served = Served(tmp_path_factory.mktemp("cancel"))
    with serve(served.app) as url:
        yield served, url


def client(url: str, token: str) -> httpx.Client:
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30)


def pause(url: str) -> tuple[str, str]:
    """alice starts a run that pauses on one approval: its thread and request id."""
    thread_id = f"thread_{uuid.uuid4().hex}"
    with client(url, "alice-token") as alice:
        events = agui_run(
            alice, "/agent", run_agent_input(thread_id, text=f"delete /srv/{thread_id}")
        )
    [interrupt] = events[-1]["outcome"]["interrupts"]
    return thread_id, str(interrupt["metadata"]["aais"]["request"]["id"])


def test_the_requester_cancels_their_request_and_the_run_continues(
    site: tuple[Served, str],
) -> None:
    served, url = site
    thread_id, request_id = pause(url)
    with client(url, "alice-token") as alice:
        response = alice.post(f"/approvals/{request_id}/cancel", json={"reason": "not needed"})
    assert response.status_code == 200, response.text
    resolved = aais.validate(response.json())
    assert resolved["type"] == "approval.resolved"
    assert resolved["resolution"]["outcome"] == "cancelled"
    assert resolved["resolution"]["extensions"]["aais-langgraph.org/resolved_by"]["id"] == "alice"
    assert served.result(thread_id) == "cancelled"
    assert served.effects.list(thread_id) == []


def test_a_second_cancel_returns_the_same_resolution(site: tuple[Served, str]) -> None:
    _, url = site
    _, request_id = pause(url)
    with client(url, "alice-token") as alice:
        first = alice.post(f"/approvals/{request_id}/cancel", json={})
        again = alice.post(f"/approvals/{request_id}/cancel", json={})
    assert first.status_code == again.status_code == 200
    assert again.json()["resolution"] == first.json()["resolution"]


def test_another_user_may_not_cancel_and_nothing_is_recorded(site: tuple[Served, str]) -> None:
    served, url = site
    thread_id, request_id = pause(url)
    before = served.authority.ledger.audit_tip()
    with client(url, "bob-token") as bob:
        response = bob.post(f"/approvals/{request_id}/cancel", json={})
    recorded = served.authority.get_resolution(request_id)
    record("http cancel by another user", 1, failed_open=int(recorded is not None))
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "aais.forbidden"
    assert recorded is None and served.authority.ledger.audit_tip() == before
    assert served.effects.list(thread_id) == []


def test_an_unknown_request_is_404(site: tuple[Served, str]) -> None:
    _, url = site
    with client(url, "alice-token") as alice:
        response = alice.post("/approvals/req_doesnotexist/cancel", json={})
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "aais.unknown_request"


BAD_BODIES: list[Any] = [
    pytest.param(b'{"reason": "x", "approve": true}', 422, id="unknown-field"),
    pytest.param(b'{"reason": 7}', 422, id="reason-not-a-string"),
    pytest.param(b'{"reason": "a", "reason": "b"}', 422, id="duplicate-key"),
    pytest.param(b'["reason"]', 422, id="not-an-object"),
    pytest.param(('{"reason": "' + "x" * 501 + '"}').encode(), 422, id="long-reason"),
]


@pytest.mark.parametrize(("body", "status"), BAD_BODIES)
def test_a_malformed_cancel_records_nothing(
    site: tuple[Served, str], body: bytes, status: int
) -> None:
    served, url = site
    _, request_id = pause(url)
    with client(url, "alice-token") as alice:
        response = alice.post(
            f"/approvals/{request_id}/cancel",
            content=body,
            headers={"Content-Type": "application/json"},
        )
    recorded = served.authority.get_resolution(request_id)
    record("http cancel bodies", 1, failed_open=int(recorded is not None))
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == "aais.invalid_cancel"
    assert recorded is None


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        pytest.param({"Content-Type": "text/plain"}, 415, id="text-plain"),
        pytest.param(
            {"Content-Type": "application/json", "Origin": "https://evil.example"}, 403, id="origin"
        ),
    ],
)
def test_the_state_change_checks_apply(
    site: tuple[Served, str], headers: dict[str, str], status: int
) -> None:
    served, url = site
    _, request_id = pause(url)
    with client(url, "alice-token") as alice:
        response = alice.post(f"/approvals/{request_id}/cancel", content=b"{}", headers=headers)
    recorded = served.authority.get_resolution(request_id)
    record("http cancel request checks", 1, failed_open=int(recorded is not None))
    assert response.status_code == status
    assert recorded is None

"""ag-ui-langgraph's stock ``add_langgraph_fastapi_endpoint`` serving AAISLangGraphAgent, over
real HTTP on loopback: with :func:`aais_agui.stock_endpoint_dependency` an answer is recorded
under the authenticated actor and the action runs; without it the answer is refused with
the instruction that names the dependency; the dependency refuses what the package's own
AG-UI route refuses before anything runs."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from ag_ui_langgraph import add_langgraph_fastapi_endpoint
from fastapi import FastAPI, Request
from langgraph.checkpoint.memory import InMemorySaver

from aais_agui import (
    AAISLangGraphAgent,
    Authenticated,
    Security,
    bearer_token_authenticator,
    run_agent_input,
    stock_endpoint_dependency,
)
from aais_langgraph import ApprovalAuthority, build_decision
from aais_langgraph.ledger import SqliteLedger
from aais_langgraph.protocol import Actor
from hostile.report import record

from .conftest import ALICE
from .demo_graph import EffectLog, build_demo_graph
from .http_support import agui_run, serve

MALLORY = {"id": "mallory", "type": "human"}
MAX_BODY = 64_000


class Stock:
    """The served app: ``/agent`` with the dependency, ``/bare`` without it."""

    def __init__(self, folder: Path) -> None:
        ledger = SqliteLedger(folder / "ledger.db", synchronous="NORMAL")
        ledger.setup()
        self.authority = ApprovalAuthority(ledger)
        self.effects = EffectLog(folder / "effects.db")
        self.graph = build_demo_graph(self.effects, InMemorySaver())
        bearer = bearer_token_authenticator({"alice-token": ALICE, "mallory-token": MALLORY})

        def authenticate(request: Request) -> Actor | Authenticated | None:
            if request.cookies.get("session") == "alice-session":
                return Authenticated(Actor.from_data(ALICE), cookie_session=True)
            return bearer(request)  # type: ignore[return-value]

        security = Security(authenticate=authenticate, max_body_bytes=MAX_BODY)
        agent = AAISLangGraphAgent(name="demo", graph=self.graph, authority=self.authority)
        self.app = FastAPI()
        add_langgraph_fastapi_endpoint(
            self.app, agent, "/agent", dependencies=[stock_endpoint_dependency(security)]
        )
        add_langgraph_fastapi_endpoint(self.app, agent, "/bare")

    def decided_by(self, request_id: str) -> str | None:
        """The actor id of the decision the authority recorded for the request."""
        recorded = self.authority.get_resolution(request_id)
        return None if recorded is None else self.authority.decided_by(recorded)


@pytest.fixture(scope="module")
def stock(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stock, str]]:
    served = Stock(tmp_path_factory.mktemp("stock"))
    with serve(served.app) as url:
        yield served, url


@pytest.fixture
def client(stock: tuple[Stock, str]) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=stock[1], headers={"Authorization": "Bearer alice-token"}, timeout=30
    ) as client:
        yield client


def pause(client: httpx.Client, path: str = "/agent") -> tuple[str, dict[str, Any]]:
    thread_id = f"thread_{uuid.uuid4().hex}"
    events = agui_run(client, path, run_agent_input(thread_id, text=f"delete /srv/{thread_id}"))
    assert events[-1]["type"] == "RUN_FINISHED", events[-1]
    [interrupt] = events[-1]["outcome"]["interrupts"]
    return thread_id, interrupt


def approval(interrupt: dict[str, Any], actor: Any) -> list[dict[str, Any]]:
    """The resume that approves ``interrupt``, its body naming ``actor``."""
    decided = build_decision(interrupt["metadata"]["aais"], decision="approve", actor=actor)
    return [{"interruptId": interrupt["id"], "status": "resolved", "payload": decided.to_json()}]


def request_id(interrupt: dict[str, Any]) -> str:
    return str(interrupt["metadata"]["aais"]["request"]["id"])


def test_an_approval_through_the_stock_endpoint_runs_the_action(
    client: httpx.Client, stock: tuple[Stock, str]
) -> None:
    served, _ = stock
    thread_id, interrupt = pause(client)
    events = agui_run(
        client, "/agent", run_agent_input(thread_id, resume=approval(interrupt, ALICE))
    )
    assert events[-1]["type"] == "RUN_FINISHED" and not events[-1].get("outcome"), events[-1]
    assert served.effects.list(thread_id) == [(thread_id, "delete_file", f"/srv/{thread_id}")]
    recorded = served.authority.get_resolution(request_id(interrupt))
    assert recorded is not None and recorded.resolution.outcome == "approved"


def test_a_forged_body_actor_is_recorded_as_the_authenticated_one(
    client: httpx.Client, stock: tuple[Stock, str]
) -> None:
    served, _ = stock
    thread_id, interrupt = pause(client)
    body = run_agent_input(thread_id, resume=approval(interrupt, MALLORY))
    events = agui_run(client, "/agent", body)
    assert events[-1]["type"] == "RUN_FINISHED", events[-1]
    recorded_as = served.decided_by(request_id(interrupt))
    record("stock endpoint body actor", 1, failed_open=int(recorded_as != "alice"))
    assert recorded_as == "alice"


def test_without_the_dependency_an_answer_is_refused_naming_it(
    client: httpx.Client, stock: tuple[Stock, str]
) -> None:
    served, _ = stock
    thread_id, interrupt = pause(client, "/bare")
    events = agui_run(
        client, "/bare", run_agent_input(thread_id, resume=approval(interrupt, ALICE))
    )
    [error] = [event for event in events if event["type"] == "RUN_ERROR"]
    recorded = served.authority.get_resolution(request_id(interrupt))
    ran = served.effects.list(thread_id)
    record("stock endpoint without authentication", 1, failed_open=int(bool(recorded or ran)))
    assert error["code"] == "aais.unauthenticated"
    assert "stock_endpoint_dependency(security)" in error["message"]
    assert "\n" not in error["message"]
    assert recorded is None and ran == []


def _body(thread_id: str) -> bytes:
    return httpx.Request("POST", "/", json=run_agent_input(thread_id, text="delete /x")).content


JSON = {"Content-Type": "application/json"}
AS_ALICE = {**JSON, "Authorization": "Bearer alice-token"}

REFUSED = [
    pytest.param(JSON, None, _body, 401, id="no-actor"),
    pytest.param({**AS_ALICE, "Origin": "https://evil.example"}, None, _body, 403, id="origin"),
    pytest.param({**AS_ALICE, "Content-Type": "text/plain"}, None, _body, 415, id="text-plain"),
    pytest.param(JSON, {"session": "alice-session"}, _body, 403, id="cookie-without-csrf"),
    pytest.param(
        AS_ALICE,
        None,
        lambda thread_id: _body(thread_id)[:-1] + b',"pad":"' + b"x" * MAX_BODY + b'"}',
        413,
        id="oversized",
    ),
    pytest.param(
        AS_ALICE,
        None,
        lambda thread_id: _body(thread_id)[:-1] + b',"threadId":"other"}',
        422,
        id="duplicate-key",
    ),
    pytest.param(
        AS_ALICE,
        None,
        lambda thread_id: _body(thread_id).replace(b'"runId":"', b'"runId":"' + b"r" * 300),
        422,
        id="long-id",
    ),
]


@pytest.mark.parametrize(("headers", "cookies", "make_body", "status"), REFUSED)
def test_the_dependency_refuses_before_anything_runs(
    stock: tuple[Stock, str], headers: Any, cookies: Any, make_body: Any, status: int
) -> None:
    served, url = stock
    thread_id = f"thread_{uuid.uuid4().hex}"
    with httpx.Client(cookies=cookies, timeout=30) as client:
        response = client.post(f"{url}/agent", content=make_body(thread_id), headers=headers)
    state = served.graph.get_state({"configurable": {"thread_id": thread_id}})
    ran = bool(state.values) or bool(served.effects.list(thread_id))
    record("stock endpoint request checks", 1, failed_open=int(ran or response.status_code < 400))
    assert response.status_code == status, response.text
    assert not ran

"""The inbox page and its read-only helpers, served in-process by ``create_app``."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from importlib import resources
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph.checkpoint.memory import InMemorySaver

from aais_agui import create_app, run_agent_input
from aais_agui.demo import DemoWorkspace, build_demo_agent
from aais_langgraph import ApprovalAuthority
from aais_langgraph.authority import explain_constraints

from .support import JSON_HEADERS

# ag-ui-langgraph 0.0.47 still calls a LangGraph 1.x deprecated API on every run.
pytestmark = pytest.mark.filterwarnings("ignore:`get_config_jsonschema`")

ALICE = {"id": "alice", "type": "human", "authenticated_by": "test"}
STATIC = resources.files("aais_agui").joinpath("static")
SCRIPTS = ("app.js", "chat.js", "cards.js", "common.js")


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    graph = build_demo_agent(DemoWorkspace(tmp_path / "ws"), checkpointer=InMemorySaver())

    def authenticate(request: Any) -> dict[str, Any] | None:
        return None if request.headers.get("x-anonymous") else ALICE

    app = create_app(graph, authority=ApprovalAuthority(), authenticate=authenticate)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        yield http


async def _ask(client: httpx.AsyncClient, thread_id: str, text: str) -> list[dict[str, Any]]:
    body = run_agent_input(thread_id, text=text)
    async with client.stream("POST", "/agent", json=body, headers=JSON_HEADERS) as response:
        lines = [line async for line in response.aiter_lines() if line.startswith("data:")]
    return [json.loads(line[5:]) for line in lines]


async def test_the_page_and_its_assets_are_served_with_a_strict_policy(
    client: httpx.AsyncClient,
) -> None:
    page = await client.get("/")
    assert page.status_code == 200
    assert "connect-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["x-content-type-options"] == "nosniff"
    assets = [(name, "text/javascript") for name in SCRIPTS] + [("style.css", "text/css")]
    for name, kind in assets:
        asset = await client.get(f"/inbox/static/{name}")
        assert asset.status_code == 200 and asset.headers["content-type"].startswith(kind)
    for missing in ("index.html", "secret.txt", "..%2Fapp.py"):
        assert (await client.get(f"/inbox/static/{missing}")).status_code == 404


def test_the_page_never_builds_html_from_strings_or_loads_other_sites() -> None:
    for script in SCRIPTS:
        code = STATIC.joinpath(script).read_text()
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
            assert sink not in code, script
    for name in ("index.html", "style.css", *SCRIPTS):
        text = STATIC.joinpath(name).read_text()
        assert not re.search(r"https?://|(src|href)=\"//", text, re.IGNORECASE), name
    style = STATIC.joinpath("style.css").read_text()
    assert "url(" not in style and "@import" not in style


async def test_explanations_are_the_authoritys_words_for_each_choice(
    client: httpx.AsyncClient,
) -> None:
    events = await _ask(client, "t1", "run the tests")
    request = events[-1]["outcome"]["interrupts"][0]["metadata"]["aais"]["request"]
    response = await client.get(f"/inbox/explanations/{request['id']}")
    assert response.status_code == 200
    choices = response.json()["choices"]
    assert [(c["decision"], c["scope"]) for c in choices] == [
        ("approve", "once"),
        ("approve", "session"),
        ("deny", "once"),
    ]
    assert choices[0]["explanation"] == [] and choices[2]["explanation"] == []
    assert choices[1]["explanation"] == explain_constraints(
        request["choices"][1]["scope_constraints"]
    )
    assert (await client.get("/inbox/explanations/apr_unknown")).status_code == 404


async def test_a_thread_shows_its_messages_and_open_approvals(client: httpx.AsyncClient) -> None:
    events = await _ask(client, "t2", "email bob@example.com")
    [interrupt] = events[-1]["outcome"]["interrupts"]
    view = (await client.get("/inbox/threads/t2")).json()
    assert [m["role"] for m in view["messages"]] == ["user", "assistant"]
    assert view["messages"][1]["toolCalls"][0]["function"]["name"] == "send_email"
    assert view["interrupts"] == [
        {
            "interrupt_id": interrupt["id"],
            "request_id": interrupt["metadata"]["aais"]["request"]["id"],
        }
    ]
    assert view["settled"] is True
    empty = (await client.get("/inbox/threads/never-used")).json()
    assert empty == {"thread_id": "never-used", "messages": [], "interrupts": [], "settled": True}


async def test_the_helpers_need_an_authenticated_actor(client: httpx.AsyncClient) -> None:
    anonymous = {"x-anonymous": "1"}
    for path in ("/inbox/config", "/inbox/threads/t1", "/inbox/explanations/apr_x"):
        assert (await client.get(path, headers=anonymous)).status_code == 401
    assert (await client.get("/", headers=anonymous)).status_code == 200
    config = (await client.get("/inbox/config")).json()
    assert config["actor"]["id"] == "alice"
    assert (config["agent_path"], config["approvals_prefix"]) == ("/agent", "/approvals")


def test_the_inbox_can_be_left_out(tmp_path: Path) -> None:
    graph = build_demo_agent(DemoWorkspace(tmp_path), checkpointer=InMemorySaver())
    app = create_app(
        graph, authority=ApprovalAuthority(), authenticate=lambda r: ALICE, inbox=False
    )
    assert "/" not in {getattr(route, "path", None) for route in app.routes}


def test_every_static_file_is_served() -> None:
    from aais_agui.http.inbox import _ASSETS

    assert {path.name for path in STATIC.iterdir()} == set(_ASSETS)

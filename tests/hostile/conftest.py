"""The hostile-input suite's server and probe (the table is printed by ``tests/conftest.py``).

One real uvicorn on loopback serves the AG-UI test graph (``tests/agui/demo_graph.py``)
with ``create_app``: a SQLite ledger, bearer users alice, bob and mallory, a cookie
session for carol (CSRF required), and a policy under which only alice may
approve. Every executed action lands in an :class:`EffectLog`, the action counter.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx
import pytest
from fastapi import Request
from langgraph.checkpoint.memory import InMemorySaver

from aais_agui import (
    Authenticated,
    ServiceSettings,
    bearer_token_authenticator,
    create_app,
    run_agent_input,
)
from aais_langgraph import ApprovalAuthority, build_decision
from aais_langgraph.authority.policy import PolicyVerdict
from aais_langgraph.ledger import SqliteLedger
from aais_langgraph.protocol import Action, Actor, Decision, Origin
from aais_langgraph.protocol import Request as AAISRequest
from agui.demo_graph import EffectLog, build_demo_graph
from agui.http_support import agui_run, serve

from .report import record

MAX_BODY = 64_000
ALICE = {"id": "alice", "type": "human", "authenticated_by": "bearer"}
USERS = {
    "alice-token": ALICE,
    "bob-token": {"id": "bob", "type": "human"},
    "mallory-token": {"id": "mallory", "type": "human"},
}
CAROL_SESSION = "carol-session"
#: Put into hostile values; no response or event may ever echo it (errors name fields only).
SENTINEL = "S3NT1NEL"


class OnlyAliceApproves:
    """Every action asks a human; only alice's approvals stand."""

    def on_request(self, action: Action, origin: Origin) -> PolicyVerdict:
        return PolicyVerdict("ask")

    def on_decision(self, request: AAISRequest, decision: Decision) -> str | None:
        return None if decision.actor.id == "alice" else "Only alice may approve."


@dataclass(frozen=True)
class Paused:
    """A thread paused on approvals: its interrupts (AG-UI) and their request ids."""

    thread_id: str
    interrupts: list[dict[str, Any]]

    @property
    def request_ids(self) -> list[str]:
        return [str(i["metadata"]["aais"]["request"]["id"]) for i in self.interrupts]

    def decided(
        self, index: int = 0, kind: Literal["approve", "deny"] = "approve", **options: Any
    ) -> dict[str, Any]:
        """A well-formed ``approval.decided`` for interrupt ``index`` (naming alice)."""
        requested = self.interrupts[index]["metadata"]["aais"]
        return build_decision(requested, decision=kind, actor=ALICE, **options).to_json()


@dataclass
class Site:
    """The served app, its authority and action counter."""

    url: str
    authority: ApprovalAuthority
    effects: EffectLog
    graph: Any

    def client(self, token: str | None = "alice-token", **options: Any) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30, **options)

    def pause(self, text: str | None = None) -> Paused:
        """Start a run as alice that pauses on approvals (``email a,b`` pauses on two)."""
        thread_id = f"hostile_{uuid.uuid4().hex}"
        with self.client() as client:
            body = run_agent_input(thread_id, text=text or f"delete /srv/{thread_id}")
            events = agui_run(client, "/agent", body)
        finished = events[-1]
        assert finished["type"] == "RUN_FINISHED", finished
        return Paused(thread_id, list(finished["outcome"]["interrupts"]))


@dataclass
class Probe:
    """Counts hostile inputs sent at paused approvals and checks nothing opened after each.

    Call :meth:`response` (HTTP), :meth:`run` (AG-UI events) or :meth:`frame`
    (WebSocket) once per input;
    :meth:`finish` records the category in the report, then asserts.
    """

    site: Site
    category: str
    watched: list[Paused]
    tried: int = 0
    failed_open: int = 0
    server_errors: int = 0
    lost: int = 0
    leaks: int = 0
    notes: list[str] = field(default_factory=list)
    _effects_before: int = 0

    def __post_init__(self) -> None:
        self._effects_before = len(self.site.effects.list())

    def response(self, response: httpx.Response, what: str) -> None:
        """One hostile HTTP input and its response."""
        self._leak(response.text, what)
        self._count(what, response.status_code >= 500, f"HTTP {response.status_code}")

    def run(self, events: list[dict[str, Any]], what: str) -> None:
        """One hostile AG-UI run and the events it streamed."""
        errors = [e for e in events if e["type"] == "RUN_ERROR"]
        self._leak(json.dumps(errors), what)
        internal = any(e.get("code") in ("aais.internal", None) for e in errors)
        self._count(what, internal, "RUN_ERROR aais.internal")

    def frame(self, text: str, what: str, *, server_error: bool = False) -> None:
        """One hostile WebSocket frame or handshake and what came back (``server_error``:
        the server refused it with a 5xx or closed with 1011)."""
        self._leak(text, what)
        self._count(what, server_error, "a server error")

    def _leak(self, text: str, what: str) -> None:
        if SENTINEL in text:
            self.leaks += 1
            self.notes.append(f"echoed a value: {what}")

    def status(self, status: int, what: str) -> None:
        """One hostile input whose response was only a status (e.g. an unread stream)."""
        self._count(what, status >= 500, f"HTTP {status}")

    def direct(self, what: str, *, crashed: bool) -> None:
        """One hostile answer given to the served graph in-process (``crashed``: it raised
        something other than the gate's refusal)."""
        self._count(what, crashed, "an unexpected exception")

    def _count(self, what: str, server_error: bool, shown: str) -> None:
        self.tried += 1
        if server_error:
            self.server_errors += 1
            self.notes.append(f"5xx: {what} -> {shown}")
        opened, lost = self._state()
        if opened:
            self.failed_open += 1
            self.notes.append(f"failed open: {what}")
        if lost:
            self.lost += 1
            self.notes.append(f"destroyed a pending approval: {what}")

    def _state(self) -> tuple[bool, bool]:
        authority = self.site.authority
        opened = len(self.site.effects.list()) > self._effects_before
        lost = False
        for paused in self.watched:
            for request_id in paused.request_ids:
                resolution = authority.get_resolution(request_id)
                if resolution is None:
                    continue
                if resolution.resolution.outcome == "approved":
                    opened = True
                else:
                    lost = True
        return opened, lost

    def still_answerable(self) -> None:
        """After the hostile inputs, alice's correct answer still approves and runs once."""
        for paused in self.watched:
            with self.site.client() as client:
                for index, request_id in enumerate(paused.request_ids):
                    response = client.post(
                        f"/approvals/{request_id}/decisions", json=paused.decided(index)
                    )
                    assert response.status_code == 200, response.text
                    assert response.json()["resolution"]["outcome"] == "approved"
        for paused in self.watched:
            expected = len(paused.request_ids)
            deadline = time.monotonic() + 20
            while len(self.site.effects.list(paused.thread_id)) < expected:
                assert time.monotonic() < deadline, "the approved action did not run"
                time.sleep(0.05)
            assert len(self.site.effects.list(paused.thread_id)) == expected

    def finish(self) -> None:
        """Record the tally, then fail on anything that opened, errored or was lost."""
        record(self.category, self.tried, self.failed_open, self.server_errors)
        problems = (self.failed_open, self.server_errors, self.lost, self.leaks)
        assert problems == (0, 0, 0, 0), "\n".join(self.notes[:20])


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    folder = tmp_path_factory.mktemp("hostile")
    ledger = SqliteLedger(folder / "ledger.db", synchronous="NORMAL")
    ledger.setup()
    authority = ApprovalAuthority(ledger, policy=OnlyAliceApproves())
    effects = EffectLog(folder / "effects.db")
    graph = build_demo_graph(effects, InMemorySaver())
    bearer = bearer_token_authenticator(USERS)

    def authenticate(request: Request) -> Actor | Authenticated | None:
        actor = bearer(request)
        if actor is not None:
            return actor  # type: ignore[return-value]
        if request.cookies.get("session") == CAROL_SESSION:
            return Authenticated(Actor(id="carol", type="human"), cookie_session=True)
        return None

    app = create_app(
        graph,
        authority=authority,
        authenticate=authenticate,
        settings=ServiceSettings(
            max_body_bytes=MAX_BODY, allowed_origins=["https://inbox.example"], stream_poll=0.05
        ),
    )
    with serve(app) as url:
        yield Site(url, authority, effects, graph)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # ag-ui-langgraph 0.0.47 still calls a LangGraph 1.x deprecated API on every run.
    for item in items:
        if "tests/hostile/" in str(item.path).replace("\\", "/"):
            item.add_marker(pytest.mark.filterwarnings("ignore:`get_config_jsonschema`"))

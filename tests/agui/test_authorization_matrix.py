"""Who may view, decide and cancel whose approvals: one authorization matrix over the served app.

Five users, alice (``sre``), bob (``dev``), carol and dave (``finance``) and erin
(``audit``), each over a bearer token and over a browser session: signed in at a real
OpenID provider (node-oidc-provider on loopback), a cookie, and the CSRF header on
every state change. The access policy lets ``sre`` decide file
deletions, ``finance`` decide purges, everyone but the auditor decide archives, and
the auditor see everything; a requester sees and may cancel their own requests but
may not approve them (separation of duties from ``medium``, the demo graph's risk).
Every user tries every request on every channel; each refusal must change nothing
(no audit entry, no resolution, no effect) and leak nothing of the request.
"""

from __future__ import annotations

import io
import json
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

import httpx
import pytest
from fastapi import Request
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict
from websockets.sync.client import ClientConnection

from aais_agui import Authenticated, ServiceSettings, create_app, run_agent_input
from aais_agui.http.security import CSRF_HEADER
from aais_agui.http.sessions import InMemorySessionStore
from aais_agui.http.sign_in import BrowserSignIn, SignInSettings
from aais_langgraph import ApprovalAuthority, build_decision, requires_approval
from aais_langgraph.authority import AccessPolicy, Principal
from aais_langgraph.authority.authorization import FORBIDDEN
from aais_langgraph.cli.presenter import StdioPresenter
from aais_langgraph.ledger import SqliteLedger
from aais_langgraph.protocol import Actor
from aais_langgraph.protocol.extensions import REQUESTER_EXTENSION, RESOLVED_BY_EXTENSION
from hostile.report import record
from presenter.support import OS_USER, is_reply, presenter
from support.oidc_provider import OpenIdProvider, free_port, openid_provider, sign_in_at_provider

from .demo_graph import EffectLog, build_demo_graph
from .http_support import serve, sse_messages
from .served_site import Site
from .transports.test_websocket import open_ws, receive, receive_until

CATEGORY = "authorization matrix"

Kind = Literal["approve", "deny", "cancel"]
KINDS: tuple[Kind, ...] = ("approve", "deny", "cancel")

USERS: dict[str, frozenset[str]] = {
    "alice": frozenset({"sre"}),
    "bob": frozenset({"dev"}),
    "carol": frozenset({"finance"}),
    "dave": frozenset({"finance"}),
    "erin": frozenset({"audit"}),
}

APPROVERS: dict[str, frozenset[str]] = {
    "fs.delete": frozenset({"sre"}),
    "fs.purge": frozenset({"finance"}),
    "fs.archive": frozenset({"sre", "dev", "finance"}),
    "process.exec": frozenset({"sre"}),
}
"""Who decides each action kind: the expectation, written apart from the policy below."""

POLICY: dict[str, Any] = {
    "viewer_groups": ["audit"],
    "default_approvers": [],
    "approvers": [
        {"kinds": ["fs.delete"], "groups": ["sre"]},
        {"kinds": ["fs.purge"], "groups": ["finance"]},
        {"kinds": ["fs.archive"], "groups": ["sre", "dev", "finance"]},
        {"kinds": ["process.exec"], "groups": ["sre"]},
    ],
    "separation_of_duties": {"from_risk": "medium"},
    "requesters": {"view_own": True, "cancel_own": True},
}

SESSION_CHOICES: list[dict[str, Any]] = [
    {"decision": "approve", "scope": "once", "label": "Allow once"},
    {
        "decision": "approve",
        "scope": "session",
        "label": "Allow git status for this session",
        "scope_constraints": {"command_prefix": ["git", "status"]},
    },
    {"decision": "deny", "scope": "once", "label": "Deny"},
]


# -- the site ----------------------------------------------------------------------------


def authenticate(request: Request) -> Authenticated | None:
    """``Authorization: Bearer <name>-token`` -> that user, with their groups."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    name = token.strip().removesuffix("-token")
    if scheme.lower() != "bearer" or not token.strip().endswith("-token") or name not in USERS:
        return None
    actor = Actor(id=name, type="human", authenticated_by="test-bearer")
    return Authenticated(actor, groups=USERS[name])


@dataclass
class Paused:
    """One paused request: who started its thread, its action kind, and a unique marker."""

    requester: str
    kind: str
    thread_id: str
    marker: str
    interrupt: dict[str, Any] = field(default_factory=dict)
    request_id: str = ""

    @property
    def requested(self) -> dict[str, Any]:
        found: dict[str, Any] = self.interrupt["metadata"]["aais"]
        return found


@dataclass
class Lab:
    site: Site
    clients: dict[str, httpx.Client]
    """Each user's bearer-token client."""
    sessions: dict[str, httpx.Client]
    """Each user's browser: signed in at the OpenID provider, its session cookie and the
    CSRF header."""
    requests: dict[str, Paused] = field(default_factory=dict)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    folder: Path = tmp_path_factory.mktemp("matrix")
    ledger = SqliteLedger(folder / "ledger.db", synchronous="NORMAL")
    ledger.setup()
    authority = ApprovalAuthority(ledger, authorizer=AccessPolicy.from_mapping(POLICY))
    effects = EffectLog(folder / "effects.db")
    graph = build_demo_graph(effects, InMemorySaver())
    port = free_port()
    redirect_url = f"http://127.0.0.1:{port}/login/callback"
    with ExitStack() as stack:
        provider = stack.enter_context(openid_provider(redirect_url))
        sign_in = BrowserSignIn(
            SignInSettings(
                issuer=provider.issuer,
                client_id=provider.client_id,
                client_secret=provider.client_secret,
                redirect_url=redirect_url,
                scopes=("openid", "profile", "groups"),
            ),
            store=InMemorySessionStore(),
        )

        async def bearer_or_session(request: Request) -> Authenticated | None:
            return authenticate(request) or await sign_in.authenticator(request)

        app = create_app(
            graph,
            authority=authority,
            authenticate=bearer_or_session,
            settings=ServiceSettings(stream_poll=0.05),
        )
        app.include_router(sign_in.router)
        url = stack.enter_context(serve(app, port=port))
        clients = {
            name: stack.enter_context(httpx.Client(base_url=url, headers=bearer(name), timeout=30))
            for name in USERS
        }
        sessions = {name: stack.enter_context(browser_of(url, provider, name)) for name in USERS}
        yield Lab(Site(url, folder / "ledger.db", authority, effects, graph), clients, sessions)


@contextmanager
def browser_of(url: str, provider: OpenIdProvider, user: str) -> Iterator[httpx.Client]:
    """A browser in which ``user`` signed in at the provider: the session cookie it was
    given and the CSRF token the page sends as a header."""
    with httpx.Client(base_url=url, timeout=30, follow_redirects=False) as browser:
        begun = browser.get("/login")
        assert begun.status_code == 302, begun.text
        back = sign_in_at_provider(
            begun.headers["location"], user, redirect_url=provider.redirect_url
        )
        signed_in = browser.get(back.removeprefix(url))
        assert signed_in.status_code == 303, signed_in.text
        token = browser.get("/approvals/csrf")
        assert token.status_code == 200, token.text
        browser.headers[CSRF_HEADER] = str(token.json()["csrf_token"])
        yield browser


def bearer(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {user}-token"}


# -- the expectation ---------------------------------------------------------------------


def may(user: str, verb: str, paused: Paused, decision: str | None = None) -> bool:
    """What the policy should answer, from the tables above."""
    groups = USERS[user]
    decides = not groups.isdisjoint(APPROVERS[paused.kind])
    own = paused.requester == user
    if verb == "view":
        return "audit" in groups or decides or own
    if verb == "decide":
        return decides and not (own and decision == "approve")
    if verb == "cancel":
        return decides or own
    if verb == "revoke":
        return decides
    raise AssertionError(verb)


def verb_of(decision: str) -> str:
    return "cancel" if decision == "cancel" else "decide"


# -- accesses and what a refusal must leave untouched ------------------------------------


@dataclass
class Attempt:
    status: int = 0
    through: bool = False

    def saw(self, status: int, *, through: bool) -> None:
        self.status, self.through = status, through


@contextmanager
def access(lab: Lab, allowed: bool, *watched: Paused) -> Iterator[Attempt]:
    """One access, tallied; a refused one must record, resolve and run nothing."""
    authority = lab.site.authority
    tip = authority.ledger.audit_tip()
    effects = lab.site.effects.list()
    resolved = {p.request_id: authority.get_resolution(p.request_id) is not None for p in watched}
    attempt = Attempt()
    changed: list[str] = []
    try:
        yield attempt
    finally:
        if not allowed:
            if authority.ledger.audit_tip() != tip:
                changed.append("audit entry")
            if lab.site.effects.list() != effects:
                changed.append("effect")
            now = {
                p.request_id: authority.get_resolution(p.request_id) is not None for p in watched
            }
            if now != resolved:
                changed.append("resolution")
        record(
            CATEGORY,
            1,
            failed_open=int(not allowed and (attempt.through or bool(changed))),
            server_errors=int(attempt.status >= 500),
        )
    assert changed == [], f"a refused access changed: {changed}"


def pause(lab: Lab, user: str, op: str) -> Paused:
    """``user`` starts a thread that waits on one ``fs.<op>`` approval (the demo graph)."""
    hexa = uuid.uuid4().hex
    paused = Paused(user, f"fs.{op}", f"thread_{hexa}", f"/srv/{user}-{op}-{hexa[:12]}.txt")
    status, _, events = agui(
        lab, user, run_agent_input(paused.thread_id, text=f"{op} {paused.marker}")
    )
    assert status == 200 and events[-1]["type"] == "RUN_FINISHED", events[-1]
    [paused.interrupt] = events[-1]["outcome"]["interrupts"]
    paused.request_id = str(paused.requested["request"]["id"])
    assert paused.requested["request"]["action"]["kind"] == paused.kind
    lab.requests[paused.request_id] = paused
    return paused


def three(lab: Lab) -> list[Paused]:
    """alice's purge (finance decides), bob's deletion (sre), carol's purge (finance)."""
    return [pause(lab, "alice", "purge"), pause(lab, "bob", "delete"), pause(lab, "carol", "purge")]


def agui(lab: Lab, user: str, body: dict[str, Any]) -> tuple[int, bytes, list[dict[str, Any]]]:
    """POST one AG-UI run as ``user``: status, the raw bytes, and the events."""
    with lab.clients[user].stream(
        "POST", "/agent", json=body, headers={"Accept": "text/event-stream"}
    ) as response:
        raw = response.read()
    if response.status_code != 200:
        return response.status_code, raw, []
    events = [m["data"] for m in sse_messages(iter(raw.decode().splitlines()))]
    return 200, raw, events


def decision(paused: Paused, kind: Kind) -> dict[str, Any]:
    # The body names mallory: the server records the authenticated user instead.
    mallory = {"id": "mallory", "type": "human"}
    built = build_decision(paused.requested, decision=kind, actor=mallory)
    document: dict[str, Any] = built.to_json()
    return document


def resume_entry(paused: Paused, kind: Kind) -> dict[str, Any]:
    if kind == "cancel":
        return {"interruptId": paused.interrupt["id"], "status": "cancelled"}
    return {
        "interruptId": paused.interrupt["id"],
        "status": "resolved",
        "payload": {"aais": decision(paused, kind)},
    }


def leaks(paused: Paused, text: str | bytes) -> bool:
    """Whether ``text`` holds anything of the request: its path, request or interrupt id."""
    found = text.decode() if isinstance(text, bytes) else text
    return any(
        value in found for value in (paused.marker, paused.request_id, paused.interrupt["id"])
    )


def pending(lab: Lab, paused: Paused) -> bool:
    return lab.site.authority.get_resolution(paused.request_id) is None


def visible_pending(lab: Lab, user: str) -> set[str]:
    """Every registered request still pending that ``user`` may see."""
    return {rid for rid, p in lab.requests.items() if pending(lab, p) and may(user, "view", p)}


def settle(lab: Lab, quiet: float = 0.3, timeout: float = 15.0) -> None:
    """Wait until the background resumes of earlier decisions stop writing to the ledger."""
    deadline = time.monotonic() + timeout
    tip, since = lab.site.authority.ledger.audit_tip(), time.monotonic()
    while time.monotonic() - since < quiet:
        assert time.monotonic() < deadline, "the ledger never went quiet"
        time.sleep(0.05)
        now = lab.site.authority.ledger.audit_tip()
        if now != tip:
            tip, since = now, time.monotonic()


def wait_for_effect(lab: Lab, paused: Paused, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not lab.site.effects.list(paused.thread_id):
        assert time.monotonic() < deadline, "the approved action did not run"
        time.sleep(0.05)


def actor_of(lab: Lab, paused: Paused) -> str:
    """Who the recorded resolution names: the decision's actor, or who cancelled."""
    recorded = lab.site.authority.get_resolution(paused.request_id)
    assert recorded is not None
    by = (recorded.resolution.extensions or {}).get(RESOLVED_BY_EXTENSION)
    if by is not None:
        return str(by["id"])
    decided = [
        e
        for e in lab.site.authority.events_after(0, limit=100_000).events
        if e["type"] == "approval.decided" and e["decision"]["request_id"] == paused.request_id
    ]
    return str(decided[-1]["decision"]["actor"]["id"])


# -- one access per channel ---------------------------------------------------------------


def try_http_decision(
    lab: Lab, user: str, paused: Paused, kind: Kind, *, browser: bool = False
) -> dict[str, Any] | None:
    """``POST /approvals/{id}/decisions`` with ``user``'s bearer token, or from their
    signed-in browser (cookie and CSRF header): 403 ``aais.forbidden`` unless the policy
    allows."""
    allowed = may(user, verb_of(kind), paused, kind)
    client = lab.sessions[user] if browser else lab.clients[user]
    with access(lab, allowed, paused) as attempt:
        response = client.post(
            f"/approvals/{paused.request_id}/decisions", json=decision(paused, kind)
        )
        attempt.saw(response.status_code, through=response.status_code != 403)
        body: dict[str, Any] = response.json()
        if not allowed:
            assert response.status_code == 403, body
            assert body["error"]["code"] == FORBIDDEN
            assert not leaks(paused, body["error"]["message"])
            return None
        assert response.status_code == 200, body
        return body


def try_ws_decision(
    lab: Lab, user: str, ws: ClientConnection, paused: Paused, kind: Kind
) -> dict[str, Any]:
    """A decision frame on ``user``'s open connection: an error frame ``aais.forbidden``
    unless allowed (the reply, either way)."""
    allowed = may(user, verb_of(kind), paused, kind)
    with access(lab, allowed, paused) as attempt:
        ws.send(json.dumps(decision(paused, kind)))
        reply = receive_until(
            ws, lambda d: "error" in d or d.get("stream", "").startswith("aais-langgraph.ws_")
        )
        attempt.saw(200, through="error" not in reply)
        if not allowed:
            assert reply["error"]["code"] == FORBIDDEN, reply
            assert not leaks(paused, reply["error"]["message"])
        else:
            assert reply["type"] == "approval.resolved", reply
        return reply


def try_agui_answer(lab: Lab, user: str, paused: Paused, kind: Kind) -> list[dict[str, Any]]:
    """A resume entry on AG-UI: ``RUN_ERROR aais.forbidden`` unless allowed, the card offered
    again to a user who may see the thread, and nothing of it to one who may not."""
    allowed = may(user, verb_of(kind), paused, kind)
    body = run_agent_input(paused.thread_id, resume=[resume_entry(paused, kind)])
    with access(lab, allowed, paused) as attempt:
        status, raw, events = agui(lab, user, body)
        types = [e["type"] for e in events]
        attempt.saw(status, through="RUN_ERROR" not in types)
        assert status == 200, raw[:300]
        if allowed:
            assert types[-1] == "RUN_FINISHED" and "RUN_ERROR" not in types, events
            return events
        error = events[1]
        assert types[:2] == ["RUN_STARTED", "RUN_ERROR"], events
        assert error["code"] == FORBIDDEN, error
        if may(user, "view", paused):
            assert types == ["RUN_STARTED", "RUN_ERROR", "RUN_STARTED", "RUN_FINISHED"], types
            offered = events[-1]["outcome"]["interrupts"]
            assert [i["id"] for i in offered] == [paused.interrupt["id"]]
        else:
            assert types == ["RUN_STARTED", "RUN_ERROR"], types
            assert not leaks(paused, raw), raw
        assert pending(lab, paused)
        return events


def reads_thread(user: str, paused: Paused) -> bool:
    """Whether ``user`` may read the thread itself: who started it, or an auditor."""
    return user == paused.requester or "audit" in USERS[user]


def check_views(lab: Lab, user: str, paused: Paused) -> None:
    """The thread page, the explanations and an AG-UI reconnect, as ``user``."""
    allowed = may(user, "view", paused)
    client = lab.clients[user]
    with access(lab, allowed, paused) as attempt:
        response = client.get(f"/inbox/threads/{paused.thread_id}")
        attempt.saw(response.status_code, through=paused.request_id in response.text)
        assert response.status_code == 200
        body = response.json()
        if allowed:
            assert [i["request_id"] for i in body["interrupts"]] == [paused.request_id]
            # who started the thread and the auditors read it; an approver follows the
            # request only, never the thread's messages
            assert (paused.marker in response.text) is reads_thread(user, paused)
        else:
            # answered as a thread nobody started: whether it exists is not told
            assert body == {
                "thread_id": paused.thread_id,
                "messages": [],
                "interrupts": [],
                "settled": True,
            }
            assert not leaks(paused, response.text)
    with access(lab, allowed, paused) as attempt:
        response = client.get(f"/inbox/explanations/{paused.request_id}")
        attempt.saw(response.status_code, through=response.status_code != 404)
        if allowed:
            assert response.status_code == 200
            assert response.json()["request_id"] == paused.request_id
        else:
            assert response.status_code == 404
            assert response.json()["error"]["code"] == "aais.unknown_request"
    with access(lab, allowed, paused) as attempt:
        status, raw, events = agui(lab, user, run_agent_input(paused.thread_id))
        types = [e["type"] for e in events]
        attempt.saw(status, through=status == 200 and "RUN_ERROR" not in types)
        assert status == 200
        if allowed:
            assert types == ["RUN_STARTED", "RUN_FINISHED"], events
            offered = events[-1]["outcome"]["interrupts"]
            assert [i["id"] for i in offered] == [paused.interrupt["id"]]
        else:
            assert types == ["RUN_STARTED", "RUN_ERROR"], events
            assert events[1]["code"] == FORBIDDEN
            assert not leaks(paused, raw), raw
    assert pending(lab, paused) and lab.site.effects.list(paused.thread_id) == []


def snapshot_ids(document: dict[str, Any]) -> set[str]:
    assert document["type"] == "approval.snapshot", document
    return {request["id"] for request in document["snapshot"]["pending"]}


def check_listing(lab: Lab, user: str, shown: set[str], expected: set[str], *among: Paused) -> None:
    """``shown`` (a listing's request ids) is exactly ``expected``; each of ``among`` counts
    as one access (allowed when ``user`` may see it)."""
    for paused in among:
        allowed = may(user, "view", paused)
        with access(lab, allowed, paused) as attempt:
            attempt.saw(200, through=paused.request_id in shown)
            assert (paused.request_id in shown) == allowed, (user, paused.requester, paused.kind)
    assert shown == expected, user


def request_ids_of(envelope: dict[str, Any]) -> str | None:
    for part, key in (("request", "id"), ("decision", "request_id"), ("resolution", "request_id")):
        if isinstance(envelope.get(part), dict):
            return str(envelope[part][key])
    return None


# -- views -------------------------------------------------------------------------------


def test_each_user_sees_exactly_the_requests_the_policy_shows_them(lab: Lab) -> None:
    settle(lab)
    world = three(lab)
    for user in USERS:
        for client in (lab.clients[user], lab.sessions[user]):
            response = client.get("/approvals/snapshot")
            assert response.status_code == 200
            shown = snapshot_ids(response.json())
            check_listing(lab, user, shown, visible_pending(lab, user), *world)
        for paused in world:
            check_views(lab, user, paused)


def test_streams_start_from_the_visible_snapshot_and_carry_only_visible_events(
    lab: Lab,
) -> None:
    settle(lab)
    world = three(lab)
    with ExitStack() as stack:
        streams: dict[str, Iterator[dict[str, Any]]] = {}
        sockets: dict[str, ClientConnection] = {}
        as_of: dict[str, int] = {}
        for user in USERS:
            response = stack.enter_context(
                lab.clients[user].stream("GET", "/approvals/events", timeout=10)
            )
            assert response.status_code == 200
            streams[user] = sse_messages(response.iter_lines())
            sockets[user] = stack.enter_context(open_ws(lab.site, token=f"{user}-token"))
        for user in USERS:
            expected = visible_pending(lab, user)
            first = next(streams[user])["data"]
            as_of[user] = first["snapshot"]["as_of_sequence"]
            check_listing(lab, user, snapshot_ids(first), expected, *world)
            check_listing(lab, user, snapshot_ids(receive(sockets[user])), expected, *world)

        # New requests by others, then one everybody sees: once a stream carries that one,
        # it has carried everything recorded before it that it was going to.
        hidden_from_alice_and_bob = pause(lab, "dave", "purge")
        hidden_from_carol_and_dave = pause(lab, "bob", "delete")
        marker = pause(lab, "alice", "archive")
        fresh = [hidden_from_alice_and_bob, hidden_from_carol_and_dave]

        def read(
            sse: Iterator[dict[str, Any]],
            ws: ClientConnection,
            until: Callable[[dict[str, Any]], bool],
        ) -> tuple[set[str], set[str]]:
            """Request ids on an SSE stream and a WebSocket until ``until`` matches on each."""
            seen_sse: set[str] = set()
            deadline = time.monotonic() + 15
            for message in sse:
                assert time.monotonic() < deadline, "the SSE stream never reached the marker"
                data = message["data"]
                if request_ids_of(data) is not None:
                    seen_sse.add(str(request_ids_of(data)))
                if until(data):
                    break
            seen_ws: set[str] = set()

            def collect(document: dict[str, Any]) -> bool:
                if request_ids_of(document) is not None:
                    seen_ws.add(str(request_ids_of(document)))
                return until(document)

            receive_until(ws, collect)
            return seen_sse, seen_ws

        def is_requested(paused: Paused) -> Callable[[dict[str, Any]], bool]:
            return lambda d: (
                d.get("type") == "approval.requested" and (d["request"]["id"] == paused.request_id)
            )

        def is_resolved(paused: Paused) -> Callable[[dict[str, Any]], bool]:
            return lambda d: (
                d.get("type") == "approval.resolved"
                and (d["resolution"]["request_id"] == paused.request_id)
            )

        def check_seen(user: str, seen: set[str]) -> None:
            check_listing(
                lab,
                user,
                seen & {p.request_id for p in fresh},
                {p.request_id for p in fresh if may(user, "view", p)},
                *fresh,
            )
            assert marker.request_id in seen

        for user in USERS:
            for seen in read(streams[user], sockets[user], is_requested(marker)):
                check_seen(user, seen)

        # Later events of a request follow its visibility too: decisions and resolutions.
        assert try_http_decision(lab, "carol", hidden_from_alice_and_bob, "approve") is not None
        assert try_http_decision(lab, "alice", hidden_from_carol_and_dave, "deny") is not None
        assert try_http_decision(lab, "bob", marker, "deny") is not None
        wait_for_effect(lab, hidden_from_alice_and_bob)
        settle(lab)
        for user in USERS:
            for seen in read(streams[user], sockets[user], is_resolved(marker)):
                check_seen(user, seen)

        # A client resuming after a sequence (Last-Event-ID, ?after=) replays through the
        # same filter: every event since the first snapshots, none of another's requests.
        for user in USERS:
            after = str(as_of[user])
            response = stack.enter_context(
                lab.clients[user].stream(
                    "GET", "/approvals/events", headers={"Last-Event-ID": after}, timeout=10
                )
            )
            assert response.status_code == 200
            ws = stack.enter_context(open_ws(lab.site, f"?after={after}", token=f"{user}-token"))
            for seen in read(sse_messages(response.iter_lines()), ws, is_resolved(marker)):
                check_seen(user, seen)
    assert lab.site.effects.list(hidden_from_carol_and_dave.thread_id) == []
    for paused in world:
        assert pending(lab, paused)


# -- decisions and cancels -----------------------------------------------------------------


def test_every_refused_decision_and_cancel_is_refused_on_every_channel(lab: Lab) -> None:
    settle(lab)
    world = three(lab)
    with ExitStack() as stack:
        sockets = {
            user: stack.enter_context(open_ws(lab.site, token=f"{user}-token")) for user in USERS
        }
        for ws in sockets.values():
            receive(ws)
        refused = 0
        for paused in world:
            for user in USERS:
                for kind in KINDS:
                    if may(user, verb_of(kind), paused, kind):
                        continue
                    refused += 1
                    try_http_decision(lab, user, paused, kind)
                    try_http_decision(lab, user, paused, kind, browser=True)
                    try_ws_decision(lab, user, sockets[user], paused, kind)
                    try_agui_answer(lab, user, paused, kind)
                    assert pending(lab, paused)
        assert refused == 29  # 8 on alice's purge, 11 on bob's deletion, 10 on carol's purge

        # Then the users the policy names decide, one per channel, as themselves.
        alices, bobs, carols = world
        assert try_http_decision(lab, "dave", alices, "approve") is not None
        reply = try_ws_decision(lab, "alice", sockets["alice"], bobs, "approve")
        assert reply["resolution"]["outcome"] == "approved"
    try_agui_answer(lab, "dave", carols, "approve")
    for paused in world:
        wait_for_effect(lab, paused)
        recorded = lab.site.authority.get_resolution(paused.request_id)
        assert recorded is not None and recorded.approved
    assert [actor_of(lab, p) for p in world] == ["dave", "alice", "dave"]

    # The recent resolutions each user is shown follow the same visibility.
    for user in USERS:
        response = lab.clients[user].get("/inbox/resolutions")
        assert response.status_code == 200
        shown = {item["request_id"] for item in response.json()["resolutions"]}
        assert all(may(user, "view", lab.requests[rid]) for rid in shown), (user, shown)
        ours = {p.request_id for p in world}
        check_listing(
            lab,
            user,
            shown & ours,
            {p.request_id for p in world if may(user, "view", p)},
            *world,
        )


def test_the_requester_and_the_approvers_may_cancel_on_ag_ui(lab: Lab) -> None:
    settle(lab)
    alices, bobs, carols = three(lab)
    # alice withdraws her own purge (she is no approver), alice cancels bob's deletion (an
    # approver, not its requester), carol withdraws her own purge (both).
    for user, paused in (("alice", alices), ("alice", bobs), ("carol", carols)):
        events = try_agui_answer(lab, user, paused, "cancel")
        assert events[-1]["type"] == "RUN_FINISHED"
        recorded = lab.site.authority.get_resolution(paused.request_id)
        assert recorded is not None and recorded.resolution.outcome == "cancelled"
        assert actor_of(lab, paused) == user
        assert lab.site.effects.list(paused.thread_id) == []


def test_a_requester_may_not_approve_their_own_request_but_a_colleague_may(lab: Lab) -> None:
    settle(lab)
    first = pause(lab, "carol", "purge")
    second = pause(lab, "carol", "purge")
    with open_ws(lab.site, token="carol-token") as ws:
        receive(ws)
        assert try_http_decision(lab, "carol", first, "approve") is None
        assert "error" in try_ws_decision(lab, "carol", ws, first, "approve")
    try_agui_answer(lab, "carol", first, "approve")
    assert pending(lab, first)
    # dave, of the same group, may approve it; carol may still deny her own.
    assert try_http_decision(lab, "dave", first, "approve") is not None
    wait_for_effect(lab, first)
    assert actor_of(lab, first) == "dave"
    try_agui_answer(lab, "carol", second, "deny")
    recorded = lab.site.authority.get_resolution(second.request_id)
    assert recorded is not None and recorded.resolution.outcome == "denied"
    assert actor_of(lab, second) == "carol"
    assert lab.site.effects.list(second.thread_id) == []


def test_signed_in_people_decide_and_cancel_as_themselves_over_their_sessions(lab: Lab) -> None:
    settle(lab)
    alices, bobs, carols = three(lab)
    # Without the CSRF header a session's decision is refused and changes nothing.
    with access(lab, False, carols) as attempt:
        bare = httpx.Client(base_url=lab.site.url, cookies=lab.sessions["dave"].cookies)
        with bare:
            refused = bare.post(
                f"/approvals/{carols.request_id}/decisions", json=decision(carols, "approve")
            )
        attempt.saw(refused.status_code, through=refused.status_code != 403)
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "aais.csrf"
    assert try_http_decision(lab, "carol", carols, "approve", browser=True) is None  # her own
    assert try_http_decision(lab, "dave", carols, "approve", browser=True) is not None
    assert try_http_decision(lab, "alice", bobs, "deny", browser=True) is not None
    cancelled = lab.sessions["alice"].post(f"/approvals/{alices.request_id}/cancel", json={})
    assert cancelled.status_code == 200, cancelled.text
    wait_for_effect(lab, carols)
    assert [actor_of(lab, p) for p in (alices, bobs, carols)] == ["alice", "alice", "dave"]
    outcomes = []
    for paused in (alices, bobs, carols):
        recorded = lab.site.authority.get_resolution(paused.request_id)
        assert recorded is not None
        outcomes.append(recorded.resolution.outcome)
    assert outcomes == ["cancelled", "denied", "approved"]
    decided = [
        e["decision"]["actor"]
        for e in lab.site.authority.events_after(0, limit=100_000).events
        if e["type"] == "approval.decided" and e["decision"]["request_id"] == carols.request_id
    ]
    assert decided[-1]["id"] == "dave"
    assert str(decided[-1]["authenticated_by"]).startswith("oidc:")
    assert lab.site.effects.list(alices.thread_id) == lab.site.effects.list(bobs.thread_id) == []


def test_stdio_acts_as_the_administrator_where_no_member_may_approve(lab: Lab) -> None:
    settle(lab)
    # alice is the only sre member and started this run: nobody in the policy may approve it.
    own = pause(lab, "alice", "delete")
    assert try_http_decision(lab, "alice", own, "approve") is None
    # The stdio presenter's refusal, for a principal that is no administrator.
    output = io.StringIO()
    alice = Principal(Actor(id="alice", type="human"), USERS["alice"])
    refusing = StdioPresenter(
        lab.site.authority, actor=alice, output=output, diagnostics=io.StringIO()
    )
    with access(lab, False, own) as attempt:
        refusing.answer(json.dumps(decision(own, "approve")).encode())
        [line] = [json.loads(text) for text in output.getvalue().splitlines()]
        attempt.saw(200, through="error" not in line)
        assert line["error"]["code"] == FORBIDDEN
    # The CLI presenter (the OS user, an administrator) may.
    with access(lab, True, own) as attempt, presenter(lab.site.db) as stdio:
        stdio.send(decision(own, "approve"))
        reply = stdio.read_until(is_reply)
        attempt.saw(200, through="error" not in reply)
        assert reply["resolution"]["outcome"] == "approved", reply
        assert stdio.close() == 0
    assert actor_of(lab, own) == OS_USER
    # The recorded answer resumes the thread on alice's next visit (no watcher runs here).
    status, _, events = agui(lab, "alice", run_agent_input(own.thread_id))
    assert status == 200 and events[-1]["type"] == "RUN_FINISHED", events
    assert lab.site.effects.list(own.thread_id) == [(own.thread_id, "delete_file", own.marker)]


# -- grants --------------------------------------------------------------------------------


def test_grants_are_listed_and_revoked_only_per_the_policy(lab: Lab) -> None:
    settle(lab)
    authority = lab.site.authority
    session = f"s-{uuid.uuid4().hex}"
    requested = authority.request(
        {
            "kind": "process.exec",
            "name": "shell.exec",
            "summary": "Run a command",
            "arguments": {"command": "git status -s"},
        },
        origin={"harness": "tests", "session_id": session},
        choices=SESSION_CHOICES,
        expires_in=timedelta(minutes=5),
        context={"requester": "bob"},
    )
    grant_request = Paused("bob", "process.exec", "", session, {"id": "none"}, requested.request.id)
    lab.requests[grant_request.request_id] = grant_request
    alice = Principal(Actor(id="alice", type="human"), USERS["alice"])
    decided = build_decision(requested, decision="approve", scope="session", actor=alice.actor)
    assert authority.decide(decided, actor=alice).resolution.outcome == "approved"
    [grant] = authority.list_grants(session_id=session)

    for user in USERS:
        response = lab.clients[user].get("/inbox/grants")
        assert response.status_code == 200
        grants = response.json()["grants"]
        assert all(may(user, "view", lab.requests[g["request_id"]]) for g in grants)
        shown = {g["request_id"] for g in grants}
        check_listing(
            lab,
            user,
            shown & {grant_request.request_id},
            {grant_request.request_id} if may(user, "view", grant_request) else set(),
            grant_request,
        )

    def live() -> bool:
        return any(g.grant_id == grant.grant_id for g in authority.list_grants())

    for user in ("bob", "carol", "dave", "erin"):  # the requester may not revoke either
        assert not may(user, "revoke", grant_request)
        with access(lab, False, grant_request) as attempt:
            response = lab.clients[user].post(f"/inbox/grants/{grant.grant_id}/revoke", json={})
            attempt.saw(response.status_code, through=response.status_code != 403 or not live())
            assert response.status_code == 403
            assert response.json()["error"]["code"] == FORBIDDEN
            assert live()
    with access(lab, True, grant_request) as attempt:
        response = lab.clients["alice"].post(f"/inbox/grants/{grant.grant_id}/revoke", json={})
        attempt.saw(response.status_code, through=True)
        assert response.status_code == 200 and response.json()["revoked"] is True
    assert not live()


# -- separation of duties across the steps of one run -------------------------------------


class TwoSteps(TypedDict, total=False):
    done: list[str]


def two_step_graph() -> Any:
    """Two purges in a row, each gated: the second is asked for only after the first ran."""

    def gated(step: str) -> Any:
        def action(state: TwoSteps) -> dict[str, Any]:
            return {
                "kind": "fs.purge",
                "name": f"purge_{step}",
                "summary": f"Purge the {step} file",
                "arguments": {"step": step},
            }

        def body(state: TwoSteps) -> dict[str, Any]:
            return {"done": [*(state.get("done") or []), step]}

        body.__name__ = f"purge_{step}"
        return requires_approval(action)(body)

    builder = StateGraph(TwoSteps)
    builder.add_node("first", gated("first"))
    builder.add_node("second", gated("second"))
    builder.add_edge(START, "first")
    builder.add_edge("first", "second")
    builder.add_edge("second", END)
    return builder.compile(checkpointer=InMemorySaver())


@pytest.mark.parametrize("channel", ["http", "agui"])
def test_a_run_resumed_by_an_approver_still_acts_for_who_started_it(channel: str) -> None:
    graph = two_step_graph()
    authority = ApprovalAuthority(authorizer=AccessPolicy.from_mapping(POLICY))
    app = create_app(
        graph,
        authority=authority,
        authenticate=authenticate,
        settings=ServiceSettings(stream_poll=0.05),
    )
    config = {"configurable": {"thread_id": f"thread_{uuid.uuid4().hex}"}}
    thread_id = config["configurable"]["thread_id"]

    def run(client: httpx.Client, user: str, body: dict[str, Any]) -> list[dict[str, Any]]:
        with client.stream(
            "POST", "/agent", json=body, headers={**bearer(user), "Accept": "text/event-stream"}
        ) as response:
            raw = response.read()
        assert response.status_code == 200, raw[:300]
        return [m["data"] for m in sse_messages(iter(raw.decode().splitlines()))]

    with serve(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        # carol starts the run; dave (finance, like her) approves its first step.
        events = run(client, "carol", run_agent_input(thread_id, text="go"))
        [first] = events[-1]["outcome"]["interrupts"]
        answer = build_decision(
            first["metadata"]["aais"], decision="approve", actor={"id": "dave", "type": "human"}
        ).to_json()
        if channel == "agui":
            entry = {"interruptId": first["id"], "status": "resolved", "payload": {"aais": answer}}
            assert (
                run(client, "dave", run_agent_input(thread_id, resume=[entry]))[-1]["type"]
                == "RUN_FINISHED"
            )
        else:
            request_id = first["metadata"]["aais"]["request"]["id"]
            response = client.post(
                f"/approvals/{request_id}/decisions", json=answer, headers=bearer("dave")
            )
            assert response.status_code == 200
        deadline = time.monotonic() + 15
        while graph.get_state(config).values.get("done") != ["first"] or not (
            graph.get_state(config).interrupts
        ):
            assert time.monotonic() < deadline, "the second step was never asked for"
            time.sleep(0.05)
        [second] = graph.get_state(config).interrupts
        requested = second.value
        assert requested["request"]["action"]["name"] == "purge_second"
        # The second step is still carol's run: she may not approve it herself.
        mine = build_decision(
            requested, decision="approve", actor={"id": "carol", "type": "human"}
        ).to_json()
        response = client.post(
            f"/approvals/{requested['request']['id']}/decisions", json=mine, headers=bearer("carol")
        )
        record(
            CATEGORY,
            1,
            failed_open=int(response.status_code == 200),
            server_errors=int(response.status_code >= 500),
        )
        assert requested["request"]["extensions"][REQUESTER_EXTENSION] == {"id": "carol"}
        assert response.status_code == 403
        assert response.json()["error"]["code"] == FORBIDDEN
        assert graph.get_state(config).values.get("done") == ["first"]

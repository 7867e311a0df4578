"""An escalation shows on open streams: a member of the escalated-to group holding an
SSE stream or a WebSocket receives the request's ``approval.requested`` once the
escalation ran, then its later events; nobody else receives anything new, and whoever
could view it already gets no second copy. Under the access policy's rules and under
Cedar policies that grant the escalated groups (``resource.escalated_to``) alike."""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import aais
import httpx
import pytest
from fastapi import Request
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection

from aais_agui import ApprovalService, Authenticated, ServiceSettings, create_app
from aais_langgraph import ApprovalAuthority, ThreadDriver, build_decision
from aais_langgraph.authority import AccessPolicy, CedarAuthorizer
from aais_langgraph.ledger import SqliteLedger
from aais_langgraph.protocol import Actor
from aais_langgraph.webhooks import FollowUpRunner, SubscriptionPlan

from .conftest import Clock
from .demo_graph import EffectLog, build_demo_graph
from .http_support import serve, sse_messages
from .served_site import Site
from .transports.test_websocket import open_ws, receive

pytestmark = pytest.mark.slow

POLICY = AccessPolicy.from_mapping(
    {
        "default_approvers": ["sre"],
        "approvers": [
            {
                "kinds": ["fs.delete"],
                "groups": ["sre"],
                "escalate_after": 60,
                "escalate_to": ["managers"],
            }
        ],
    }
)
PLAN = SubscriptionPlan([], policy=POLICY)
CEDAR = """
permit (principal in Group::"sre", action in [Action::"view", Action::"decide"], resource);
permit (principal, action in [Action::"view", Action::"decide"], resource is Request)
when { resource.escalated_to.containsAny(principal.groups) };
"""
"""The same access in Cedar (the plan's rules still say what escalates, when, to whom)."""
PEOPLE = {"mia": "managers", "ivan": "interns", "sam": "sre"}
"""Who holds a stream: the escalated-to member, a non-member, an approver from the start."""
POLL = 0.05


def authenticate(request: Request) -> Authenticated | None:
    token = request.headers.get("authorization", "").removeprefix("Bearer ")
    user = token.removesuffix("-token")
    if user not in PEOPLE:
        return None
    return Authenticated(Actor(id=user, type="human"), groups=frozenset({PEOPLE[user]}))


@dataclass
class Served:
    site: Site
    clock: Clock
    runner: FollowUpRunner

    def pause(self) -> str:
        """Run a fresh thread until it waits on a delete: its request id."""
        graph, authority = self.site.graph, self.site.authority
        config = ThreadDriver(graph, authority).run_config(thread_id=f"t_{uuid.uuid4().hex}")
        path = f"/srv/{uuid.uuid4().hex[:8]}.txt"
        graph.invoke({"messages": [HumanMessage(content=f"delete {path}")]}, config)
        [interrupt] = graph.get_state(config).interrupts
        return str(interrupt.value["request"]["id"])


@pytest.fixture(params=["access-policy", "cedar"])
def served(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Served]:
    clock = Clock()
    ledger = SqliteLedger(tmp_path / "ledger.db", synchronous="NORMAL", delivery_plan=PLAN)
    ledger.setup()
    authorizer = POLICY if request.param == "access-policy" else CedarAuthorizer(CEDAR)
    authority = ApprovalAuthority(ledger, authorizer=authorizer, clock=clock)
    effects = EffectLog(tmp_path / "effects.db")
    graph = build_demo_graph(effects, InMemorySaver())
    settings = ServiceSettings(stream_poll=POLL, follow_ups_every=None)
    service = ApprovalService(graph, authority, settings=settings)
    app = create_app(service, authenticate=authenticate)
    with serve(app) as url:  # no lifespan: the follow-ups run here, on the clock
        site = Site(url, tmp_path / "ledger.db", authority, effects, graph)
        yield Served(site, clock, FollowUpRunner(authority, PLAN))
    ledger.close()


@dataclass
class Reader:
    """The envelopes one open stream delivered, read in a thread as they come."""

    envelopes: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, envelope: dict[str, Any]) -> None:
        with self.lock:
            self.envelopes.append(envelope)

    def of(self, kind: str, request_id: str) -> list[dict[str, Any]]:
        with self.lock:
            return [e for e in self.envelopes if e.get("type") == kind and about(e) == request_id]

    def snapshot_ids(self) -> set[str]:
        with self.lock:
            first = self.envelopes[0]
        assert first["type"] == "approval.snapshot"
        return {item["id"] for item in first["snapshot"]["pending"]}


def about(envelope: dict[str, Any]) -> str | None:
    for part, key in (("request", "id"), ("decision", "request_id"), ("resolution", "request_id")):
        if isinstance(envelope.get(part), dict):
            return str(envelope[part][key])
    return None


def read_sse(stack: ExitStack, site: Site, user: str) -> Reader:
    reader = Reader()
    client = stack.enter_context(httpx.Client(base_url=site.url, timeout=30))
    response = stack.enter_context(
        client.stream("GET", "/approvals/events", headers={"Authorization": f"Bearer {user}-token"})
    )
    assert response.status_code == 200
    # The reader thread blocks in a read: shutting the socket down ends it, and the
    # server sees the client leave (closing the client from here would not).
    sock = response.extensions["network_stream"].get_extra_info("socket")
    stack.callback(sock.shutdown, socket.SHUT_RDWR)
    messages = sse_messages(response.iter_lines())

    def run() -> None:
        try:
            for message in messages:
                reader.add({**message["data"], "_sse_id": message.get("id")})
        except (httpx.HTTPError, RuntimeError, ValueError):
            return  # the stream closed at the end of the test

    threading.Thread(target=run, daemon=True).start()
    return reader


def read_ws(stack: ExitStack, site: Site, user: str) -> Reader:
    reader = Reader()
    ws: ClientConnection = stack.enter_context(open_ws(site, token=f"{user}-token"))

    def run() -> None:
        try:
            while True:
                reader.add(receive(ws, timeout=60))
        except (ConnectionClosed, TimeoutError):
            return  # the socket closed at the end of the test

    threading.Thread(target=run, daemon=True).start()
    return reader


def wait_for(probe: Callable[[], Any], what: str, timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := probe()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)
    return found


def test_an_escalation_reaches_the_open_streams_of_the_escalated_group_only(
    served: Served,
) -> None:
    site = served.site
    earlier = served.pause()  # pending before the streams open
    with ExitStack() as stack:
        sse = {user: read_sse(stack, site, user) for user in PEOPLE}
        ws = {user: read_ws(stack, site, user) for user in ("mia", "ivan")}
        for reader in (*sse.values(), *ws.values()):
            wait_for(lambda r=reader: r.envelopes, "the snapshot")
        assert sse["mia"].snapshot_ids() == set() == ws["mia"].snapshot_ids()
        assert sse["sam"].snapshot_ids() == {earlier}
        later = served.pause()  # raised while they watch: only sam may see it yet
        wait_for(lambda: sse["sam"].of("approval.requested", later), "sam's copy")
        time.sleep(5 * POLL)
        assert not sse["mia"].of("approval.requested", later)

        served.clock.advance(timedelta(seconds=61))
        ran = [(work.request_id, work.target) for work in served.runner.run_due()]
        assert sorted(ran) == sorted([(earlier, "escalation"), (later, "escalation")])

        for reader in (sse["mia"], ws["mia"]):
            for request_id in (earlier, later):
                [shown] = wait_for(
                    lambda r=reader, rid=request_id: r.of("approval.requested", rid),
                    "the escalated request on mia's stream",
                )
                assert shown["request"]["id"] == request_id
        stored = site.authority.ledger.get_request(later)
        assert stored is not None
        [by_sse] = sse["mia"].of("approval.requested", later)
        [by_ws] = ws["mia"].of("approval.requested", later)
        assert by_sse["_sse_id"] is None  # it does not move the resume position
        del by_sse["_sse_id"]
        aais.validate(by_sse)
        for shown, own in ((by_sse, "aais-langgraph.sse_"), (by_ws, "aais-langgraph.ws_")):
            # The same request, on the connection's own stream and sequence (SPEC §3):
            # the authority's stream stays in order after the snapshot's as_of_sequence.
            assert shown["request"] == stored.envelope["request"]
            assert shown["stream"].startswith(own) and shown["stream"] != stored.envelope["stream"]
            assert shown["id"] != stored.envelope["id"]
        assert sorted(
            e["sequence"] for e in sse["mia"].envelopes if e["stream"] == by_sse["stream"]
        ) == [1, 2]

        # The request's later events reach mia too: mia decides it, everyone who may sees it.
        requested = site.authority.get_request(later)
        assert requested is not None
        decided = build_decision(requested, decision="deny", actor={"id": "mia", "type": "human"})
        answer = httpx.post(
            f"{site.url}/approvals/{later}/decisions",
            content=json.dumps(decided.to_json()),
            headers={"Authorization": "Bearer mia-token", "Content-Type": "application/json"},
            timeout=30,
        )
        assert answer.status_code == 200, answer.text
        for reader in (sse["mia"], ws["mia"], sse["sam"]):
            wait_for(lambda r=reader: r.of("approval.resolved", later), "the resolution")
        time.sleep(5 * POLL)
        for reader in (sse["mia"], ws["mia"]):
            # The authority's events after the snapshot: in order, after its as_of_sequence.
            first, *rest = reader.envelopes
            followed = [e["sequence"] for e in rest if e["stream"] == stored.envelope["stream"]]
            assert len(followed) >= 2  # the decision and the resolution
            assert followed == sorted(set(followed))
            assert followed[0] > first["snapshot"]["as_of_sequence"]

        # The non-member got nothing; the approver from the start no second copy.
        for reader in (sse["ivan"], ws["ivan"]):
            assert reader.snapshot_ids() == set()
            assert [e["type"] for e in reader.envelopes] == ["approval.snapshot"]
        assert len(sse["sam"].of("approval.requested", later)) == 1
        assert not sse["sam"].of("approval.requested", earlier)  # it was in sam's snapshot


def test_a_reconnect_after_the_escalation_starts_from_a_snapshot_that_holds_it(
    served: Served,
) -> None:
    request_id = served.pause()
    served.clock.advance(timedelta(seconds=61))
    served.runner.run_due()
    with ExitStack() as stack:
        mia = read_sse(stack, served.site, "mia")
        wait_for(lambda: mia.envelopes, "the snapshot")
        assert mia.snapshot_ids() == {request_id}
        time.sleep(5 * POLL)
        assert not mia.of("approval.requested", request_id)  # no second copy after it

"""A thread is a resource: who may start it, post to it and read it, and who its runs act for.

The served app over real HTTP, under one team's rules written twice (the TOML access
policy and Cedar): finance decides payments, SREs decide shell commands, support may
take over any thread, readers may read any thread, a requester may not approve their
own request, and the scraper's token may only read the metrics. Every refusal must
change nothing (no audit entry, no request, no effect) and leak no value of a request
the caller may not view.
"""

from __future__ import annotations

import hashlib
import json
import operator
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import httpx
import pytest
from fastapi import Request
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_config
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from aais_agui import Authenticated, create_app, run_agent_input
from aais_langgraph import ApprovalAuthority, build_decision, requires_approval
from aais_langgraph.authority import FORBIDDEN, HIDDEN_REQUEST, AccessPolicy, Authorizer
from aais_langgraph.authority.cedar import CedarAuthorizer
from aais_langgraph.protocol import Actor
from aais_langgraph.protocol.extensions import REQUESTER_EXTENSION
from hostile.report import record

from .demo_graph import EffectLog
from .http_support import serve, sse_messages

CATEGORY = "threads"

USERS: dict[str, tuple[str, frozenset[str]]] = {
    "alice": ("human", frozenset()),
    "bob": ("human", frozenset({"sre"})),
    "carol": ("human", frozenset({"finance"})),
    "sam": ("human", frozenset({"support", "sre"})),
    "rita": ("human", frozenset({"readers"})),
    "dave": ("human", frozenset()),
    "scraper": ("policy", frozenset({"sre"})),
    "bot": ("policy", frozenset()),
}

POLICY: dict[str, Any] = {
    "default_approvers": [],
    "approvers": [
        {"kinds": ["payments.*"], "groups": ["finance"]},
        {"kinds": ["process.exec"], "groups": ["sre"]},
    ],
    "separation_of_duties": {"from_risk": "medium"},
    "requesters": {"view_own": True, "cancel_own": True},
    "threads": {"post_groups": ["support"], "view_groups": ["readers"]},
    "services": [{"users": ["scraper"], "scopes": ["metrics"]}],
}

CEDAR = """
permit (principal is User, action == Action::"start", resource);
permit (principal is User, action in [Action::"post", Action::"view"], resource is Thread)
when { context.own };
permit (
    principal in Group::"support", action in [Action::"post", Action::"view"], resource is Thread
);
permit (principal in Group::"readers", action == Action::"view", resource is Thread);
permit (
    principal in Group::"finance",
    action in [Action::"view", Action::"decide", Action::"cancel"],
    resource is Request
) when { resource.kind like "payments.*" };
permit (
    principal in Group::"sre",
    action in [Action::"view", Action::"decide", Action::"cancel"],
    resource is Request
) when { resource.kind == "process.exec" };
permit (principal is User, action in [Action::"view", Action::"cancel"], resource is Request)
when { context.own };
forbid (principal, action == Action::"decide", resource)
when { context.own && context.decision == "approve" };
permit (principal is User, action == Action::"metrics", resource);
permit (principal == Service::"scraper", action == Action::"metrics", resource);
"""

CHOICES = [
    {"decision": "approve", "scope": "once", "label": "Approve once"},
    {
        "decision": "approve",
        "scope": "session",
        "label": "Approve for this conversation",
        "scope_constraints": {"action_name": "shell"},
    },
    {"decision": "deny", "scope": "once", "label": "Deny"},
]


def argument(op: str, key: str) -> str:
    """The argument value an operation derives: not in any message, so a leak is its own."""
    return f"{op}-{hashlib.sha256(key.encode()).hexdigest()[:20]}"


class Conversation(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    key: str


def _last_words(state: Conversation) -> list[str]:
    human = [m for m in state.get("messages") or () if isinstance(m, HumanMessage)]
    return str(human[-1].content).split() if human else []


def build_graph(effects: EffectLog) -> Any:
    """``pay <key>``, ``shell <key>`` or ``both <key>`` (in parallel); anything else replies."""

    def route(state: Conversation) -> dict[str, Any]:
        words = _last_words(state)
        return {"key": words[1] if len(words) > 1 else "", "messages": []}

    def where(state: Conversation) -> list[str]:
        op = (_last_words(state) or [""])[0]
        return {"pay": ["pay"], "shell": ["shell"], "both": ["pay", "shell"]}.get(op, ["reply"])

    def gated(op: str, kind: str, risk: str) -> Any:
        def action(state: Conversation) -> dict[str, Any]:
            return {
                "kind": kind,
                "name": op,
                "summary": f"Run {op}",
                "arguments": {"target": argument(op, state.get("key", ""))},
            }

        def body(state: Conversation) -> dict[str, Any]:
            thread_id = get_config()["configurable"]["thread_id"]
            effects.record(thread_id, op, argument(op, state.get("key", "")))
            return {"messages": [AIMessage(content=f"{op} done")]}

        body.__name__ = op
        return requires_approval(action, risk={"level": risk, "reasons": [op]}, choices=CHOICES)(
            body
        )

    def reply(state: Conversation) -> dict[str, Any]:
        return {"messages": [AIMessage(content="hello")]}

    builder = StateGraph(Conversation)
    builder.add_node("route", route)
    builder.add_node("pay", gated("pay", "payments.transfer", "medium"))
    builder.add_node("shell", gated("shell", "process.exec", "high"))
    builder.add_node("reply", reply)
    builder.add_edge(START, "route")
    builder.add_conditional_edges("route", where, ["pay", "shell", "reply"])
    for node in ("pay", "shell", "reply"):
        builder.add_edge(node, END)
    return builder.compile(checkpointer=InMemorySaver())


def authenticate(request: Request) -> Authenticated | None:
    """``Authorization: Bearer <name>-token`` -> that user (or service), with their groups."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    name = token.strip().removesuffix("-token")
    if scheme.lower() != "bearer" or name not in USERS:
        return None
    kind, groups = USERS[name]
    return Authenticated(Actor(id=name, type=kind), groups=groups)  # type: ignore[arg-type]


def bearer(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {user}-token"}


@dataclass
class Site:
    url: str
    authority: ApprovalAuthority
    graph: Any
    effects: EffectLog
    clients: dict[str, httpx.Client] = field(default_factory=dict)

    def run(self, user: str, body: dict[str, Any]) -> tuple[bytes, list[dict[str, Any]]]:
        """POST one AG-UI run as ``user``: the raw bytes and the events."""
        with self.clients[user].stream(
            "POST", "/agent", json=body, headers={"Accept": "text/event-stream"}
        ) as response:
            raw = response.read()
        assert response.status_code == 200, raw[:300]
        return raw, [m["data"] for m in sse_messages(iter(raw.decode().splitlines()))]

    def say(self, user: str, thread_id: str, text: str) -> tuple[bytes, list[dict[str, Any]]]:
        return self.run(user, run_agent_input(thread_id, text=text))

    def decide(
        self, user: str, interrupt: dict[str, Any], kind: str = "approve", **extra: Any
    ) -> int:
        envelope = interrupt["metadata"]["aais"]
        answer = build_decision(
            envelope, decision=kind, actor={"id": user, "type": "human"}, **extra
        ).to_json()
        request_id = envelope["request"]["id"]
        response = self.clients[user].post(f"/approvals/{request_id}/decisions", json=answer)
        return response.status_code

    def requests(self, thread_id: str) -> list[Any]:
        return self.authority.ledger.requests_of_thread(thread_id)

    def wait_for_effects(self, thread_id: str, count: int) -> None:
        deadline = time.monotonic() + 15
        while len(self.effects.list(thread_id)) < count:
            assert time.monotonic() < deadline, "the approved action never ran"
            time.sleep(0.05)


@pytest.fixture(params=["policy file", "cedar"])
def site(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Site]:
    authorizer: Authorizer = (
        AccessPolicy.from_mapping(POLICY)
        if request.param == "policy file"
        else CedarAuthorizer(CEDAR)
    )
    authority = ApprovalAuthority(authorizer=authorizer)
    effects = EffectLog(tmp_path / "effects.db")
    graph = build_graph(effects)
    app = create_app(graph, authority=authority, authenticate=authenticate, metrics=True)
    with serve(app) as url:
        found = Site(url, authority, graph, effects)
        for user in USERS:
            found.clients[user] = httpx.Client(base_url=url, headers=bearer(user), timeout=30)
        try:
            yield found
        finally:
            for client in found.clients.values():
                client.close()


def new_thread() -> str:
    return f"thread_{uuid.uuid4().hex}"


def interrupts_of(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    finished = events[-1]
    assert finished["type"] == "RUN_FINISHED", finished
    return list((finished.get("outcome") or {}).get("interrupts") or [])


def refused_without_a_trace(site: Site, user: str, thread_id: str, text: str) -> None:
    """``user`` posts ``text``: RUN_ERROR aais.forbidden, and nothing at all changed."""
    tip = site.authority.ledger.audit_tip()
    before = len(site.requests(thread_id))
    effects = len(site.effects.list(thread_id))
    raw, events = site.say(user, thread_id, text)
    changed = site.authority.ledger.audit_tip() != tip or len(site.requests(thread_id)) != before
    record(CATEGORY, 1, failed_open=int(changed or events[-1]["type"] != "RUN_ERROR"))
    assert [e["type"] for e in events] == ["RUN_STARTED", "RUN_ERROR"], events
    assert events[-1]["code"] == FORBIDDEN
    assert not changed and len(site.effects.list(thread_id)) == effects
    assert argument(*text.split()) not in raw.decode()


def test_an_approver_may_not_post_to_someone_elses_thread(site: Site) -> None:
    thread_id = new_thread()
    # bob approved a command on alice's thread, so he follows it; it has finished
    [interrupt] = interrupts_of(site.say("alice", thread_id, "shell k0")[1])
    assert site.decide("bob", interrupt) == 200
    site.wait_for_effects(thread_id, 1)
    settled(site, thread_id)
    refused_without_a_trace(site, "bob", thread_id, "shell k1")  # an SRE, no taker-over
    refused_without_a_trace(site, "carol", thread_id, "pay k1")


def test_a_user_who_may_only_read_a_thread_may_not_post_to_it(site: Site) -> None:
    thread_id = new_thread()
    site.say("alice", thread_id, "hi")
    refused_without_a_trace(site, "rita", thread_id, "shell k2")
    refused_without_a_trace(site, "scraper", thread_id, "shell k2")  # a service's token


def test_a_run_acts_for_who_posted_it_not_for_who_started_the_thread(site: Site) -> None:
    thread_id = new_thread()
    site.say("alice", thread_id, "hi")
    # sam (support, and an SRE) takes the thread over and asks for a shell command
    [interrupt] = interrupts_of(site.say("sam", thread_id, "shell k3")[1])
    requester = interrupt["metadata"]["aais"]["request"]["extensions"][REQUESTER_EXTENSION]
    assert requester == {"id": "sam"}
    # separation of duties binds the one who posted: sam may not approve it himself
    status = site.decide("sam", interrupt)
    record(CATEGORY, 1, failed_open=int(status == 200))
    assert status == 403 and site.effects.list(thread_id) == []
    assert site.decide("bob", interrupt) == 200
    site.wait_for_effects(thread_id, 1)
    assert site.effects.list(thread_id) == [(thread_id, "shell", argument("shell", "k3"))]


def test_a_session_grant_covers_only_runs_of_the_user_it_was_granted_for(site: Site) -> None:
    thread_id = new_thread()
    [first] = interrupts_of(site.say("alice", thread_id, "shell k4")[1])
    assert site.decide("bob", first, scope="session") == 200
    site.wait_for_effects(thread_id, 1)
    # alice asks again: her grant covers it, nobody is asked
    settled(site, thread_id)
    assert interrupts_of(site.say("alice", thread_id, "shell k4")[1]) == []
    assert len(site.effects.list(thread_id)) == 2
    # sam posts the same command to her thread: the grant was not made for his runs
    [asked] = interrupts_of(site.say("sam", thread_id, "shell k4")[1])
    record(CATEGORY, 1, failed_open=int(len(site.effects.list(thread_id)) != 2))
    assert asked["metadata"]["aais"]["request"]["extensions"][REQUESTER_EXTENSION] == {"id": "sam"}
    assert len(site.effects.list(thread_id)) == 2


def settled(site: Site, thread_id: str) -> None:
    """Wait until the thread's run has finished (its resume ran in the background)."""
    deadline = time.monotonic() + 15
    while site.graph.get_state({"configurable": {"thread_id": thread_id}}).next:
        assert time.monotonic() < deadline, "the run never finished"
        time.sleep(0.05)


def thread_read(site: Site, user: str, thread_id: str) -> tuple[str, dict[str, Any]]:
    response = site.clients[user].get(f"/inbox/threads/{thread_id}")
    assert response.status_code == 200
    return response.text, response.json()


def test_a_mixed_thread_shows_each_viewer_only_the_requests_they_may_view(site: Site) -> None:
    thread_id = new_thread()
    pay, shell = sorted(
        interrupts_of(site.say("alice", thread_id, "both k5")[1]),
        key=lambda i: i["metadata"]["aais"]["request"]["action"]["name"],
    )
    pay_value, shell_value = argument("pay", "k5"), argument("shell", "k5")
    pay_id, shell_id = (i["metadata"]["aais"]["request"]["id"] for i in (pay, shell))
    expected = {
        # who: (the interrupts offered in full, the ones shown as hidden, reads the thread)
        "alice": ({pay["id"], shell["id"]}, set(), True),
        "carol": ({pay["id"]}, set(), False),  # follows the payment only
        "bob": ({shell["id"]}, set(), False),  # follows the command only
        "sam": ({shell["id"]}, {pay["id"]}, True),  # support: reads the thread
        "rita": (set(), {pay["id"], shell["id"]}, True),  # a reader: no request of hers
    }
    for user, (full, hidden, reads) in expected.items():
        raw, events = site.run(user, run_agent_input(thread_id))  # a reconnect
        text = raw.decode()
        offered = interrupts_of(events)
        shown = {i["id"] for i in offered if i.get("metadata", {}).get("aais")}
        masked = {i["id"] for i in offered if i.get("message") == HIDDEN_REQUEST}
        leaked = (pay_value in text and pay["id"] not in full) or (
            shell_value in text and shell["id"] not in full
        )
        record(CATEGORY, 1, failed_open=int(leaked or not shown <= full))
        assert (shown, masked) == (full, hidden), user
        assert not leaked, user
        if hidden or not reads:
            assert not {"STATE_SNAPSHOT", "STATE_DELTA", "RAW"} & {e["type"] for e in events}
            assert all("rawEvent" not in e for e in events), user
        page, body = thread_read(site, user, thread_id)
        ids = {i["request_id"] for i in body["interrupts"]}
        allowed_ids = {
            rid for rid, interrupt in ((pay_id, pay), (shell_id, shell)) if interrupt["id"] in full
        }
        assert ids - {None} == allowed_ids, user
        assert (body["messages"] != []) is reads, user
        for value, interrupt in ((pay_value, pay), (shell_value, shell)):
            assert (value in page) is False or interrupt["id"] in full, user
    # a stranger sees nothing of it, exactly as of a thread nobody started
    stranger = thread_read(site, "dave", thread_id)[1]
    unknown_id = new_thread()
    nobodys = thread_read(site, "dave", unknown_id)[1]
    assert {**stranger, "thread_id": unknown_id} == nobodys
    raw, events = site.run("dave", run_agent_input(thread_id))
    assert [e["type"] for e in events] == ["RUN_STARTED", "RUN_ERROR"]
    assert pay_value not in raw.decode() and shell_value not in raw.decode()
    assert site.effects.list(thread_id) == []


def test_services_do_only_what_their_scopes_name(site: Site) -> None:
    thread_id = new_thread()
    [interrupt] = interrupts_of(site.say("alice", thread_id, "shell k6")[1])
    tip = site.authority.ledger.audit_tip()
    # the scraper (an SRE by its groups) may read the metrics and nothing else
    assert site.clients["scraper"].get("/metrics").status_code == 200
    status = site.decide("scraper", interrupt)
    listed = site.clients["scraper"].get("/approvals/snapshot").json()
    record(
        "machine actors",
        2,
        failed_open=int(status == 200) + int(bool(listed["snapshot"]["pending"])),
    )
    assert status == 403
    assert listed["snapshot"]["pending"] == []
    assert site.authority.ledger.audit_tip() == tip and site.effects.list(thread_id) == []
    # a service no scope names may not even scrape
    assert site.clients["bot"].get("/metrics").status_code == 403
    assert site.clients["alice"].get("/metrics").status_code == 200


def test_the_thread_refusal_is_the_same_for_every_reason(site: Site) -> None:
    thread_id = new_thread()
    site.say("alice", thread_id, "hi")
    refusals = set()
    for user, body in (
        ("bob", run_agent_input(thread_id, text="shell k7")),  # may not post
        ("dave", run_agent_input(thread_id)),  # may not see it
    ):
        events = site.run(user, body)[1]
        refusals.add(json.dumps(events[-1], sort_keys=True))
    assert len(refusals) == 1
    assert operator.contains(refusals.pop(), FORBIDDEN)


# -- the matrix: start, post and view x every user ----------------------------------------

STARTS = {"alice", "bob", "carol", "sam", "rita", "dave"}
"""Who may start a thread: every person, no service."""
POSTS = {"alice", "sam"}
"""Who may post to alice's thread: alice, and support (sam) who may take it over."""
READS = {"alice", "sam", "rita"}
"""Who may read alice's thread: alice, support, and the readers."""


def test_every_user_may_start_post_to_and_read_threads_exactly_as_the_rules_say(
    site: Site,
) -> None:
    thread_id = new_thread()
    site.say("alice", thread_id, "hi")
    for user in USERS:
        # start: a thread of their own
        mine = new_thread()
        tip = site.authority.ledger.audit_tip()
        events = site.say(user, mine, "hi")[1]
        started = events[-1]["type"] == "RUN_FINISHED"
        record(CATEGORY, 1, failed_open=int(started and user not in STARTS))
        assert started is (user in STARTS), (user, events[-1])
        if not started:
            assert site.authority.ledger.thread_record(mine) is None
            assert site.authority.ledger.audit_tip() == tip
        # view: a reconnect and a thread read of alice's thread
        raw, events = site.run(user, run_agent_input(thread_id))
        text, body = thread_read(site, user, thread_id)
        reads = body["messages"] != []
        record(CATEGORY, 1, failed_open=int(reads and user not in READS))
        assert reads is (user in READS), user
        if user not in READS:
            assert events[-1]["type"] == "RUN_ERROR" and events[-1]["code"] == FORBIDDEN
            assert "hello" not in raw.decode() and "hello" not in text
        # post: a message to alice's thread
        before = site.authority.ledger.thread_record(thread_id)
        events = site.say(user, thread_id, "hi again")[1]
        posted = events[-1]["type"] == "RUN_FINISHED"
        record(CATEGORY, 1, failed_open=int(posted and user not in POSTS))
        assert posted is (user in POSTS), (user, events[-1])
        if not posted:
            assert events[-1]["code"] == FORBIDDEN
            assert site.authority.ledger.thread_record(thread_id) == before
    record_after = site.authority.ledger.thread_record(thread_id)
    assert record_after is not None and record_after.owner == "alice"
    assert set(record_after.posters) == POSTS

"""Every answer reaching a served graph goes through the one planner, over real HTTP on loopback.

The site has two bearer users and a policy that lets only alice approve. Mallory
tries every other route into the graph: ag-ui-langgraph's legacy
``forwardedProps.command.resume``, ``forwardedProps.nodeName`` (a state write as
if a node had run), and AAIS envelopes with duplicate keys in raw JSON text.
Each is refused before anything is recorded, the approval stays pending, and a
correct answer from alice still goes through.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command
from typing_extensions import TypedDict

from aais_agui import bearer_token_authenticator, create_app, run_agent_input
from aais_agui.agent import AAISLangGraphAgent
from aais_langgraph import ApprovalAuthority, RejectedResumeError, approval_node, build_decision
from aais_langgraph.authority import AskEveryTime
from aais_langgraph.ledger import SqliteLedger
from aais_langgraph.protocol import Decision, Request
from hostile.report import record

from .conftest import ALICE
from .demo_graph import EffectLog, build_demo_graph
from .http_support import serve, sse_messages

MALLORY = {"id": "mallory", "type": "human", "authenticated_by": "test"}
AS_ALICE = {"Authorization": "Bearer alice-token"}
AS_MALLORY = {"Authorization": "Bearer mallory-token"}


class OnlyAliceApproves(AskEveryTime):
    def on_decision(self, request: Request, decision: Decision) -> str | None:
        return None if decision.actor.id == "alice" else "Only alice may approve."


@dataclass
class Site:
    url: str
    authority: ApprovalAuthority
    effects: EffectLog
    graph: Any


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    folder: Path = tmp_path_factory.mktemp("channel")
    ledger = SqliteLedger(folder / "ledger.db", synchronous="NORMAL")
    ledger.setup()
    authority = ApprovalAuthority(ledger, policy=OnlyAliceApproves())
    effects = EffectLog(folder / "effects.db")
    graph = build_demo_graph(effects, InMemorySaver())
    authenticate = bearer_token_authenticator({"alice-token": ALICE, "mallory-token": MALLORY})
    app = create_app(graph, authority=authority, authenticate=authenticate, inbox=False)
    with serve(app) as url:
        yield Site(url, authority, effects, graph)


@pytest.fixture
def client(site: Site) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=site.url, timeout=30) as client:
        yield client


def post_run(
    client: httpx.Client, body: dict[str, Any] | bytes, headers: dict[str, str]
) -> tuple[int, list[dict[str, Any]], dict[str, Any] | None]:
    """POST a run (a dict as JSON, or raw bytes); returns status, events and any error body."""
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    with client.stream(
        "POST",
        "/agent",
        content=content,
        headers={**headers, "Content-Type": "application/json", "Accept": "text/event-stream"},
    ) as response:
        if response.status_code != 200:
            response.read()
            return response.status_code, [], response.json()
        return 200, [m["data"] for m in sse_messages(response.iter_lines())], None


def pause(client: httpx.Client, text: str) -> tuple[str, list[dict[str, Any]]]:
    thread_id = f"thread_{uuid.uuid4().hex}"
    status, events, _ = post_run(client, run_agent_input(thread_id, text=text), AS_ALICE)
    assert status == 200 and events[-1]["type"] == "RUN_FINISHED", events[-1]
    return thread_id, list(events[-1]["outcome"]["interrupts"])


def decided(interrupt: dict[str, Any], kind: str = "approve", actor: Any = ALICE) -> Any:
    return build_decision(interrupt["metadata"]["aais"], decision=kind, actor=actor).to_json()


def request_id(interrupt: dict[str, Any]) -> str:
    return str(interrupt["metadata"]["aais"]["request"]["id"])


def pending_ids(site: Site, thread_id: str) -> list[str]:
    state = site.graph.get_state({"configurable": {"thread_id": thread_id}})
    return sorted(i.id for i in state.interrupts)


def assert_still_pending(site: Site, thread_id: str, interrupts: list[dict[str, Any]]) -> None:
    assert pending_ids(site, thread_id) == sorted(i["id"] for i in interrupts)
    for interrupt in interrupts:
        assert site.authority.get_resolution(request_id(interrupt)) is None
    assert site.effects.list(thread_id) == []


def alice_can_still_approve(
    client: httpx.Client, site: Site, thread_id: str, interrupt: Any
) -> None:
    entry = {
        "interruptId": interrupt["id"],
        "status": "resolved",
        "payload": {"aais": decided(interrupt)},
    }
    status, events, _ = post_run(client, run_agent_input(thread_id, resume=[entry]), AS_ALICE)
    assert status == 200 and events[-1]["type"] == "RUN_FINISHED", events[-1]
    assert site.effects.list(thread_id) != []
    recorded = site.authority.get_resolution(request_id(interrupt))
    assert recorded is not None and recorded.approved


def run_error(events: list[dict[str, Any]]) -> dict[str, Any]:
    assert [e["type"] for e in events] == ["RUN_STARTED", "RUN_ERROR"], events
    return events[-1]


# -- forwardedProps.command: ag-ui-langgraph's legacy resume channel ----------------------


@pytest.mark.parametrize("as_text", [False, True], ids=["object", "json-text"])
def test_legacy_command_resume_naming_alice_is_refused(
    client: httpx.Client, site: Site, as_text: bool
) -> None:
    thread_id, [interrupt] = pause(client, "delete /srv/ledger.csv")
    resume: Any = {interrupt["id"]: decided(interrupt, actor=ALICE)}
    body = run_agent_input(thread_id)
    body["forwardedProps"] = {"command": {"resume": json.dumps(resume) if as_text else resume}}
    status, events, _ = post_run(client, body, AS_MALLORY)
    assert status == 200
    assert run_error(events)["code"] == "aais.forwarded_props_refused"
    assert_still_pending(site, thread_id, [interrupt])
    alice_can_still_approve(client, site, thread_id, interrupt)


def test_legacy_command_resume_answering_one_of_three_is_refused(
    client: httpx.Client, site: Site
) -> None:
    thread_id, interrupts = pause(client, "email a@example.com,b@example.com,c@example.com")
    assert len(interrupts) == 3
    first = interrupts[0]
    body = run_agent_input(thread_id)
    body["forwardedProps"] = {"command": {"resume": {first["id"]: decided(first)}}}
    status, events, _ = post_run(client, body, AS_ALICE)
    assert status == 200
    assert run_error(events)["code"] == "aais.forwarded_props_refused"
    assert_still_pending(site, thread_id, interrupts)


@pytest.mark.parametrize(
    "props",
    [
        {"command": {"goto": "delete_file"}},
        {"command": {"update": {"result": ""}}},
        {"Command": {"resume": "yes"}},
        {"nodeName": "model"},
        {"node_name": "model"},
    ],
    ids=["goto", "update", "capitalised", "nodeName", "node_name"],
)
def test_forwarded_props_that_steer_the_graph_are_refused(
    client: httpx.Client, site: Site, props: dict[str, Any]
) -> None:
    thread_id, [interrupt] = pause(client, "delete /srv/steer.txt")
    body = run_agent_input(thread_id)
    body["forwardedProps"] = props
    status, events, _ = post_run(client, body, AS_MALLORY)
    assert status == 200 and run_error(events)["code"] == "aais.forwarded_props_refused"
    assert_still_pending(site, thread_id, [interrupt])


def test_harmless_forwarded_props_still_run(client: httpx.Client, site: Site) -> None:
    body = run_agent_input(f"thread_{uuid.uuid4().hex}", text="hello")
    body["forwardedProps"] = {"streamSubgraphs": False, "custom": {"anything": 1}}
    status, events, _ = post_run(client, body, AS_MALLORY)
    assert status == 200 and events[-1]["type"] == "RUN_FINISHED", events[-1]


# -- cancels: attributed to the authenticated actor and seen by the policy ---------------


def test_mallory_cannot_cancel_alices_approval_the_policy_refuses(
    client: httpx.Client, site: Site
) -> None:
    thread_id, [interrupt] = pause(client, "delete /srv/cancel-me.txt")
    entry = {"interruptId": interrupt["id"], "status": "cancelled"}
    status, events, _ = post_run(client, run_agent_input(thread_id, resume=[entry]), AS_MALLORY)
    cancelled = site.authority.get_resolution(request_id(interrupt)) is not None
    record("cancel attribution", 1, failed_open=int(cancelled), server_errors=int(status >= 500))
    assert status == 200 and run_error(events[:2])["code"] == "aais.invalid"
    # The card stays answerable: the same interrupt is offered again in the same stream.
    assert [i["id"] for i in events[-1]["outcome"]["interrupts"]] == [interrupt["id"]]
    assert_still_pending(site, thread_id, [interrupt])
    alice_can_still_approve(client, site, thread_id, interrupt)


def test_a_cancel_records_who_cancelled(client: httpx.Client, site: Site) -> None:
    thread_id, [interrupt] = pause(client, "delete /srv/cancel-me-too.txt")
    entry = {"interruptId": interrupt["id"], "status": "cancelled"}
    status, events, _ = post_run(client, run_agent_input(thread_id, resume=[entry]), AS_ALICE)
    assert status == 200 and events[-1]["type"] == "RUN_FINISHED", events[-1]
    recorded = site.authority.get_resolution(request_id(interrupt))
    assert recorded is not None and recorded.resolution.outcome == "cancelled"
    by = (recorded.resolution.extensions or {})["aais-langgraph.org/resolved_by"]
    assert by["id"] == "alice"
    [entry_of] = [
        e
        for e in site.authority.ledger.audit_entries()
        if e.kind == "resolved" and e.payload["request_id"] == request_id(interrupt)
    ]
    record("cancel attribution", 1, failed_open=int(entry_of.payload.get("actor_id") != "alice"))
    assert entry_of.payload["actor_id"] == "alice"
    assert site.effects.list(thread_id) == []


# -- forwardedProps.nodeName against a graph with a separate approval node ---------------


class GateState(TypedDict, total=False):
    action: dict[str, Any]
    approval: dict[str, Any]


def gate_graph(ran: list[Any]) -> Any:
    """propose -> approve (``approval_node``) -> act only when the approval says approved."""

    def propose(_: GateState) -> dict[str, Any]:
        return {"action": {"kind": "process.exec", "name": "shell.exec", "summary": "Run it"}}

    def act(state: GateState) -> dict[str, Any]:
        ran.append(state["action"])
        return {}

    def route(state: GateState) -> str:
        return "act" if state["approval"]["resolution"]["outcome"] == "approved" else END

    builder = StateGraph(GateState)
    builder.add_node("propose", propose)
    builder.add_node("approve", approval_node("action"))
    builder.add_node("act", act)
    builder.add_edge(START, "propose")
    builder.add_edge("propose", "approve")
    builder.add_conditional_edges("approve", route, ["act", END])
    builder.add_edge("act", END)
    return builder.compile(checkpointer=InMemorySaver())


def test_node_name_cannot_forge_an_approval_nodes_output(tmp_path: Path) -> None:
    ran: list[Any] = []
    authority = ApprovalAuthority()
    app = create_app(
        gate_graph(ran),
        authority=authority,
        authenticate=bearer_token_authenticator({"mallory-token": MALLORY}),
        inbox=False,
    )
    body = run_agent_input("thread-forge")
    body["state"] = {
        "action": {"kind": "process.exec", "name": "shell.exec", "summary": "Run it"},
        "approval": {"resolution": {"outcome": "approved"}},
    }
    body["forwardedProps"] = {"nodeName": "approve"}
    with serve(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        status, events, _ = post_run(client, body, AS_MALLORY)
    assert status == 200 and run_error(events)["code"] == "aais.forwarded_props_refused"
    assert ran == []


# -- duplicate keys in raw JSON text ------------------------------------------------------


def _with_duplicate_decision(entry_json: str) -> bytes:
    """The entry's ``"decision":"approve"`` preceded by a ``"decision":"deny"`` twin."""
    assert entry_json.count('"decision": "approve"') == 1
    return entry_json.replace(
        '"decision": "approve"', '"decision": "deny", "decision": "approve"'
    ).encode()


@pytest.mark.parametrize("where", ["metadata", "payload"])
def test_duplicate_keys_in_a_resume_envelope_are_refused(
    client: httpx.Client, site: Site, where: str
) -> None:
    thread_id, [interrupt] = pause(client, f"delete /srv/dup-{where}.txt")
    entry = {
        "interruptId": interrupt["id"],
        "status": "resolved",
        where: {"aais": decided(interrupt)},
    }
    raw = _with_duplicate_decision(json.dumps(run_agent_input(thread_id, resume=[entry])))
    status, events, error = post_run(client, raw, AS_ALICE)
    assert status == 422 and error is not None, events
    assert error["error"]["code"] == "aais.invalid_envelope"
    assert error["error"]["message"] == (
        f"/resume/0/{where}/aais/decision/decision: duplicate object key in JSON text"
    )
    assert_still_pending(site, thread_id, [interrupt])
    alice_can_still_approve(client, site, thread_id, interrupt)


def test_duplicate_keys_elsewhere_in_the_body_are_refused(client: httpx.Client) -> None:
    raw = (
        b'{"threadId": "t-a", "threadId": "t-b", "runId": "r", "messages": [], "state": {},'
        b' "tools": [], "context": [], "forwardedProps": {}}'
    )
    status, _, error = post_run(client, raw, AS_ALICE)
    assert status == 422 and error is not None
    assert error["error"] == {
        "code": "agui.invalid_input",
        "message": "/threadId: duplicate object key in JSON text",
    }


# -- defence in depth: the served graph itself accepts only recorded resolutions ---------


async def test_a_raw_decision_reaching_the_served_graph_is_refused(
    tmp_path: Path,
) -> None:
    effects = EffectLog(tmp_path / "effects.db")
    authority = ApprovalAuthority()
    graph = build_demo_graph(effects, InMemorySaver())
    # The user's own config cannot switch the mode off either.
    agent = AAISLangGraphAgent(
        name="demo",
        graph=graph,
        authority=authority,
        config={"configurable": {"aais_recorded_answers_only": False}},
    )
    config = {"configurable": {**agent.config["configurable"], "thread_id": "t-direct"}}
    await graph.ainvoke({"messages": [("user", "delete /srv/direct.txt")]}, config)
    [pending] = (await graph.aget_state(config)).interrupts
    raw = build_decision(pending.value, decision="approve", actor=ALICE).to_json()
    with pytest.raises(RejectedResumeError, match="recorded by its server"):
        await graph.ainvoke(Command(resume={pending.id: raw}), config)
    assert [i.id for i in (await graph.aget_state(config)).interrupts] == [pending.id]
    request = pending.value["request"]["id"]
    assert authority.get_resolution(request) is None and effects.list() == []

    # The same decision recorded by the authority under an authenticated actor resumes it.
    authority.decide(raw, actor=ALICE)
    notice = authority.get_resolution(request)
    assert notice is not None
    await graph.ainvoke(Command(resume={pending.id: notice.to_json()}), config)
    assert effects.list() == [("t-direct", "delete_file", "/srv/direct.txt")]

"""Gated page (frontend) tools over AG-UI: the call reaches the client only once approved.

A real uvicorn serves ``create_app(ApprovalService(..., page_tools=gate))`` on loopback;
runs are plain AG-UI requests that declare ``RunAgentInput.tools`` and send an
``Origin`` header, as a browser page does. The model (a deterministic fake that streams
its tool calls) calls the page tool ``change_background``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import aais
import httpx
import pytest
from ag_ui_validate.pytest_plugin import validate_agui
from fastapi import Request
from langchain_core.messages import ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from aais_agui import (
    ApprovalService,
    ServiceSettings,
    create_app,
    local_development_authenticator,
    run_agent_input,
)
from aais_agui.http.security import Authenticated
from aais_langgraph import ApprovalAuthority
from aais_langgraph.authority import AccessPolicy
from aais_langgraph.ledger import RESUME, SqliteLedger
from aais_langgraph.protocol import Actor, ApprovalRequested, build_decision
from aais_langgraph.threads import run_config
from aais_langgraph.tools import PAGE_BINDING_KEY, PageBinding, PageToolGate, registry_revision

from .frontend_tools_graph import (
    PAGE_ORIGIN,
    PAGE_TOOL,
    UNGATED_TOOL,
    build_page_graph,
    page_tool_gate,
)
from .http_support import agui_run, serve

OTHER_ORIGIN = "http://other-page.test"
TOOLS: list[dict[str, Any]] = [
    {
        "name": PAGE_TOOL,
        "description": "Paint the page background",
        "parameters": {"type": "object", "properties": {"color": {"type": "string"}}},
    },
    {
        "name": UNGATED_TOOL,
        "description": "Show a toast",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}},
    },
]
TOOL_EVENTS = ("TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT")


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[httpx.Client, ApprovalAuthority]]:
    ledger = SqliteLedger(tmp_path / "ledger.db", synchronous="NORMAL")
    ledger.setup()
    authority = ApprovalAuthority(ledger)
    gate = page_tool_gate()
    settings = ServiceSettings(
        resume_due_every=None, orphans_every=None, allowed_origins=[PAGE_ORIGIN, OTHER_ORIGIN]
    )
    graph = build_page_graph(gate, InMemorySaver())
    app = create_app(
        ApprovalService(graph, authority, settings=settings, page_tools=gate),
        authenticate=local_development_authenticator(),
    )
    with serve(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        yield client, authority


def page_run(
    client: httpx.Client,
    thread_id: str,
    *,
    text: str | None = None,
    resume: Any = None,
    tools: list[dict[str, Any]] = TOOLS,
    origin: str = PAGE_ORIGIN,
) -> list[dict[str, Any]]:
    body = run_agent_input(thread_id, text=text, resume=resume)
    body["tools"] = tools
    events = agui_run(client, "/agent", body, headers={"origin": origin})
    report = validate_agui(events)
    assert report.summary.errors == 0, [d for d in report.diagnostics if d.severity == "error"]
    return events


def decided(interrupt: dict[str, Any], decision: str = "approve") -> list[dict[str, Any]]:
    request = interrupt["metadata"]["aais"]["request"]
    now = datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")
    envelope = {
        "aais": "1.0",
        "type": "approval.decided",
        "id": f"evt_{uuid.uuid4().hex}",
        "occurred_at": now,
        "sequence": 0,
        "decision": {
            "id": f"dec_{uuid.uuid4().hex}",
            "request_id": request["id"],
            "action_digest": request["action_digest"],
            "decided_at": now,
            "decision": decision,
            "scope": "once",
            "actor": {"id": "local-developer", "type": "human"},
        },
    }
    return [{"interruptId": interrupt["id"], "status": "resolved", "payload": envelope}]


def tool_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [event for event in events if event["type"] in TOOL_EVENTS]


def calls_shown(events: list[dict[str, Any]]) -> list[str]:
    """Tool call ids any snapshot shows (AG-UI messages and the state's message list)."""
    shown = []
    for event in events:
        if event["type"] == "MESSAGES_SNAPSHOT":
            for message in event["messages"]:
                shown += [call["id"] for call in message.get("toolCalls") or []]
        if event["type"] == "STATE_SNAPSHOT":
            for message in event["snapshot"].get("messages") or []:
                shown += [call["id"] for call in message.get("tool_calls") or []]
    return shown


def paused(events: list[dict[str, Any]]) -> dict[str, Any]:
    outcome = events[-1]["outcome"]
    assert outcome["type"] == "interrupt"
    [interrupt] = outcome["interrupts"]
    return dict(interrupt)


def last_text(events: list[dict[str, Any]]) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")


def test_gated_call_is_held_until_approved_then_streamed(
    served: tuple[httpx.Client, ApprovalAuthority],
) -> None:
    client, authority = served
    events = page_run(client, "t-approve", text="paint the page blue")
    assert tool_events(events) == []
    assert calls_shown(events) == []
    assert not any(event["type"] == "RAW" for event in events)
    interrupt = paused(events)
    assert interrupt["reason"] == "tool_call"

    released = page_run(client, "t-approve", resume=decided(interrupt))
    calls = tool_events(released)
    assert [event["type"] for event in calls] == [
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
    ]
    assert calls[0]["toolCallName"] == PAGE_TOOL
    assert calls[0]["toolCallId"] == interrupt["toolCallId"]
    assert calls[1]["delta"] == '{"color": "blue"}'
    assert released[-1]["type"] == "RUN_FINISHED" and released[-1].get("outcome") is None
    request_id = interrupt["metadata"]["aais"]["request"]["id"]
    execution = authority.execution(request_id)
    assert execution is not None and execution.state == "executed"


def test_action_binds_tool_arguments_origin_and_registry_revision(
    served: tuple[httpx.Client, ApprovalAuthority],
) -> None:
    client, _ = served
    interrupt = paused(page_run(client, "t-binding", text="paint the page green"))
    envelope = interrupt["metadata"]["aais"]
    aais.validate(envelope)
    action = envelope["request"]["action"]
    assert action["kind"] == "tool.call"
    assert action["name"] == PAGE_TOOL
    assert action["resource"] == PAGE_ORIGIN
    assert action["arguments"] == {
        "origin": PAGE_ORIGIN,
        "registry_revision": registry_revision(TOOLS),
        "arguments": {"color": "green"},
    }
    assert "green" not in action["summary"]


def test_client_result_is_seen_by_the_model_and_the_released_call_stays_shown(
    served: tuple[httpx.Client, ApprovalAuthority],
) -> None:
    client, _ = served
    interrupt = paused(page_run(client, "t-result", text="paint the page red"))
    released = page_run(client, "t-result", resume=decided(interrupt))
    start = tool_events(released)[0]
    body = run_agent_input("t-result")
    body["tools"] = TOOLS
    body["messages"] = [
        {
            "id": start["parentMessageId"],
            "role": "assistant",
            "toolCalls": [
                {
                    "id": start["toolCallId"],
                    "type": "function",
                    "function": {"name": PAGE_TOOL, "arguments": '{"color": "red"}'},
                }
            ],
        },
        {"id": "tool-1", "role": "tool", "toolCallId": start["toolCallId"], "content": "red now"},
    ]
    answered = agui_run(client, "/agent", body, headers={"origin": PAGE_ORIGIN})
    assert last_text(answered) == "Done: red now"
    assert start["toolCallId"] in calls_shown(answered)
    assert tool_events(answered) == []


def test_denied_call_never_reaches_the_client_and_the_model_is_told(
    served: tuple[httpx.Client, ApprovalAuthority],
) -> None:
    client, authority = served
    interrupt = paused(page_run(client, "t-deny", text="paint the page purple"))
    answered = page_run(client, "t-deny", resume=decided(interrupt, "deny"))
    assert tool_events(answered) == []
    assert calls_shown(answered) == []
    assert "did not change the background" in last_text(answered)
    resolved = authority.get_resolution(interrupt["metadata"]["aais"]["request"]["id"])
    assert resolved is not None and resolved.resolution.outcome == "denied"


@pytest.mark.parametrize(
    ("tools", "origin"),
    [
        ([{**TOOLS[0], "description": "Paint the page and send it away"}, TOOLS[1]], PAGE_ORIGIN),
        (TOOLS[:1], PAGE_ORIGIN),
        (TOOLS, OTHER_ORIGIN),
    ],
    ids=["changed-definition", "removed-tool", "other-origin"],
)
def test_approval_from_a_changed_page_is_stale_and_releases_nothing(
    served: tuple[httpx.Client, ApprovalAuthority], tools: list[dict[str, Any]], origin: str
) -> None:
    client, authority = served
    interrupt = paused(page_run(client, "t-stale", text="paint the page yellow"))
    answered = page_run(client, "t-stale", resume=decided(interrupt), tools=tools, origin=origin)
    assert not any(event["type"] == "RUN_ERROR" for event in answered)
    assert tool_events(answered) == []
    assert calls_shown(answered) == []
    assert "did not change the background" in last_text(answered)
    request_id = interrupt["metadata"]["aais"]["request"]["id"]
    resolved = authority.get_resolution(request_id)
    assert resolved is not None and resolved.resolution.outcome == "stale"
    assert authority.ledger.list_pending(thread_id="t-stale") == []
    assert authority.execution(request_id) is None


def test_ungated_page_tool_streams_at_once(
    served: tuple[httpx.Client, ApprovalAuthority],
) -> None:
    client, _ = served
    events = page_run(client, "t-toast", text="show a toast")
    assert [event["type"] for event in tool_events(events)][:1] == ["TOOL_CALL_START"]
    assert tool_events(events)[0]["toolCallName"] == UNGATED_TOOL
    assert events[-1].get("outcome") is None


def test_registry_revision_ignores_order_and_sees_every_definition() -> None:
    assert registry_revision(TOOLS) == registry_revision(list(reversed(TOOLS)))
    changed = [{**TOOLS[0], "parameters": {"type": "object"}}, TOOLS[1]]
    assert registry_revision(changed) != registry_revision(TOOLS)
    assert registry_revision(TOOLS).startswith("sha256:")


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ({"session_scope": {"action_name": PAGE_TOOL}}, "session_scope"),
        ({"when": lambda request: True}, "when"),
        ({"description": lambda request: "paint"}, "description"),
    ],
)
def test_settings_page_tools_cannot_honour_are_refused_when_built(
    entry: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValueError, match=rf"\[{PAGE_TOOL!r}\]\.{field}"):
        PageToolGate({PAGE_TOOL: entry})


def test_without_an_origin_a_gated_call_is_refused_not_asked(
    served: tuple[httpx.Client, ApprovalAuthority],
) -> None:
    client, authority = served
    body = run_agent_input("t-no-origin", text="paint the page blue")
    body["tools"] = TOOLS
    events = agui_run(client, "/agent", body)  # no Origin header, and the gate declares none
    assert tool_events(events) == []
    assert events[-1].get("outcome") is None
    assert "did not change the background" in last_text(events)
    assert authority.ledger.list_pending(thread_id="t-no-origin") == []


def test_sync_gate_binds_the_page_of_the_run_and_releases_once(tmp_path: Path) -> None:
    authority = ApprovalAuthority(SqliteLedger(tmp_path / "ledger.db"))
    authority.ledger.setup()
    gate = PageToolGate({PAGE_TOOL: True}, name="page_tools", model="model")
    graph = build_page_graph(gate, InMemorySaver())
    page = PageBinding.of(TOOLS, origin=PAGE_ORIGIN)
    config = run_config({"configurable": {"thread_id": "t-sync"}}, authority)
    config["configurable"][PAGE_BINDING_KEY] = page.to_json()
    paused_state = graph.invoke(
        {"messages": [("user", "paint the page white")], "tools": TOOLS}, config
    )
    [pending] = paused_state["__interrupt__"]
    requested = ApprovalRequested.from_data(pending.value)
    assert requested.request.action.arguments["registry_revision"] == page.registry_revision
    decision = build_decision(requested, decision="approve", actor={"id": "a", "type": "human"})
    released = graph.invoke(Command(resume={pending.id: decision.to_json()}), config)
    assert "__interrupt__" not in released
    assert not any(isinstance(m, ToolMessage) for m in released["messages"])
    execution = authority.execution(requested.request.id)
    assert execution is not None and execution.state == "executed"


def test_approval_given_outside_the_page_releases_nothing_and_claims_nothing(
    served: tuple[httpx.Client, ApprovalAuthority],
) -> None:
    client, authority = served
    interrupt = paused(page_run(client, "t-inbox", text="paint the page black"))
    request_id = interrupt["metadata"]["aais"]["request"]["id"]
    envelope = decided(interrupt)[0]["payload"]
    own_origin = str(client.base_url).rstrip("/")
    answer = client.post(
        f"/approvals/{request_id}/decisions", json=envelope, headers={"origin": own_origin}
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["resolution"]["outcome"] == "approved"
    # The decision resumed the thread in the background, with no page to hand the call to.
    deadline = time.monotonic() + 20
    while authority.ledger.list_work(RESUME, thread_id="t-inbox"):
        assert time.monotonic() < deadline, "the background resume did not finish"
        time.sleep(0.05)
    reconnect = page_run(client, "t-inbox")
    assert tool_events(reconnect) == []
    assert calls_shown(reconnect) == []
    assert authority.execution(request_id) is None


def test_tools_that_are_not_ijson_are_refused_before_the_run(
    served: tuple[httpx.Client, ApprovalAuthority],
) -> None:
    client, authority = served
    beyond = {"type": "object", "properties": {"n": {"type": "integer", "maximum": 2**60}}}
    tools = [{"name": PAGE_TOOL, "description": "Paint", "parameters": beyond}]
    events = page_run(client, "t-deep", text="paint the page blue", tools=tools)
    assert [event["type"] for event in events] == ["RUN_STARTED", "RUN_ERROR"]
    assert events[1]["code"] == "aais.invalid_tools"
    assert events[1]["message"].startswith("/tools/0/parameters/properties/n/maximum:")
    assert str(2**60) not in events[1]["message"]
    assert authority.ledger.list_pending(thread_id="t-deep") == []


def test_a_viewer_answering_from_a_changed_page_makes_nothing_stale(tmp_path: Path) -> None:
    users = {"alice": frozenset({"sre"}), "bob": frozenset({"dev"})}

    def authenticate(request: Request) -> Authenticated | None:
        name = request.headers.get("authorization", "").removeprefix("Bearer ")
        if name not in users:
            return None
        return Authenticated(Actor(id=name, type="human"), groups=users[name])

    ledger = SqliteLedger(tmp_path / "ledger.db", synchronous="NORMAL")
    ledger.setup()
    policy = AccessPolicy.from_mapping({"default_approvers": ["sre"], "viewer_groups": ["dev"]})
    authority = ApprovalAuthority(ledger, authorizer=policy)
    gate = page_tool_gate()
    settings = ServiceSettings(
        resume_due_every=None, orphans_every=None, allowed_origins=[PAGE_ORIGIN]
    )
    graph = build_page_graph(gate, InMemorySaver())
    app = create_app(
        ApprovalService(graph, authority, settings=settings, page_tools=gate),
        authenticate=authenticate,
    )
    with serve(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        body = run_agent_input("t-viewer", text="paint the page blue")
        body["tools"] = TOOLS
        headers = {"origin": PAGE_ORIGIN, "authorization": "Bearer alice"}
        interrupt = paused(agui_run(client, "/agent", body, headers=headers))
        # bob may view but not decide; his page declares other tools than alice's did.
        answer = {**run_agent_input("t-viewer", resume=decided(interrupt)), "tools": TOOLS[:1]}
        headers = {"origin": PAGE_ORIGIN, "authorization": "Bearer bob"}
        refused = agui_run(client, "/agent", answer, headers=headers)
    assert [e["code"] for e in refused if e["type"] == "RUN_ERROR"] == ["aais.forbidden"]
    request_id = interrupt["metadata"]["aais"]["request"]["id"]
    assert authority.get_resolution(request_id) is None
    assert [r.request_id for r in ledger.list_pending(thread_id="t-viewer")] == [request_id]

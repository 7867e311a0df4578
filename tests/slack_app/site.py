"""The demo graph served with a Slack app channel, lifespan on, and Slack's part played here.

``slack_site`` serves ``create_app`` (its deliveries job, resume and expiry sweeps
running) over a SQLite ledger whose plan records the channels' deliveries, with the
``[[slack]]`` tables and ``[slack_users]`` read from a policy file as a deployment
writes them, and the Web API pointed at :mod:`.fake_slack`. :func:`click` builds the
``block_actions`` payload Slack sends for a click on a posted button and signs it with
``slack_sdk``'s own ``SignatureVerifier.generate_signature``.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlencode

import httpx
import uvicorn
from fastapi import Request
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from slack_sdk.signature import SignatureVerifier

from aais_agui import ApprovalService, Authenticated, ServiceSettings, create_app
from aais_langgraph import ApprovalAuthority, ThreadDriver
from aais_langgraph.authority import AccessPolicy
from aais_langgraph.ledger import SqliteLedger
from aais_langgraph.protocol import Actor
from aais_langgraph.webhooks import SlackApp, SubscriptionPlan, load_slack
from agui.demo_graph import EffectLog, build_demo_graph

from .fake_slack import TOKEN, Call, FakeSlack, fake_slack

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
CHANNEL = "C0APPROVE"
BLIND = "C0BLIND"
USERS = {"alice": "U0ALICE", "bob": "U0BOB", "mallory": "U0MALLORY"}
POLICY = """
default_approvers = ["sre"]

[[slack]]
name = "ops"
channel = "C0APPROVE"
team = "T0TEAM"
token_env = "SLACK_BOT_TOKEN"
signing_secret_env = "SLACK_SIGNING_SECRET"
as_user = "slack-ops"
as_groups = ["sre"]
include_arguments = true
api_url = "{api}"
hooks_url = "{hooks}"

[[slack]]
name = "blind"
channel = "C0BLIND"
token_env = "SLACK_BOT_TOKEN"
signing_secret_env = "SLACK_SIGNING_SECRET"
include_arguments = true
api_url = "{api}"

[slack_users]
U0ALICE = {{ user = "alice", groups = ["sre"] }}
U0BOB = {{ user = "bob", groups = ["sre"] }}
U0MALLORY = {{ user = "mallory", groups = ["interns"] }}
"""
WAIT = 15.0
T = TypeVar("T")


@dataclass
class SlackSite:
    url: str
    authority: ApprovalAuthority
    effects: EffectLog
    graph: Any
    slack: FakeSlack
    app: SlackApp
    db: Path

    def pause(self, path: str, *, raised_ago: timedelta | None = None) -> tuple[str, str]:
        """Run a fresh thread until it waits on deleting ``path``: (thread id, request id)."""
        thread_id = f"thread_{uuid.uuid4().hex}"
        authority = self.authority
        if raised_ago is not None:
            real = authority.clock
            authority = ApprovalAuthority(
                authority.ledger, clock=lambda: real() - raised_ago, authorizer=authority.authorizer
            )
        config = ThreadDriver(self.graph, authority).run_config(thread_id=thread_id)
        message = HumanMessage(content=f"delete {path}", id=f"u_{uuid.uuid4().hex}")
        self.graph.invoke({"messages": [message]}, config)
        [interrupt] = self.graph.get_state(config).interrupts
        return thread_id, str(interrupt.value["request"]["id"])

    def paused(self, thread_id: str) -> bool:
        config = {"configurable": {"thread_id": thread_id}}
        return bool(self.graph.get_state(config).interrupts)

    def post_of(self, request_id: str) -> Call:
        """The message posted for the request (waits for the deliveries job)."""
        return wait_for(
            lambda: next((c for c in self.slack.posted() if request_id in c.text), None),
            what="the request's message",
        )

    def updates_of(self, request_id: str) -> list[Call]:
        return [call for call in self.slack.updated() if request_id in call.text]

    def decided(self, request_id: str) -> list[dict[str, Any]]:
        """The ``approval.decided`` events recorded for the request."""
        events = self.authority.events_after(0, limit=100_000).events
        return [
            event["decision"]
            for event in events
            if event["type"] == "approval.decided" and event["decision"]["request_id"] == request_id
        ]


def wait_for(probe: Callable[[], T | None], *, what: str, timeout: float = WAIT) -> T:
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found:
            return found
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@contextmanager
def serve_with_lifespan(app: Any) -> Iterator[str]:
    """``app`` on an ephemeral loopback port with its lifespan (its jobs) running."""
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, name="uvicorn-slack", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


@contextmanager
def slack_site(folder: Path, *, rules: dict[str, Any] | None = None) -> Iterator[SlackSite]:
    """The served site; ``rules``: the access policy (default: ``sre`` decides everything)."""
    with fake_slack() as slack:
        policy_file = folder / "policy.toml"
        policy_file.write_text(POLICY.format(api=slack.url, hooks=slack.hooks_url))
        environ = {"SLACK_BOT_TOKEN": TOKEN, "SLACK_SIGNING_SECRET": SECRET}
        app_config = load_slack(policy_file, environ=environ)
        assert app_config is not None
        ledger = SqliteLedger(
            folder / "ledger.db",
            synchronous="NORMAL",
            delivery_plan=SubscriptionPlan(app_config.subscriptions),
        )
        ledger.setup()
        authorizer = AccessPolicy.from_mapping(rules or {"default_approvers": ["sre"]})
        authority = ApprovalAuthority(ledger, authorizer=authorizer)
        effects = EffectLog(folder / "effects.db")
        graph = build_demo_graph(effects, InMemorySaver())
        service = ApprovalService(
            graph,
            authority,
            settings=ServiceSettings(
                deliveries_every=0.05, resume_due_every=0.1, sweep_expired_every=0.1
            ),
            slack=app_config,
        )

        def bob(request: Request) -> Authenticated | None:
            if request.headers.get("authorization") != "Bearer bob-token":
                return None
            return Authenticated(Actor(id="bob", type="human"), groups=frozenset({"sre"}))

        app = create_app(service, authenticate=bob)
        try:
            with serve_with_lifespan(app) as url:
                yield SlackSite(
                    url, authority, effects, graph, slack, app_config, folder / "ledger.db"
                )
        finally:
            ledger.close()


def block_actions(
    message: Call,
    button: dict[str, Any],
    *,
    user: str,
    channel: str | None = None,
    team: str = "T0TEAM",
    response_url: str = "https://hooks.slack.com/actions/T0TEAM/1/abc",
) -> dict[str, Any]:
    """The ``block_actions`` payload Slack sends when ``user`` clicks ``button`` of
    ``message`` (Slack's documented shape), its reply going to ``response_url``."""
    where = channel or str(message.body["channel"])
    return {
        "type": "block_actions",
        "user": {"id": user, "username": user.lower(), "name": user.lower(), "team_id": team},
        "api_app_id": "A0APP",
        "token": "verification-token-unused",
        "container": {
            "type": "message",
            "message_ts": "1700000000.000001",
            "channel_id": where,
            "is_ephemeral": False,
        },
        "trigger_id": "123.456.abc",
        "team": {"id": team, "domain": "example"},
        "enterprise": None,
        "is_enterprise_install": False,
        "channel": {"id": where, "name": "approvals"},
        "message": {"type": "message", "text": message.body.get("text"), "ts": "1700000000.000001"},
        "state": {"values": {}},
        "response_url": response_url,
        "actions": [
            {
                "action_id": button["action_id"],
                "block_id": "aais_choices",
                "text": button["text"],
                "value": button["value"],
                "style": button.get("style"),
                "type": "button",
                "action_ts": f"{time.time():.6f}",
            }
        ],
    }


def signed(
    payload: dict[str, Any] | str, *, secret: str = SECRET, age: float = 0.0
) -> tuple[bytes, dict[str, str]]:
    """The form body Slack posts for ``payload`` and its signed headers."""
    text = payload if isinstance(payload, str) else json.dumps(payload)
    body = urlencode({"payload": text}).encode()
    timestamp = str(int(time.time() - age))
    signature = SignatureVerifier(secret).generate_signature(timestamp=timestamp, body=body)
    assert signature is not None
    headers = {
        "content-type": "application/x-www-form-urlencoded",
        "x-slack-request-timestamp": timestamp,
        "x-slack-signature": signature,
    }
    return body, headers


def post_click(site: SlackSite, body: bytes, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(f"{site.url}/slack/interactions", content=body, headers=headers, timeout=30)


def button(message: Call, decision: str, scope: str = "once") -> dict[str, Any]:
    return next(b for b in message.buttons if b["action_id"] == f"aais_{decision}_{scope}")

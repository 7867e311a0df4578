"""A Slack click is judged like any decision: separation of duties holds for Slack users."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from fastapi.testclient import TestClient
from langgraph.checkpoint.memory import InMemorySaver
from slack_sdk.signature import SignatureVerifier

from aais_agui import ApprovalService, bearer_token_authenticator, create_app
from aais_langgraph import ApprovalAuthority
from aais_langgraph.authority import AccessPolicy, Principal
from aais_langgraph.ledger import InMemoryLedger
from aais_langgraph.observability import subscribe
from aais_langgraph.protocol import Actor
from aais_langgraph.webhooks import SlackApp, SlackChannel, SubscriptionPlan, request_message
from agui.demo_graph import EffectLog, build_demo_graph

SECRET = "policy-signing-secret"


def click(client: TestClient, requested: Any, user: str) -> Any:
    [actions] = [
        b
        for b in request_message(requested, include_arguments=False)["blocks"]
        if b["type"] == "actions"
    ]
    payload = {
        "type": "block_actions",
        "user": {"id": user},
        "channel": {"id": "C0OPS"},
        "actions": [{**actions["elements"][0], "action_ts": f"{time.time():.6f}"}],
    }
    body = urlencode({"payload": json.dumps(payload)}).encode()
    timestamp = str(int(time.time()))
    signature = SignatureVerifier(SECRET).generate_signature(timestamp=timestamp, body=body)
    headers = {"x-slack-request-timestamp": timestamp, "x-slack-signature": str(signature)}
    return client.post("/slack/interactions", content=body, headers=headers)


def test_the_requester_may_not_approve_their_own_request_from_slack(tmp_path: Path) -> None:
    channel = SlackChannel(name="ops", channel="C0OPS", token="xoxb-x", signing_secret=SECRET)
    users = {
        "U0ALICE": Principal(Actor(id="alice", type="human", authenticated_by="slack")),
        "U0BOB": Principal(Actor(id="bob", type="human", authenticated_by="slack")),
    }
    slack = SlackApp((channel,), users)
    ledger = InMemoryLedger(delivery_plan=SubscriptionPlan(slack.subscriptions))
    policy = AccessPolicy.from_mapping(
        {"default_approvers": ["*"], "separation_of_duties": {"from_risk": "low"}}
    )
    authority = ApprovalAuthority(ledger, authorizer=policy)
    graph = build_demo_graph(EffectLog(tmp_path / "effects.db"), InMemorySaver())
    app = create_app(
        ApprovalService(graph, authority, slack=slack),
        authenticate=bearer_token_authenticator({}),
    )
    requested = authority.request(
        {"kind": "fs.delete", "name": "delete_file", "summary": "Delete it", "arguments": {}},
        origin={"harness": "tests", "session_id": "s"},
        context={"requester": "alice"},
    )
    request_id = requested.request.id
    client = TestClient(app)
    channels: list[str] = []

    def seen(report: Any) -> None:
        if report.request_id == request_id:
            channels.append(report.channel)

    unsubscribe = subscribe(seen)

    own = click(client, requested, "U0ALICE")
    assert own.status_code == 403 and own.json()["error"]["code"] == "aais.forbidden"
    assert authority.get_resolution(request_id) is None

    other = click(client, requested, "U0BOB")
    assert other.status_code == 200, other.text
    recorded = authority.get_resolution(request_id)
    assert recorded is not None and recorded.resolution.outcome == "approved"
    assert authority.decided_by(recorded) == "bob"
    unsubscribe()
    assert channels == ["slack"]  # judged under the Slack channel's name (metrics, traces)

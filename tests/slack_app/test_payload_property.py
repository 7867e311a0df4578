"""Any signed body to ``/slack/interactions`` is answered without a server error, and only a
click on a real button, by a mapped user, with the digest of the request, records anything."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.memory import InMemorySaver
from slack_sdk.signature import SignatureVerifier

from aais_agui import ApprovalService, bearer_token_authenticator, create_app
from aais_langgraph import ApprovalAuthority
from aais_langgraph.authority import Principal
from aais_langgraph.ledger import InMemoryLedger
from aais_langgraph.protocol import Actor
from aais_langgraph.webhooks import (
    ButtonValue,
    SlackApp,
    SlackChannel,
    SubscriptionPlan,
    request_message,
)
from agui.demo_graph import EffectLog, build_demo_graph

pytestmark = pytest.mark.slow  # a few hundred served requests

SECRET = "property-signing-secret"
ANSWERS = {200, 403, 404, 409, 413, 422}

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
FIELDS = st.sampled_from(["type", "user", "channel", "actions", "team", "container", "extra"])
USERS = st.sampled_from(["U0ALICE", "U0NOBODY", "", "U0 ALICE", "u0alice"])


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> tuple[TestClient, ApprovalAuthority]:
    folder: Path = tmp_path_factory.mktemp("property")
    channel = SlackChannel(name="ops", channel="C0OPS", token="xoxb-x", signing_secret=SECRET)
    alice = Principal(Actor(id="alice", type="human", authenticated_by="slack"))
    slack = SlackApp((channel,), {"U0ALICE": alice})
    ledger = InMemoryLedger(delivery_plan=SubscriptionPlan(slack.subscriptions))
    authority = ApprovalAuthority(ledger)
    graph = build_demo_graph(EffectLog(folder / "effects.db"), InMemorySaver())
    service = ApprovalService(graph, authority, slack=slack)
    app = create_app(service, authenticate=bearer_token_authenticator({}))
    return TestClient(app), authority


def fresh_request(authority: ApprovalAuthority) -> Any:
    return authority.request(
        {"kind": "fs.delete", "name": "delete_file", "summary": "Delete it", "arguments": {}},
        origin={"harness": "tests", "session_id": "s"},
        request_id=f"apr_{uuid.uuid4().hex}",
    )


def post(client: TestClient, text: str) -> Any:
    body = urlencode({"payload": text}).encode()
    timestamp = str(int(time.time()))
    signature = SignatureVerifier(SECRET).generate_signature(timestamp=timestamp, body=body)
    headers = {"x-slack-request-timestamp": timestamp, "x-slack-signature": str(signature)}
    return client.post("/slack/interactions", content=body, headers=headers)


@given(
    user=USERS,
    forge_digest=st.booleans(),
    decision=st.sampled_from(["approve", "deny", "cancel", "maybe"]),
    scope=st.sampled_from(["once", "session", "forever"]),
    broken=st.lists(st.tuples(FIELDS, JSON), max_size=2),
    raw=st.none() | st.text(max_size=60),
)
@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_only_a_real_click_by_a_mapped_user_records_anything(
    served: tuple[TestClient, ApprovalAuthority],
    user: str,
    forge_digest: bool,
    decision: str,
    scope: str,
    broken: list[tuple[str, Any]],
    raw: str | None,
) -> None:
    client, authority = served
    requested = fresh_request(authority)
    request = requested.request
    [actions] = [
        block
        for block in request_message(requested, include_arguments=False)["blocks"]
        if block["type"] == "actions"
    ]
    digest = "sha256:" + "1" * 64 if forge_digest else request.action_digest
    value = ButtonValue(request.id, digest, decision, scope).encode()
    payload: dict[str, Any] = {
        "type": "block_actions",
        "user": {"id": user},
        "channel": {"id": "C0OPS"},
        "actions": [{**actions["elements"][0], "value": value, "action_ts": f"{time.time():.6f}"}],
    }
    for field, junk in broken:
        payload[field] = junk
    answer = post(client, json.dumps(payload) if raw is None else raw)

    assert answer.status_code in ANSWERS, answer.text
    recorded = authority.get_resolution(request.id)
    event("recorded" if recorded is not None else f"refused {answer.status_code}")
    if recorded is not None:
        clean = raw is None and not {field for field, _ in broken} & {
            "type",
            "user",
            "channel",
            "actions",
        }
        assert clean and user == "U0ALICE" and not forge_digest, payload
        assert (decision, scope) in {("approve", "once"), ("deny", "once")}
        assert recorded.resolution.outcome in ("approved", "denied")
        assert answer.status_code == 200

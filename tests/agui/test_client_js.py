"""The client helper (``aais-client.js``) builds resume entries the server accepts.

Python serves the conformance request as an AG-UI interrupt; ``node --test``
(tests/agui/client_js) builds resume entries from it with the helper and
writes them out; here each one must parse, validate against the served
``responseSchema`` (when the answer is the payload) and be accepted by the
planner with a real authority. Needs Node.js >= 20 (no npm packages).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
from ag_ui.core import ResumeEntry

from aais_agui import create_app, local_development_authenticator
from aais_agui.mapping import parse_resume_entry, request_to_interrupt
from aais_agui.resume_plan import plan_resume
from aais_langgraph import ApprovalAuthority
from aais_langgraph.ledger import InMemoryLedger
from aais_langgraph.protocol import ApprovalDecided, ApprovalRequested
from aais_langgraph.threads import Cancellation

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
STATIC = ROOT / "aais_agui" / "static" / "aais-client.js"
REQUESTED = json.loads((ROOT / "tests" / "conformance" / "shell-approval.json").read_text())
BEFORE_EXPIRY = datetime(2026, 8, 30, 18, 1, tzinfo=timezone.utc)
ACTOR = {"id": "alice", "type": "human", "authenticated_by": "test"}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    if shutil.which("node") is None:
        pytest.fail("Node.js >= 20 is required for the aais-client.js tests")
    folder = tmp_path_factory.mktemp("client_js")
    interrupt = request_to_interrupt(REQUESTED, interrupt_id="i1")
    wire = interrupt.model_dump(mode="json", by_alias=True, exclude_none=True)
    (folder / "in.json").write_text(json.dumps({"interrupt": wire, "requested": REQUESTED}))
    completed = subprocess.run(
        ["node", "--test", "--test-reporter=spec", str(HERE / "client_js")],
        cwd=ROOT,
        env={
            **os.environ,
            "AAIS_CLIENT_IN": str(folder / "in.json"),
            "AAIS_CLIENT_OUT": str(folder / "out.json"),
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stdout[-6000:] + completed.stderr[-3000:]
    entries: list[dict[str, Any]] = json.loads((folder / "out.json").read_text())
    return entries


def test_the_node_tests_built_an_entry_for_every_choice_and_placement(
    built: list[dict[str, Any]],
) -> None:
    names = {item["name"] for item in built}
    for choice in REQUESTED["request"]["choices"]:
        for placement in ("payload", "aais", "metadata"):
            assert f"{choice['decision']}/{choice['scope']}/{placement}" in names


def test_every_built_entry_parses_as_the_answer_to_the_request(built: list[dict[str, Any]]) -> None:
    request = ApprovalRequested.from_data(REQUESTED).request
    for item in built:
        answer = parse_resume_entry(item["entry"], request=request)
        if item["name"] == "cancel":
            assert answer == Cancellation(request_id=request.id, reason="Not now")
        else:
            assert isinstance(answer, ApprovalDecided), item["name"]
            assert answer.decision.action_digest == request.action_digest


def test_every_built_payload_validates_against_the_served_response_schema(
    built: list[dict[str, Any]],
) -> None:
    schema = request_to_interrupt(REQUESTED, interrupt_id="i1").response_schema
    validator = jsonschema.Draft202012Validator(schema)
    for item in built:
        entry = item["entry"]
        if entry["status"] == "resolved" and "payload" in entry:
            assert validator.is_valid(entry["payload"]), item["name"]


def test_every_built_entry_is_accepted_by_the_planner(built: list[dict[str, Any]]) -> None:
    for item in built:
        authority = ApprovalAuthority(InMemoryLedger(), clock=lambda: BEFORE_EXPIRY)
        authority.add(REQUESTED)
        entry = ResumeEntry.model_validate(item["entry"])
        resume = plan_resume(authority, {"i1": REQUESTED}, [entry], actor=ACTOR)
        recorded = resume["i1"]["resolution"]
        expected = "cancelled" if item["name"] == "cancel" else None
        if expected:
            assert recorded["outcome"] == expected
        else:
            assert recorded["outcome"] in ("approved", "denied"), item["name"]


async def test_the_app_serves_the_helper_at_a_stable_path_to_any_origin() -> None:
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import START, StateGraph
    from typing_extensions import TypedDict

    class State(TypedDict, total=False):
        x: int

    builder = StateGraph(State)
    builder.add_node("noop", lambda state: {})
    builder.add_edge(START, "noop")
    app = create_app(
        builder.compile(checkpointer=InMemorySaver()),
        authority=ApprovalAuthority(),
        authenticate=local_development_authenticator(),
    )
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        served = await client.get("/aais-client.js")
        page_copy = await client.get("/inbox/static/aais-client.js")
    assert served.status_code == 200
    assert served.headers["content-type"].startswith("text/javascript")
    assert served.headers["access-control-allow-origin"] == "*"
    assert served.content == page_copy.content == STATIC.read_bytes()

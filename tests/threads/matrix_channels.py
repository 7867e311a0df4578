"""The channels of the channel matrix (``test_channel_matrix.py``): one answer, eight ways in.

Every channel works on the same served demo graph (``tests/agui/served_site.py``: the
graph in this process, its SQLite ledger, ``create_app`` on loopback with bearer user
alice). A cell pauses a fresh thread in process, then one channel sends its answer
and returns once the thread has settled (a channel that only records the decision is
followed by what a server does next: resume the thread with what was recorded).

- ``library``: ``resume_with_decisions(..., actor=alice)``;
- ``raw``: ``graph.invoke(Command(resume={interrupt_id: value}))`` (no actor: trusted code);
- ``http``: ``POST /approvals/{id}/decisions`` as alice (the app resumes in the background);
- ``websocket``: one decision frame on ``/approvals/ws`` as alice (likewise);
- ``stdio``: a line to the NDJSON presenter subprocess (actor: the OS user), then a resume;
- ``agui``: ``POST /agent`` with ``resume[]`` as alice (resumed in the same run);
- ``cli``: ``aais-langgraph --db DB approve ID --yes`` (actor: the OS user), then a resume;
- ``slack``: a click on the request's Slack button as alice's Slack user, the
  ``block_actions`` payload signed with the app's secret, to ``/slack/interactions``
  (the app resumes in the background); the body cannot name another actor, so a forged
  actor is a payload whose user *name* is mallory's (the actor is the mapped user id).
"""

from __future__ import annotations

import io
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

import httpx
from langchain_core.messages import HumanMessage
from langgraph.errors import is_invalid_resume
from langgraph.types import Command, Interrupt
from pydantic import ValidationError
from slack_sdk.signature import SignatureVerifier

from aais_agui import run_agent_input
from aais_langgraph import (
    ApprovalAuthority,
    RejectedResumeError,
    ThreadDriver,
    build_decision,
    resume_with_decisions,
)
from aais_langgraph.authority import Principal
from aais_langgraph.cli import main as cli_main
from aais_langgraph.ledger import RESUME
from aais_langgraph.protocol import AAISValidationError, Actor, ApprovalRequested
from aais_langgraph.webhooks import ButtonValue, SlackApp, SlackChannel, request_message
from agui.http_support import sse_messages
from agui.served_site import Site
from agui.transports.test_websocket import open_ws, receive, receive_until
from presenter.support import OS_USER, PresenterProcess, is_reply

ALICE_ID = "alice"  # the bearer user of alice-token on the served site
SLACK_SECRET = "matrix-signing-secret"
SLACK_CHANNEL = "C0MATRIX"
SLACK_ALICE = "U0ALICE"  # alice's Slack user id in the site's [slack_users]
MALLORY = {"id": "mallory", "type": "human"}
FORGED_DIGEST = "sha256:" + "0" * 64
SETTLE_WAIT = 15.0

#: Who each channel authenticates (None: the channel has no authenticated actor).
AUTHENTICATED: dict[str, str | None] = {
    "library": ALICE_ID,  # the actor= argument
    "raw": None,
    "http": ALICE_ID,
    "websocket": ALICE_ID,
    "stdio": OS_USER,
    "agui": ALICE_ID,
    "cli": OS_USER,
    "slack": ALICE_ID,
}


def slack_app() -> SlackApp:
    """The served site's Slack app: one channel, alice's Slack user mapped to alice."""
    channel = SlackChannel(
        name="matrix", channel=SLACK_CHANNEL, token="xoxb-unused", signing_secret=SLACK_SECRET
    )
    alice = Principal(Actor(id=ALICE_ID, type="human", authenticated_by="slack"))
    return SlackApp((channel,), {SLACK_ALICE: alice})


@dataclass(frozen=True)
class Cell:
    """A thread paused for one cell: its interrupts (LangGraph's), first one answered."""

    thread_id: str
    interrupts: list[Interrupt]

    @property
    def config(self) -> dict[str, Any]:
        return {"configurable": {"thread_id": self.thread_id}}

    @property
    def requested(self) -> list[dict[str, Any]]:
        return [dict(pending.value) for pending in self.interrupts]

    @property
    def request_ids(self) -> list[str]:
        return [str(requested["request"]["id"]) for requested in self.requested]

    def effect_of(self, index: int) -> tuple[str, str, str]:
        """The effect log row the action of request ``index`` writes when it runs."""
        action = self.requested[index]["request"]["action"]
        arguments = action["arguments"]
        return (self.thread_id, action["name"], arguments.get("path") or arguments["to"])


@dataclass
class Matrix:
    """The served site, alice's HTTP client and one NDJSON presenter, shared by every cell."""

    site: Site
    client: httpx.Client
    stdio: PresenterProcess

    def pause(self, text: str, *, raised_ago: timedelta | None = None) -> Cell:
        """Run a fresh thread until it waits; ``raised_ago`` backdates its requests (they
        are raised by an authority whose clock is that far behind, over the same ledger),
        so they have expired by the clock of every channel, in this process or not."""
        thread_id = f"thread_{uuid.uuid4().hex}"
        authority = self.site.authority
        if raised_ago is not None:
            real = authority.clock
            authority = ApprovalAuthority(authority.ledger, clock=lambda: real() - raised_ago)
        config = ThreadDriver(self.site.graph, authority).run_config(thread_id=thread_id)
        message = HumanMessage(content=text, id=f"u_{uuid.uuid4().hex}")
        self.site.graph.invoke({"messages": [message]}, config)
        interrupts = list(self.site.graph.get_state(config).interrupts)
        assert interrupts, "the thread did not pause"
        return Cell(thread_id, interrupts)

    def settle(self, cell: Cell) -> None:
        """Wait until no request of the cell has resume work due (a background resume)."""
        ledger = self.site.authority.ledger
        deadline = time.monotonic() + SETTLE_WAIT
        while any(
            (work := ledger.get_work(RESUME, request_id)) is not None and work.state == "due"
            for request_id in cell.request_ids
        ):
            assert time.monotonic() < deadline, "a recorded answer was never resumed"
            time.sleep(0.02)

    def resume_recorded(self, cell: Cell) -> None:
        """What a server does after a decision recorded elsewhere (CLI, stdio presenter)."""
        ThreadDriver(self.site.graph, self.site.authority, served=True).resume_resolved(
            cell.thread_id
        )


# -- answers ------------------------------------------------------------------------------


def honest_actor(channel: str) -> dict[str, Any]:
    """The actor an honest presenter of ``channel`` names in the body (itself)."""
    return {"id": AUTHENTICATED[channel] or ALICE_ID, "type": "human"}


def answer_body(answer: str, channel: str, requested: dict[str, Any]) -> dict[str, Any] | str:
    """The ``approval.decided`` of one answer: a JSON document, or JSON text."""
    actor = MALLORY if answer == "forged_actor" else honest_actor(channel)
    scope = "persistent" if answer == "unoffered" else "once"  # only "once" is offered
    decided = build_decision(requested, decision="approve", scope=scope, actor=actor).to_json()
    if answer == "forged_digest":
        decided["decision"]["action_digest"] = FORGED_DIGEST
    if answer == "duplicate_keys":
        # A parser that keeps the last of a repeated key reads a valid approval here.
        return '{"type":"approval.decided",' + json.dumps(decided)[1:]
    return decided


def as_text(body: dict[str, Any] | str) -> str:
    return body if isinstance(body, str) else json.dumps(body)


# -- the channels -------------------------------------------------------------------------
# Each sends the cell's answer to its first interrupt and returns a short note of the
# channel's own reply (for the report); a documented refusal is a reply, anything else
# (an unexpected exception, a 5xx, an internal RUN_ERROR) fails the cell.


def via_library(matrix: Matrix, cell: Cell, answer: str) -> str:
    body = answer_body(answer, "library", cell.requested[0])
    try:
        [resolved] = resume_with_decisions(
            matrix.site.graph,
            cell.config,
            body,
            actor={"id": ALICE_ID, "type": "human"},
            authority=matrix.site.authority,
        )
    except AAISValidationError as error:
        return f"AAISValidationError at {error.pointer}"
    return f"resolution {resolved.resolution.outcome}"


def via_raw(matrix: Matrix, cell: Cell, answer: str) -> str:
    body = answer_body(answer, "raw", cell.requested[0])
    config = ThreadDriver(matrix.site.graph, matrix.site.authority).run_config(
        thread_id=cell.thread_id
    )
    try:
        matrix.site.graph.invoke(Command(resume={cell.interrupts[0].id: body}), config)
    except (ValidationError, RejectedResumeError) as error:
        assert is_invalid_resume(error), error
        return f"{type(error).__name__} (invalid resume)"
    return "resumed"


def via_http(matrix: Matrix, cell: Cell, answer: str) -> str:
    body = answer_body(answer, "http", cell.requested[0])
    response = matrix.client.post(
        f"/approvals/{cell.request_ids[0]}/decisions",
        content=as_text(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code < 500, response.text
    matrix.settle(cell)
    document = response.json()
    said = document["resolution"]["outcome"] if "resolution" in document else document["error"]
    return f"{response.status_code} {said if isinstance(said, str) else said['code']}"


def _is_ws_reply(document: dict[str, Any]) -> bool:
    return "error" in document or str(document.get("stream", "")).startswith("aais-langgraph.ws_")


def via_websocket(matrix: Matrix, cell: Cell, answer: str) -> str:
    body = answer_body(answer, "websocket", cell.requested[0])
    with open_ws(matrix.site) as ws:
        receive(ws)  # the snapshot
        ws.send(as_text(body))
        reply = receive_until(ws, _is_ws_reply)
    matrix.settle(cell)
    if "error" in reply:
        return f"error frame {reply['error']['code']}"
    return f"resolution {reply['resolution']['outcome']}"


def via_stdio(matrix: Matrix, cell: Cell, answer: str) -> str:
    body = answer_body(answer, "stdio", cell.requested[0])
    matrix.stdio.send(as_text(body))
    reply = matrix.stdio.read_until(is_reply)
    matrix.resume_recorded(cell)
    if "error" in reply:
        return f"error line {reply['error']['code']}"
    assert reply["resolution"]["request_id"] == cell.request_ids[0]
    return f"resolution {reply['resolution']['outcome']}"


def via_agui(matrix: Matrix, cell: Cell, answer: str) -> str:
    body = answer_body(answer, "agui", cell.requested[0])
    placeholder = "__AAIS_PAYLOAD__"
    entry = {"interruptId": cell.interrupts[0].id, "status": "resolved", "payload": placeholder}
    text = json.dumps(run_agent_input(cell.thread_id, resume=[entry]))
    text = text.replace(json.dumps(placeholder), as_text(body), 1)
    with matrix.client.stream(
        "POST", "/agent", content=text.encode(), headers={"Content-Type": "application/json"}
    ) as response:
        if response.status_code != 200:
            response.read()
            assert response.status_code < 500, response.text
            return f"{response.status_code} {response.json()['error']['code']}"
        events = [message["data"] for message in sse_messages(response.iter_lines())]
    matrix.settle(cell)
    first = next(e for e in events if e["type"] in ("RUN_FINISHED", "RUN_ERROR"))
    if first["type"] == "RUN_FINISHED":
        return "RUN_FINISHED"
    assert first["code"] != "aais.internal", first
    return f"RUN_ERROR {first['code']}"


def via_cli(matrix: Matrix, cell: Cell, answer: str) -> str:
    extra = ["--scope", "persistent"] if answer == "unoffered" else []
    out = io.StringIO()
    argv = ["--db", str(matrix.site.db), "approve", cell.request_ids[0], "--yes", *extra]
    code = cli_main(argv, stdin=io.StringIO(""), stdout=out)
    matrix.resume_recorded(cell)
    return f"exit {code}: {out.getvalue().strip().splitlines()[-1]}"


def via_slack(matrix: Matrix, cell: Cell, answer: str) -> str:
    requested = ApprovalRequested.from_data(cell.requested[0])
    message = request_message(requested, include_arguments=False)
    [actions] = [block for block in message["blocks"] if block["type"] == "actions"]
    clicked = dict(actions["elements"][0])  # approve/once, as offered
    value = ButtonValue.decode(clicked["value"])
    if answer == "forged_digest":
        value = ButtonValue(value.request_id, FORGED_DIGEST, value.decision, value.scope)
    if answer == "unoffered":
        value = ButtonValue(value.request_id, value.action_digest, "approve", "persistent")
    clicked["value"] = value.encode()
    name = "mallory" if answer == "forged_actor" else "alice"
    payload = {
        "type": "block_actions",
        "user": {"id": SLACK_ALICE, "username": name, "name": name, "team_id": "T0TEAM"},
        "api_app_id": "A0APP",
        "container": {"type": "message", "channel_id": SLACK_CHANNEL, "message_ts": "1.000001"},
        "team": {"id": "T0TEAM", "domain": "example"},
        "channel": {"id": SLACK_CHANNEL, "name": "approvals"},
        "actions": [{**clicked, "block_id": "aais_choices", "action_ts": f"{time.time():.6f}"}],
    }
    text = json.dumps(payload)
    if answer == "duplicate_keys":
        # A parser that keeps the last of a repeated key reads a valid click here.
        text = '{"type":"view_closed",' + text[1:]
    body = urlencode({"payload": text}).encode()
    timestamp = str(int(time.time()))
    signature = SignatureVerifier(SLACK_SECRET).generate_signature(timestamp=timestamp, body=body)
    response = httpx.post(
        f"{matrix.site.url}/slack/interactions",
        content=body,
        headers={
            "content-type": "application/x-www-form-urlencoded",
            "x-slack-request-timestamp": timestamp,
            "x-slack-signature": str(signature),
        },
        timeout=30,
    )
    assert response.status_code < 500, response.text
    matrix.settle(cell)
    document = response.json()
    said = document["error"]["code"] if "error" in document else document["resolution"]
    return (
        f"{response.status_code} {said if isinstance(said, str) else said['resolution']['outcome']}"
    )


CHANNELS: dict[str, Callable[[Matrix, Cell, str], str]] = {
    "library": via_library,
    "raw": via_raw,
    "http": via_http,
    "websocket": via_websocket,
    "stdio": via_stdio,
    "agui": via_agui,
    "cli": via_cli,
    "slack": via_slack,
}

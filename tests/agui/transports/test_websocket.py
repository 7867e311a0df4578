"""The AAIS WebSocket profile (``/approvals/ws``): a ``websockets`` client against uvicorn."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import aais
import httpx
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.frames import Frame, Opcode
from websockets.sync.client import ClientConnection, connect

from aais_agui import run_agent_input
from aais_agui.http.log_guard import ClientNoise
from aais_langgraph import build_decision
from aais_langgraph.authority import DEFAULT_STREAM
from aais_langgraph.protocol.extensions import IN_REPLY_TO_EXTENSION as IN_REPLY_TO
from hostile.report import record

from ..http_support import agui_run
from ..served_site import MAX_BODY, REVOKED, Site, served_site

MALLORY = {"id": "mallory", "type": "human"}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    with served_site(tmp_path_factory.mktemp("ws")) as served:
        yield served


@pytest.fixture
def client(site: Site) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=site.url, headers={"Authorization": "Bearer alice-token"}, timeout=30
    ) as client:
        yield client


def open_ws(site: Site, query: str = "", token: str | None = "alice-token", **options: Any) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    headers.update(options.pop("headers", {}))
    return connect(
        site.ws + query, additional_headers=headers, open_timeout=10, max_size=None, **options
    )


def receive(ws: ClientConnection, timeout: float = 10.0) -> dict[str, Any]:
    frame = ws.recv(timeout=timeout)
    assert isinstance(frame, str)
    document: dict[str, Any] = json.loads(frame)
    if "aais" in document:
        aais.validate(document)  # every envelope frame passes the reference library
    return document


def receive_until(ws: ClientConnection, match: Any, timeout: float = 15.0) -> dict[str, Any]:
    """The first frame ``match`` accepts (frames before it are skipped)."""
    deadline = time.monotonic() + timeout
    while True:
        document = receive(ws, max(deadline - time.monotonic(), 0.01))
        if match(document):
            return document


def pause(client: httpx.Client) -> tuple[str, dict[str, Any]]:
    thread_id = f"thread_{uuid.uuid4().hex}"
    events = agui_run(client, "/agent", run_agent_input(thread_id, text=f"delete /srv/{thread_id}"))
    finished = events[-1]
    assert finished["type"] == "RUN_FINISHED", finished
    [interrupt] = finished["outcome"]["interrupts"]
    return thread_id, interrupt


def decided(interrupt: dict[str, Any], kind: str = "approve", **kwargs: Any) -> dict[str, Any]:
    """A decision naming mallory: the server must replace her with the connection's actor."""
    return build_decision(
        interrupt["metadata"]["aais"], decision=kind, actor=MALLORY, **kwargs
    ).to_json()


def request_id(interrupt: dict[str, Any]) -> str:
    return str(interrupt["metadata"]["aais"]["request"]["id"])


def is_resolution_of(rid: str) -> Any:
    return lambda d: d.get("type") == "approval.resolved" and d["resolution"]["request_id"] == rid


def wait_for_runs(site: Site, thread_id: str, count: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while len(site.effects.list(thread_id)) < count:
        assert time.monotonic() < deadline, "the approved action did not run"
        time.sleep(0.05)


# -- the authority's stream ----------------------------------------------------------------


def test_a_snapshot_first_then_the_events_after_it(site: Site, client: httpx.Client) -> None:
    _, waiting = pause(client)
    with open_ws(site) as ws:
        snapshot = receive(ws)
        assert snapshot["type"] == "approval.snapshot"
        assert snapshot["stream"] == DEFAULT_STREAM
        assert request_id(waiting) in {r["id"] for r in snapshot["snapshot"]["pending"]}
        aais.validate(snapshot)
        _, later = pause(client)
        requested = receive_until(ws, lambda d: d.get("type") == "approval.requested")
        assert requested["request"]["id"] == request_id(later)
        assert requested["stream"] == DEFAULT_STREAM
        assert requested["sequence"] > snapshot["snapshot"]["as_of_sequence"]
        aais.validate(requested)


def test_a_decision_gets_its_resolution_on_the_connections_own_stream(
    site: Site, client: httpx.Client
) -> None:
    thread_id, interrupt = pause(client)
    body = decided(interrupt)
    with open_ws(site) as ws, open_ws(site, token="bob-token") as other:
        receive(ws)
        receive(other)
        ws.send(json.dumps(body))
        reply = receive_until(ws, lambda d: d.get("stream", "").startswith("aais-langgraph.ws_"))
        aais.validate(reply)
        assert reply["type"] == "approval.resolved" and reply["sequence"] == 1
        assert reply["resolution"]["outcome"] == "approved"
        assert reply["extensions"][IN_REPLY_TO] == {
            "frame": 1,
            "decision_id": body["decision"]["id"],
        }
        # the other connection sees the same state on the authority's stream
        seen = receive_until(other, is_resolution_of(request_id(interrupt)))
        assert seen["stream"] == DEFAULT_STREAM
        assert seen["resolution"]["id"] == reply["resolution"]["id"]
    stored = site.authority.get_resolution(request_id(interrupt))
    assert stored is not None
    decided_events = [
        e
        for e in site.authority.events_after(0, limit=100_000).events
        if e["type"] == "approval.decided" and e["decision"]["request_id"] == request_id(interrupt)
    ]
    assert [e["decision"]["actor"]["id"] for e in decided_events] == ["alice"]
    wait_for_runs(site, thread_id, 1)


def test_each_connection_has_its_own_reply_stream_and_sequences(
    site: Site, client: httpx.Client
) -> None:
    _, first = pause(client)
    _, second = pause(client)
    replies = []
    for interrupt in (first, second):
        with open_ws(site) as ws:
            receive(ws)
            ws.send(json.dumps(decided(interrupt, "deny")))
            replies.append(
                receive_until(ws, lambda d: "resolution" in d and d["stream"] != DEFAULT_STREAM)
            )
    assert replies[0]["stream"] != replies[1]["stream"]
    assert [r["sequence"] for r in replies] == [1, 1]


def test_outcomes_conflict_stale_and_replay_are_resolutions(
    site: Site, client: httpx.Client
) -> None:
    _, interrupt = pause(client)
    stale = decided(interrupt)
    stale["decision"]["action_digest"] = "sha256:" + "2" * 64
    first = decided(interrupt, "deny")
    with open_ws(site) as ws:
        receive(ws)
        outcomes = []
        for body in (stale, first, first, decided(interrupt)):
            ws.send(json.dumps(body))
            reply = receive_until(
                ws, lambda d: d.get("stream", "").startswith("aais-langgraph.ws_")
            )
            outcomes.append(reply["resolution"]["outcome"])
    assert outcomes == ["stale", "denied", "denied", "conflict"]


def test_resuming_after_a_sequence_and_the_gap_signal(site: Site, client: httpx.Client) -> None:
    with open_ws(site) as ws:
        as_of = receive(ws)["snapshot"]["as_of_sequence"]
    _, interrupt = pause(client)
    with open_ws(site, f"?after={as_of}") as ws:
        first = receive(ws)
        assert first["type"] == "approval.requested" and first["sequence"] == as_of + 1
        assert first["request"]["id"] == request_id(interrupt)
    ahead = site.authority.ledger.last_sequence() + 1000
    with open_ws(site, f"?after={ahead}") as ws:
        gap = receive(ws)
        assert gap == {
            "gap": {"after_sequence": ahead, "last_sequence": gap["gap"]["last_sequence"]}
        }
        assert receive(ws)["type"] == "approval.snapshot"


# -- the handshake ---------------------------------------------------------------------------


def refused_status(site: Site, query: str = "", **options: Any) -> int:
    with pytest.raises(InvalidStatus) as refused:
        open_ws(site, query, **options).close()
    assert "value" not in refused.value.response.body.decode()
    return int(refused.value.response.status_code)


@pytest.mark.parametrize("after", ["-1", "\xb2", "1e3", "9" * 40, "0x10", "9007199254740992"])
def test_a_bad_after_is_refused_at_the_handshake(site: Site, after: str) -> None:
    from urllib.parse import quote

    assert refused_status(site, f"?after={quote(after)}") == 400


def test_the_handshake_needs_an_actor(site: Site) -> None:
    assert refused_status(site, token=None) == 401
    assert refused_status(site, token="forged") == 401


@pytest.mark.parametrize(
    "origin", ["https://evil.example", "http://127.0.0.1.evil.example", "null", "file://"]
)
def test_a_foreign_origin_is_refused_at_the_handshake(site: Site, origin: str) -> None:
    assert refused_status(site, headers={"Origin": origin}) == 403


def test_same_and_allowed_origins_connect(site: Site) -> None:
    for origin in (site.url, "https://inbox.example"):
        with open_ws(site, headers={"Origin": origin}) as ws:
            assert receive(ws)["type"] == "approval.snapshot"


def test_cookie_sessions_need_the_csrf_token_in_the_query(site: Site) -> None:
    with httpx.Client(base_url=site.url, cookies={"session": "bob-session"}) as browser:
        token = browser.get("/approvals/csrf").json()["csrf_token"]
    cookie = {"Cookie": f"session=bob-session; aais_csrf={token}", "Origin": site.url}
    assert refused_status(site, token=None, headers=cookie) == 403
    assert refused_status(site, "?csrf=wrong", token=None, headers=cookie) == 403
    with open_ws(site, f"?csrf={token}", token=None, headers=cookie) as ws:
        assert receive(ws)["type"] == "approval.snapshot"


# -- a connection never outlives its login --------------------------------------------------


def _bobs_socket(site: Site) -> Any:
    with httpx.Client(base_url=site.url, cookies={"session": "bob-session"}) as browser:
        token = browser.get("/approvals/csrf").json()["csrf_token"]
    cookie = {"Cookie": f"session=bob-session; aais_csrf={token}", "Origin": site.url}
    return open_ws(site, f"?csrf={token}", token=None, headers=cookie)


def test_a_revoked_session_cannot_decide_on_its_open_socket(
    site: Site, client: httpx.Client
) -> None:
    thread_id, interrupt = pause(client)
    try:
        with _bobs_socket(site) as ws:
            assert receive(ws)["type"] == "approval.snapshot"
            REVOKED.add("bob-session")
            ws.send(json.dumps(decided(interrupt)))
            with pytest.raises(ConnectionClosed) as closed:
                receive_until(ws, lambda frame: False, timeout=10)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
    finally:
        REVOKED.discard("bob-session")
    recorded = site.authority.get_resolution(request_id(interrupt))
    record("revoked sessions", 1, failed_open=int(recorded is not None))
    assert recorded is None
    assert site.effects.list(thread_id) == []


def test_a_revoked_session_stops_receiving_within_the_reauth_interval(site: Site) -> None:
    try:
        with _bobs_socket(site) as ws:
            assert receive(ws)["type"] == "approval.snapshot"
            REVOKED.add("bob-session")
            started = time.monotonic()
            with pytest.raises(ConnectionClosed) as closed:
                receive_until(ws, lambda frame: False, timeout=10)
            stayed = time.monotonic() - started
        record("revoked sessions", 1, failed_open=int(stayed >= 5.0))
        assert stayed < 5.0
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
    finally:
        REVOKED.discard("bob-session")


def test_refused_and_malformed_clients_do_not_flood_the_log(site: Site) -> None:
    # create_app installed it (the site was built with it): one per process.
    [guard] = [f for f in logging.getLogger("uvicorn.error").filters if isinstance(f, ClientNoise)]
    seen_before = guard.seen
    captured: list[logging.LogRecord] = []

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            captured.append(record)

    handler = Capture()
    loggers = [logging.getLogger(name) for name in ("uvicorn.error", "asyncio")]
    for logger in loggers:
        logger.addHandler(handler)
    malformed = 3
    try:
        # Refused handshakes: uvicorn releases before 0.55 log each at ERROR; later
        # ones treat the denial response as a completed handshake and log nothing.
        for _ in range(5):
            assert refused_status(site, token=None) == 401
        for _ in range(malformed):  # each makes uvicorn log an ERROR with a traceback
            with open_ws(site) as ws:
                assert receive(ws)["type"] == "approval.snapshot"
                with ws.protocol_mutex:  # a raw text frame that is not UTF-8
                    ws.protocol.send_frame(Frame(Opcode.TEXT, b"\xff\xfe not utf-8"))
                    ws.send_data()
                with pytest.raises(ConnectionClosed):
                    receive_until(ws, lambda frame: False, timeout=10)
        deadline = time.monotonic() + 5
        while guard.seen - seen_before < malformed and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        for logger in loggers:
            logger.removeHandler(handler)
    assert guard.seen - seen_before >= malformed
    assert [r for r in captured if r.levelno >= logging.ERROR] == []
    assert all(r.exc_info is None for r in captured)
    assert len(captured) <= 1


# -- bad frames ------------------------------------------------------------------------------


def test_an_oversized_frame_closes_with_1009_and_records_nothing(
    site: Site, client: httpx.Client
) -> None:
    _, interrupt = pause(client)
    body = decided(interrupt)
    body["extensions"] = {"example.org/padding": "x" * MAX_BODY}
    with open_ws(site) as ws:
        receive(ws)
        ws.send(json.dumps(body))
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                receive(ws)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
    assert site.authority.get_resolution(request_id(interrupt)) is None


def test_malformed_frames_get_an_error_naming_the_field(site: Site, client: httpx.Client) -> None:
    _, interrupt = pause(client)
    body = decided(interrupt)
    secret = "S3CRET-VALUE"
    duplicate = json.dumps(body)[:-1] + f', "aais": "{secret}"}}'
    edited = decided(interrupt)
    edited["decision"]["arguments"] = {"path": secret}
    unknown = decided(interrupt)
    unknown["decision"]["request_id"] = "apr_" + "0" * 32
    with open_ws(site) as ws:
        receive(ws)
        errors = []
        for text in (duplicate, json.dumps(edited), json.dumps(unknown), "", f"[{secret}"):
            ws.send(text)
            errors.append(receive_until(ws, lambda d: "error" in d)["error"])
        ws.send(secret.encode())
        errors.append(receive_until(ws, lambda d: "error" in d)["error"])
    assert secret not in json.dumps(errors)
    assert [e["frame"] for e in errors] == [1, 2, 3, 4, 5, 6]
    assert [e["code"] for e in errors] == ["aais.invalid_envelope"] * 2 + [
        "aais.unknown_request",
        "aais.invalid_envelope",
        "aais.invalid_envelope",
        "aais.binary_frame",
    ]
    assert errors[1]["pointer"] == "/decision/arguments"
    assert site.authority.get_resolution(request_id(interrupt)) is None


# -- racing presenters -----------------------------------------------------------------------


def test_websocket_http_and_cli_race_one_resolution_at_most_one_run(
    site: Site, client: httpx.Client
) -> None:
    thread_id, interrupt = pause(client)
    rid = request_id(interrupt)
    outcomes: dict[str, str] = {}
    start = threading.Barrier(3)

    def by_websocket() -> None:
        with open_ws(site) as ws:
            receive(ws)
            start.wait()
            ws.send(json.dumps(decided(interrupt)))
            reply = receive_until(
                ws, lambda d: d.get("stream", "").startswith("aais-langgraph.ws_")
            )
            outcomes["websocket"] = reply["resolution"]["outcome"]

    def by_http() -> None:
        with httpx.Client(base_url=site.url, headers={"Authorization": "Bearer bob-token"}) as bob:
            start.wait()
            response = bob.post(f"/approvals/{rid}/decisions", json=decided(interrupt))
            outcomes["http"] = response.json()["resolution"]["outcome"]

    def by_cli() -> None:
        start.wait()
        command = [sys.executable, "-m", "aais_langgraph.cli", "--db", str(site.db)]
        done = subprocess.run(
            [*command, "approve", rid, "--yes"], capture_output=True, text=True, timeout=60
        )
        outcomes["cli"] = "approved" if done.returncode == 0 else "conflict"

    threads = [threading.Thread(target=f) for f in (by_websocket, by_http, by_cli)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(90)
    assert sorted(outcomes.values()) == ["approved", "conflict", "conflict"], outcomes
    resolved = [
        e
        for e in site.authority.events_after(0, limit=100_000).events
        if e["type"] == "approval.resolved" and e["resolution"]["request_id"] == rid
    ]
    assert len(resolved) == 1
    if outcomes["cli"] != "approved":
        wait_for_runs(site, thread_id, 1)
    time.sleep(1.0)  # a second run would have landed by now
    assert len(site.effects.list(thread_id)) <= 1

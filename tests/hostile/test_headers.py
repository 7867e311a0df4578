"""Fuzz every header and query parameter the app reads, on every route of ``create_app``, for 5xx.

Over real HTTP (uvicorn on loopback) with hypothesis; ``Content-Length``, which an
HTTP/1.1 client cannot lie about, goes straight through ASGI.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.memory import InMemorySaver

from aais_agui import ServiceSettings, bearer_token_authenticator, create_app, run_agent_input
from aais_langgraph import ApprovalAuthority
from aais_langgraph.ledger import SqliteLedger
from agui.demo_graph import EffectLog, build_demo_graph

from .conftest import SENTINEL, USERS, Paused, Probe, Site
from .report import record

CATEGORY = "HTTP profile"

#: Every route of ``create_app`` (method, path template); the test below keeps this complete.
ROUTES = {
    ("GET", "/"),
    ("GET", "/inbox/static/{name}"),
    ("GET", "/aais-client.js"),
    ("GET", "/inbox/config"),
    ("GET", "/inbox/explanations/{request_id}"),
    ("GET", "/inbox/threads/{thread_id}"),
    ("GET", "/inbox/grants"),
    ("POST", "/inbox/grants/{grant_id}/revoke"),
    ("GET", "/inbox/resolutions"),
    ("POST", "/agent"),
    ("GET", "/agent/capabilities"),
    ("GET", "/agent/health"),
    ("GET", "/approvals/snapshot"),
    ("POST", "/approvals/{request_id}/decisions"),
    ("POST", "/approvals/{request_id}/cancel"),
    ("GET", "/approvals/events"),
    ("GET", "/approvals/csrf"),
    ("GET", "/favicon.ico"),
    ("GET", "/inbox/webhooks"),
    ("POST", "/inbox/webhooks/{delivery_id}/retry"),
}

#: Every WebSocket route of ``create_app`` (fuzzed in ``test_websocket.py``).
WEBSOCKET_ROUTES = {"/approvals/ws"}

#: Every request header the app (routers, security, authenticators) reads.
HEADERS = [
    "host",
    "origin",
    "sec-fetch-site",
    "content-type",
    "authorization",
    "cookie",
    "x-aais-csrf",
    "last-event-id",
    "accept",
    "forwarded",
    "x-forwarded-for",
    "x-real-ip",
]

#: Every query parameter the app reads, plus one it does not.
QUERY = ["after", "csrf", "unknown"]

INTERESTING = [
    "",
    "\xb2",
    "\xb9\xb2\xb3",
    "-1",
    "+1",
    "1e3",
    "0x10",
    "1_000",
    "9" * 40,
    "9007199254740992",
    "null",
    "undefined",
    "Bearer",
    "Bearer alice-token",
    "bearer alice-token",
    "Bearer alice-token alice-token",
    "session=carol-session",
    "session=carol-session; aais_csrf=x",
    "aais_csrf=\xff",
    "application/json",
    "application/json; charset=utf-16",
    "text/event-stream",
    "application/vnd.ag-ui.event+proto",
    "*/*;q=\xb2",
    "same-origin",
    "cross-site",
    "none",
    "http://127.0.0.1",
    "[::1]",
    "\xc3\xa9",
    "%00",
    "x" * 3000,
    SENTINEL,
    "Bearer " + SENTINEL,
]

header_values = st.one_of(
    st.sampled_from(INTERESTING),
    st.text(
        alphabet=st.characters(min_codepoint=0x21, max_codepoint=0xFF, exclude_characters="\x7f"),
        max_size=40,
    ),
)


def _path(template: str, paused: Paused) -> str:
    filled = {
        "{name}": "app.js",
        "{request_id}": paused.request_ids[0],
        "{thread_id}": paused.thread_id,
        "{grant_id}": "grt_no_such_grant",
        "{delivery_id}": "whd_no_such_delivery",
    }
    for key, value in filled.items():
        template = template.replace(key, value)
    return template


def test_the_fuzzed_routes_are_every_route_of_create_app(tmp_path: Path) -> None:
    ledger = SqliteLedger(tmp_path / "ledger.db")
    ledger.setup()
    graph = build_demo_graph(EffectLog(tmp_path / "effects.db"), InMemorySaver())
    app = create_app(graph, authority=ApprovalAuthority(ledger), authenticate=lambda _: None)
    served = {
        (method, route.path)
        for route in _flat(app.routes)
        for method in getattr(route, "methods", ()) or ()
        if method != "HEAD"
    }
    assert served == ROUTES
    sockets = {route.path for route in _flat(app.routes) if not hasattr(route, "methods")}
    assert sockets == WEBSOCKET_ROUTES


def _flat(routes: list[Any]) -> Any:
    """Routes of included routers too (FastAPI >= 0.165 keeps included routers as one route)."""
    for route in routes:
        included = getattr(route, "original_router", None)
        if included is not None:
            yield from _flat(included.routes)
        else:
            yield route


@pytest.mark.parametrize("route", sorted(ROUTES), ids=lambda route: " ".join(route))
def test_no_header_or_query_value_is_a_server_error(site: Site, route: tuple[str, str]) -> None:
    paused = site.pause()
    probe = Probe(site, CATEGORY, [paused])
    stale = paused.decided()
    stale["decision"]["action_digest"] = "sha256:" + "2" * 64
    client = site.client(token=None)

    @settings(
        max_examples=25,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(
        headers=st.dictionaries(st.sampled_from(HEADERS), header_values, max_size=4),
        query=st.dictionaries(st.sampled_from(QUERY), header_values, max_size=2),
        authenticated=st.booleans(),
    )
    # str.isdigit() takes superscripts that int() refuses (a 500 on /approvals/events).
    @example(headers={"last-event-id": "\xb2"}, query={}, authenticated=True)
    @example(headers={}, query={"after": "\xb9\xb2\xb3"}, authenticated=True)
    @example(headers={"host": "[::1].evil.com:1", "origin": "null"}, query={}, authenticated=True)
    def send(headers: dict[str, str], query: dict[str, str], authenticated: bool) -> None:
        method, template = route
        sent: dict[str, Any] = {"Authorization": "Bearer alice-token"} if authenticated else {}
        sent.update({name: value.encode("latin-1") for name, value in headers.items()})
        body: dict[str, Any] = {}
        if template == "/agent":
            body = {"json": run_agent_input(f"fuzz_{uuid.uuid4().hex}", text="hello")}
        elif method == "POST":
            body = {"json": stale}
        path = _path(template, paused)
        what = f"{method} {template} headers={sorted(headers)} query={query}"
        try:
            with client.stream(method, path, headers=sent, params=query, **body) as response:
                streaming = "event-stream" in response.headers.get("content-type", "")
                if streaming and template != "/agent":
                    probe.status(response.status_code, what)  # an endless stream: not read
                    return
                response.read()
        except httpx.LocalProtocolError:
            return  # the client refused to send it (e.g. a header value with spaces at its ends)
        probe.response(response, what)

    try:
        send()
    finally:
        client.close()
    probe.finish()
    probe.still_answerable()


async def _asgi_post(app: Any, path: str, headers: list[tuple[bytes, bytes]]) -> int:
    """POST ``{}`` straight to the ASGI app with exactly these header bytes; the status."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1:8000"), *headers],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }
    messages = [{"type": "http.request", "body": b"{}", "more_body": False}]
    statuses: list[int] = []

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(int(message["status"]))

    try:
        await app(scope, receive, send)
    except Exception:
        return 500
    return statuses[0] if statuses else 500


def test_no_content_length_is_a_server_error(tmp_path: Path) -> None:
    """``Content-Length`` bytes no HTTP/1.1 client would send, straight through ASGI."""
    ledger = SqliteLedger(tmp_path / "ledger.db")
    ledger.setup()
    effects = EffectLog(tmp_path / "effects.db")
    app = create_app(
        build_demo_graph(effects, InMemorySaver()),
        authority=ApprovalAuthority(ledger),
        authenticate=bearer_token_authenticator(USERS),
        settings=ServiceSettings(max_body_bytes=1000),
    )
    tried = errors = 0

    @settings(max_examples=80, deadline=None)
    @given(length=header_values, path=st.sampled_from(["/agent", "/approvals/apr_x/decisions"]))
    def send(length: str, path: str) -> None:
        nonlocal tried, errors
        headers = [
            (b"authorization", b"Bearer alice-token"),
            (b"content-type", b"application/json"),
            (b"content-length", length.encode("latin-1")),
        ]
        status = asyncio.run(_asgi_post(app, path, headers))
        tried += 1
        errors += status >= 500
        assert status < 500, (length, status)

    try:
        send()
    finally:
        record(CATEGORY, tried, server_errors=errors)
    assert effects.list() == []

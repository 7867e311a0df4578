"""An open SSE stream never outlives its login: JWT logins on the served app, over real HTTP.

The stream's actor is authenticated again (the app's own ``authenticate``, on the
connection's headers) every reauth interval and before anything is sent once that
interval has passed; a login that ended (an expired token) ends the stream, and no
request raised after that reaches it.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import httpx
import jwt
import pytest
from langgraph.checkpoint.memory import InMemorySaver

from aais_agui import ServiceSettings, create_app
from aais_agui.http.jwt_tokens import JwtSettings, jwt_authenticator
from aais_langgraph import ApprovalAuthority
from aais_langgraph.ledger import SqliteLedger
from hostile.report import record

from ..demo_graph import EffectLog, build_demo_graph
from ..http_support import serve, sse_messages

ISSUER = "https://idp.example.test"
AUDIENCE = "aais-approvals"
SECRET = "a shared secret for the stream tests, long enough for HS256"
REAUTH_INTERVAL = 0.5


@dataclass
class Site:
    url: str
    authority: ApprovalAuthority


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    folder: Path = tmp_path_factory.mktemp("stream-login")
    ledger = SqliteLedger(folder / "ledger.db", synchronous="NORMAL")
    ledger.setup()
    authority = ApprovalAuthority(ledger)
    graph = build_demo_graph(EffectLog(folder / "effects.db"), InMemorySaver())
    # No leeway: the token ends exactly at its ``exp``.
    settings = JwtSettings(issuer=ISSUER, audience=AUDIENCE, secret=SECRET, leeway=0)
    app = create_app(
        graph,
        authority=authority,
        authenticate=jwt_authenticator(settings),
        settings=ServiceSettings(stream_poll=0.05, reauth_every=REAUTH_INTERVAL),
    )
    with serve(app) as url:
        yield Site(url, authority)


def token(*, lifetime: float, subject: str = "alice") -> str:
    now = time.time()
    claims = {"sub": subject, "iss": ISSUER, "aud": AUDIENCE, "iat": int(now)}
    claims["exp"] = int(now + lifetime)
    return jwt.encode(claims, SECRET, algorithm="HS256")


def raise_request(authority: ApprovalAuthority, marker: str) -> str:
    requested = authority.request(
        {
            "kind": "process.exec",
            "name": "shell.exec",
            "summary": "Run a command",
            "arguments": {"command": f"echo {marker}"},
        },
        origin={"harness": "tests", "session_id": f"s-{marker}"},
        expires_in=timedelta(minutes=5),
    )
    return requested.request.id


@dataclass
class Reader:
    """An SSE stream read on a thread: its raw text, and how it ended."""

    text: list[str]
    opened: threading.Event
    ended: threading.Event
    error: list[BaseException]


def read_stream(site: Site, bearer: str, *, read_timeout: float) -> Reader:
    reader = Reader([], threading.Event(), threading.Event(), [])

    def run() -> None:
        try:
            timeout = httpx.Timeout(30, read=read_timeout)
            with (
                httpx.Client(base_url=site.url, timeout=timeout) as client,
                client.stream(
                    "GET", "/approvals/events", headers={"Authorization": f"Bearer {bearer}"}
                ) as response,
            ):
                assert response.status_code == 200
                for line in response.iter_lines():
                    reader.text.append(line)
                    if line.startswith("data:"):
                        reader.opened.set()
            reader.ended.set()
        except BaseException as error:
            reader.error.append(error)
            reader.opened.set()

    threading.Thread(target=run, name="sse-reader", daemon=True).start()
    return reader


def test_a_stream_whose_token_expires_ends_and_never_delivers_a_later_request(
    site: Site,
) -> None:
    expiring = token(lifetime=2.0)
    expires_at = jwt.decode(expiring, options={"verify_signature": False})["exp"]
    reader = read_stream(site, expiring, read_timeout=8.0)
    assert reader.opened.wait(10), "the stream did not open"
    assert not reader.error, reader.error
    # Past the token's expiry and one reauth interval: the login has ended.
    time.sleep(max(0.0, expires_at - time.time()) + REAUTH_INTERVAL + 0.5)
    marker = f"after-expiry-{uuid.uuid4().hex}"
    raise_request(site.authority, marker)
    finished = reader.ended.wait(10)
    delivered = marker in "\n".join(reader.text)
    record("streams after the login ended", 1, failed_open=int(delivered))
    assert not delivered, "a request raised after the login ended reached the stream"
    assert finished and not reader.error, f"the stream did not end: {reader.error}"
    last = list(sse_messages(iter(reader.text)))[-1]
    assert last["event"] == "aais.unauthenticated"
    assert last["data"]["code"] == "aais.unauthenticated"


def test_a_stream_with_a_live_login_keeps_delivering_past_the_reauth_interval(
    site: Site,
) -> None:
    reader = read_stream(site, token(lifetime=300.0), read_timeout=30.0)
    assert reader.opened.wait(10), "the stream did not open"
    time.sleep(REAUTH_INTERVAL * 3)
    marker = f"live-{uuid.uuid4().hex}"
    request_id = raise_request(site.authority, marker)
    deadline = time.monotonic() + 10
    while marker not in "\n".join(reader.text) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker in "\n".join(reader.text)
    assert not reader.ended.is_set() and not reader.error
    messages = list(sse_messages(iter([*reader.text, ""])))
    assert any(m["data"].get("request", {}).get("id") == request_id for m in messages)

"""Browser sign-in against a real OpenID provider (node-oidc-provider on loopback).

The served app signs people in with the authorization-code flow and PKCE; the session
is a server-side record behind an HttpOnly cookie, mapped to the principal a JWT of the
same issuer maps to, and it ends (sign-out, revocation, expiry) for every later request
and for the streams that re-authenticate on it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit, urlunsplit

import httpx
import jwt
import pytest
import uvicorn
from langgraph.checkpoint.memory import InMemorySaver
from starlette.requests import Request

from aais_agui import ServiceSettings, create_app
from aais_agui.http.jwt_tokens import JwtSettings, jwt_authenticator
from aais_agui.http.sessions import InMemorySessionStore, SqliteSessionStore, session_key
from aais_agui.http.sign_in import SESSION_COOKIE, BrowserSignIn, SignInSettings
from aais_langgraph import ApprovalAuthority
from aais_langgraph.ledger import SqliteLedger
from support.oidc_provider import (
    GROUPS,
    OpenIdProvider,
    free_port,
    openid_provider,
    sign_in_at_provider,
)

from ..demo_graph import EffectLog, build_demo_graph
from ..http_support import sse_messages

REAUTH_INTERVAL = 0.5
LIFETIME = 600.0


class Clock:
    """The sign-in's clock: the real time plus an offset a test moves forward."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


@dataclass
class Site:
    url: str
    provider: OpenIdProvider
    sign_in: BrowserSignIn
    authority: ApprovalAuthority
    clock: Clock
    store: InMemorySessionStore


@contextmanager
def _serve(app: Any, port: int) -> Iterator[str]:
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, name="uvicorn-sign-in", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    folder: Path = tmp_path_factory.mktemp("sign-in")
    port = free_port()
    redirect_url = f"http://127.0.0.1:{port}/login/callback"
    with openid_provider(redirect_url) as provider:
        ledger = SqliteLedger(folder / "ledger.db", synchronous="NORMAL")
        ledger.setup()
        authority = ApprovalAuthority(ledger)
        graph = build_demo_graph(EffectLog(folder / "effects.db"), InMemorySaver())
        clock = Clock()
        store = InMemorySessionStore()
        sign_in = BrowserSignIn(
            SignInSettings(
                issuer=provider.issuer,
                client_id=provider.client_id,
                client_secret=provider.client_secret,
                redirect_url=redirect_url,
                scopes=("openid", "profile", "groups"),
                session_lifetime=LIFETIME,
            ),
            store=store,
            clock=clock,
        )
        app = create_app(
            graph,
            authority=authority,
            authenticate=sign_in.authenticator,
            settings=ServiceSettings(stream_poll=0.05, reauth_every=REAUTH_INTERVAL),
        )
        app.include_router(sign_in.router)
        with _serve(app, port) as url:
            yield Site(url, provider, sign_in, authority, clock, store)


@pytest.fixture
def browser(site: Site) -> Iterator[httpx.Client]:
    """One browser's requests to the app (its own cookie jar)."""
    with httpx.Client(base_url=site.url, timeout=30, follow_redirects=False) as client:
        yield client


def begin(browser: httpx.Client, path: str = "/login") -> str:
    """``GET /login``: the authorization URL the browser is sent to."""
    response = browser.get(path)
    assert response.status_code == 302, response.text
    return response.headers["location"]


def callback(site: Site, browser: httpx.Client, user: str) -> str:
    """The callback URL (with ``code`` and ``state``) after ``user`` signs in at the provider."""
    return sign_in_at_provider(begin(browser), user, redirect_url=site.provider.redirect_url)


def finish(browser: httpx.Client, url: str, **options: Any) -> httpx.Response:
    parts = urlsplit(url)
    return browser.get(urlunsplit(("", "", parts.path, parts.query, "")), **options)


def signed_in(site: Site, browser: httpx.Client, user: str) -> httpx.Response:
    response = finish(browser, callback(site, browser, user))
    assert response.status_code == 303, response.text
    return response


def set_cookies(response: httpx.Response) -> dict[str, Any]:
    """The response's ``Set-Cookie`` headers by cookie name (their morsels)."""
    found: dict[str, Any] = {}
    for header in response.headers.get_list("set-cookie"):
        cookie: SimpleCookie = SimpleCookie()
        cookie.load(header)
        found.update({name: morsel for name, morsel in cookie.items()})
    return found


def csrf_token(browser: httpx.Client) -> str:
    response = browser.get("/approvals/csrf")
    assert response.status_code == 200, response.text
    return str(response.json()["csrf_token"])


def error_code(response: httpx.Response) -> str:
    return str(response.json()["error"]["code"])


def test_the_authorization_request_carries_state_nonce_and_an_s256_challenge(
    site: Site, browser: httpx.Client
) -> None:
    location = begin(browser)
    assert location.startswith(f"{site.provider.issuer}/auth?")
    query = {name: values[0] for name, values in parse_qs(urlsplit(location).query).items()}
    assert query["response_type"] == "code"
    assert query["client_id"] == site.provider.client_id
    assert query["redirect_uri"] == site.provider.redirect_url
    assert query["scope"].split() == ["openid", "profile", "groups"]
    assert query["code_challenge_method"] == "S256"
    assert len(query["code_challenge"]) == 43  # base64url of a SHA-256
    assert len(query["state"]) >= 20 and len(query["nonce"]) >= 20
    # The verifier and nonce stay on the server, never in the browser.
    assert all(query["state"] not in value for value in browser.cookies.values())


def test_signing_in_maps_the_person_as_a_jwt_of_that_issuer_would(
    site: Site, browser: httpx.Client
) -> None:
    response = signed_in(site, browser, "alice")
    assert response.headers["location"] == "/"
    config = browser.get("/inbox/config")
    assert config.status_code == 200, config.text
    actor = config.json()["actor"]
    assert actor == {
        "id": "alice",
        "type": "human",
        "display_name": "Alice",
        "authenticated_by": f"oidc:{site.provider.issuer}",
    }
    assert config.json()["csrf"] is True  # a cookie session: decisions need the CSRF header
    session = site.store.get_session(session_key(browser.cookies[SESSION_COOKIE]), now=time.time())
    assert session is not None and session.groups == tuple(GROUPS["alice"])
    # A bearer JWT of the same issuer with the same claims is the same principal.
    secret = "a shared secret for the sign-in tests, long enough for HS256"
    settings = JwtSettings(issuer=site.provider.issuer, audience="aais", secret=secret)
    claims = {"iss": site.provider.issuer, "aud": "aais", "exp": int(time.time()) + 60}
    claims |= {"sub": "alice", "name": "Alice", "groups": GROUPS["alice"]}
    scope = {
        "type": "http",
        "headers": [(b"authorization", f"Bearer {jwt.encode(claims, secret)}".encode())],
    }
    by_token = asyncio.run(jwt_authenticator(settings)(Request(scope)))  # type: ignore[arg-type]
    assert by_token is not None
    assert by_token.actor.id == actor["id"] and by_token.groups == frozenset(GROUPS["alice"])


def test_the_next_path_is_kept_and_a_foreign_one_is_not(site: Site) -> None:
    for asked, landed in (("/?card=r1", "/?card=r1"), ("//evil.example/", "/")):
        with httpx.Client(base_url=site.url, timeout=30) as browser:
            url = sign_in_at_provider(
                begin(browser, f"/login?next={asked}"),
                "bob",
                redirect_url=site.provider.redirect_url,
            )
            response = finish(browser, url)
            assert response.status_code == 303
            assert response.headers["location"] == landed


def test_the_session_cookie_is_httponly_and_lax_and_not_secure_on_loopback(
    site: Site, browser: httpx.Client
) -> None:
    response = signed_in(site, browser, "bob")
    cookie = set_cookies(response)[SESSION_COOKIE]
    assert cookie["httponly"] is True
    assert cookie["samesite"].lower() == "lax"
    assert cookie["path"] == "/"
    assert not cookie["secure"]  # plain HTTP to a loopback name: the demo's laptop
    assert len(cookie.value) >= 43


def test_the_host_header_does_not_decide_whether_the_cookies_are_secure(
    site: Site, browser: httpx.Client
) -> None:
    # The configured URL is plain HTTP on loopback (a laptop): a Host header naming
    # another server changes nothing (behind a TLS proxy, the https URL makes them
    # Secure whatever Host says: test_sign_in_public_url.py).
    outside = {"host": "approvals.example.test"}
    started = browser.get("/login", headers=outside)
    assert started.status_code == 302
    assert not set_cookies(started)["aais_sign_in"]["secure"]
    url = sign_in_at_provider(
        started.headers["location"], "bob", redirect_url=site.provider.redirect_url
    )
    browser_value = set_cookies(started)["aais_sign_in"].value
    parts = urlsplit(url)
    response = httpx.get(
        f"{site.url}{parts.path}?{parts.query}",
        headers={**outside, "cookie": f"aais_sign_in={browser_value}"},
    )
    assert response.status_code == 303, response.text
    assert not set_cookies(response)[SESSION_COOKIE]["secure"]


def test_a_callback_with_an_unknown_state_is_refused(site: Site, browser: httpx.Client) -> None:
    url = callback(site, browser, "alice")
    parts = urlsplit(url)
    query = parse_qs(parts.query)
    query["state"] = ["not-the-state-we-sent"]
    forged = "&".join(f"{name}={values[0]}" for name, values in query.items())
    response = browser.get(f"{parts.path}?{forged}")
    assert response.status_code == 400
    assert error_code(response) == "aais.sign_in_state"
    assert "not-the-state" not in response.text  # the refusal names the field, not the value
    assert SESSION_COOKIE not in browser.cookies


def test_a_callback_is_taken_once(site: Site, browser: httpx.Client) -> None:
    url = callback(site, browser, "alice")
    assert finish(browser, url).status_code == 303
    browser.cookies.clear()
    replayed = finish(browser, url)
    assert replayed.status_code == 400 and error_code(replayed) == "aais.sign_in_state"


def test_a_callback_in_another_browser_is_refused(site: Site, browser: httpx.Client) -> None:
    url = callback(site, browser, "alice")
    with httpx.Client(base_url=site.url, timeout=30) as other:
        response = finish(other, url)
    assert response.status_code == 400 and error_code(response) == "aais.sign_in_state"
    assert SESSION_COOKIE not in other.cookies


def test_a_callback_after_the_sign_in_timeout_is_refused(site: Site, browser: httpx.Client) -> None:
    url = callback(site, browser, "alice")
    site.clock.offset = 601.0
    try:
        response = finish(browser, url)
    finally:
        site.clock.offset = 0.0
    assert response.status_code == 400 and error_code(response) == "aais.sign_in_state"


def _tamper(site: Site, url: str, **changes: str) -> None:
    key = session_key(parse_qs(urlsplit(url).query)["state"][0])
    pending = site.store._sign_ins[key]
    site.store._sign_ins[key] = dataclasses.replace(pending, **changes)


def test_the_provider_refuses_a_code_without_its_pkce_verifier(
    site: Site, browser: httpx.Client
) -> None:
    url = callback(site, browser, "alice")
    _tamper(site, url, code_verifier="another-verifier-" + "x" * 40)
    response = finish(browser, url)
    assert response.status_code == 400 and error_code(response) == "aais.sign_in_failed"
    assert SESSION_COOKIE not in browser.cookies


def test_an_id_token_for_another_nonce_is_refused(site: Site, browser: httpx.Client) -> None:
    url = callback(site, browser, "alice")
    _tamper(site, url, nonce="a-nonce-this-sign-in-never-sent")
    response = finish(browser, url)
    assert response.status_code == 400 and error_code(response) == "aais.sign_in_failed"


def test_a_refusal_by_the_provider_opens_no_session(site: Site, browser: httpx.Client) -> None:
    response = browser.get("/login/callback?error=access_denied&state=x")
    assert response.status_code == 400 and error_code(response) == "aais.sign_in_refused"


def test_a_wrong_password_is_refused_at_the_provider(site: Site, browser: httpx.Client) -> None:
    with pytest.raises(AssertionError, match="did not sign"):
        sign_in_at_provider(
            begin(browser), "alice", password="wrong", redirect_url=site.provider.redirect_url
        )


def test_decisions_on_a_session_need_the_csrf_header(site: Site, browser: httpx.Client) -> None:
    signed_in(site, browser, "alice")
    request_id = raise_request(site.authority, "csrf")
    route = f"/approvals/{request_id}/decisions"
    refused = browser.post(route, json={}, headers={"content-type": "application/json"})
    assert refused.status_code == 403 and error_code(refused) == "aais.csrf"
    token = csrf_token(browser)
    passed = browser.post(route, json={}, headers={"x-aais-csrf": token})
    assert passed.status_code != 403, passed.text


def test_sign_out_ends_the_session_server_side(site: Site, browser: httpx.Client) -> None:
    signed_in(site, browser, "carol")
    session_id = browser.cookies[SESSION_COOKIE]
    assert browser.get("/login/status").json()["signed_in"] is True
    without_csrf = browser.post("/logout", json={})
    assert without_csrf.status_code == 403
    out = browser.post("/logout", json={}, headers={"x-aais-csrf": csrf_token(browser)})
    assert out.status_code == 200 and out.json() == {"signed_out": True}
    assert SESSION_COOKIE not in browser.cookies
    # The old cookie, kept by someone, opens nothing any more.
    with httpx.Client(base_url=site.url, cookies={SESSION_COOKIE: session_id}) as kept:
        assert kept.get("/inbox/config").status_code == 401
        assert kept.get("/approvals/snapshot").status_code == 401
        assert kept.get("/approvals/events").status_code == 401
        assert kept.get("/login/status").json()["signed_in"] is False


def test_sign_out_from_another_origin_is_refused(site: Site, browser: httpx.Client) -> None:
    signed_in(site, browser, "carol")
    response = browser.post(
        "/logout",
        json={},
        headers={"origin": "https://evil.example", "x-aais-csrf": csrf_token(browser)},
    )
    assert response.status_code == 403
    assert browser.get("/inbox/config").status_code == 200


def test_a_session_expires_after_its_lifetime(site: Site, browser: httpx.Client) -> None:
    signed_in(site, browser, "bob")
    assert browser.get("/inbox/config").status_code == 200
    site.clock.offset = LIFETIME + 1
    try:
        assert browser.get("/inbox/config").status_code == 401
    finally:
        site.clock.offset = 0.0


def test_revoking_a_persons_sessions_ends_them(site: Site) -> None:
    with (
        httpx.Client(base_url=site.url, timeout=30) as first,
        httpx.Client(base_url=site.url, timeout=30) as second,
    ):
        signed_in(site, first, "carol")
        signed_in(site, second, "carol")
        assert asyncio.run(site.sign_in.end_sessions_of("carol")) >= 2
        assert first.get("/inbox/config").status_code == 401
        assert second.get("/inbox/config").status_code == 401


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


def test_an_open_stream_ends_when_its_session_is_signed_out(
    site: Site, browser: httpx.Client
) -> None:
    signed_in(site, browser, "alice")
    cookie = browser.cookies[SESSION_COOKIE]
    lines: list[str] = []
    opened, ended = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def read() -> None:
        try:
            timeout = httpx.Timeout(30, read=8.0)
            with (
                httpx.Client(base_url=site.url, timeout=timeout) as reader,
                reader.stream(
                    "GET", "/approvals/events", headers={"cookie": f"{SESSION_COOKIE}={cookie}"}
                ) as response,
            ):
                assert response.status_code == 200
                for line in response.iter_lines():
                    lines.append(line)
                    if line.startswith("data:"):
                        opened.set()
            ended.set()
        except BaseException as error:
            errors.append(error)
            opened.set()

    threading.Thread(target=read, daemon=True).start()
    raise_request(site.authority, f"before-{uuid.uuid4().hex}")
    assert opened.wait(10) and not errors, errors
    out = browser.post("/logout", json={}, headers={"x-aais-csrf": csrf_token(browser)})
    assert out.status_code == 200
    time.sleep(REAUTH_INTERVAL + 0.5)
    marker = f"after-{uuid.uuid4().hex}"
    raise_request(site.authority, marker)
    assert ended.wait(10) and not errors, f"the stream did not end: {errors}"
    assert marker not in "\n".join(lines)
    last = list(sse_messages(iter(lines)))[-1]
    assert last["event"] == "aais.unauthenticated"


def test_a_sqlite_store_keeps_sessions_over_a_restart(site: Site, tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    settings = site.sign_in.settings
    # A session signed in through the served app, as a first process stored it in the file.
    with httpx.Client(base_url=site.url, timeout=30) as browser:
        signed_in(site, browser, "bob")
        session_id = browser.cookies[SESSION_COOKIE]
    record = site.store.get_session(session_key(session_id), now=time.time())
    assert record is not None
    first = SqliteSessionStore(path)
    first.put_session(session_key(session_id), record)
    first.close()
    restarted = BrowserSignIn(settings, store=SqliteSessionStore(path))
    scope = {"type": "http", "headers": [(b"cookie", f"{SESSION_COOKIE}={session_id}".encode())]}
    found = asyncio.run(restarted.authenticator(Request(scope)))  # type: ignore[arg-type]
    assert found is not None and found.actor.id == "bob" and found.cookie_session
    assert found.groups == frozenset(GROUPS["bob"])
    assert restarted.store.end_session(session_key(session_id))
    assert asyncio.run(restarted.authenticator(Request(scope))) is None  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"issuer": "ftp://idp.example"}, "issuer"),
        ({"scopes": ("profile",)}, "scopes"),
        ({"redirect_url": "https://approvals.example/login"}, "redirect_url"),
        ({"client_secret": ""}, "client_secret"),
        ({"home": "//evil.example"}, "home"),
    ],
)
def test_settings_name_the_field_they_refuse(changes: dict[str, Any], field: str) -> None:
    base = {
        "issuer": "https://idp.example",
        "client_id": "aais",
        "client_secret": "s",
        "redirect_url": "https://approvals.example/login/callback",
    }
    with pytest.raises(ValueError, match=field):
        SignInSettings(**{**base, **changes})

"""aais_agui.http.security: authenticators and request checks, on hand-built requests."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi import HTTPException, Request

from aais_agui.http.security import (
    Authenticated,
    Security,
    bearer_token_authenticator,
    first_authenticator,
    local_development_authenticator,
)
from aais_langgraph.protocol import Actor


def request(
    *,
    client: str = "127.0.0.1",
    host: str = "127.0.0.1:8000",
    headers: dict[str, str] | None = None,
    method: str = "POST",
) -> Request:
    raw = [(b"host", host.encode())] + [
        (name.lower().encode(), value.encode()) for name, value in (headers or {}).items()
    ]
    scope: dict[str, Any] = {
        "type": "http",
        "method": method,
        "scheme": "http",
        "path": "/approvals/x/decisions",
        "query_string": b"",
        "headers": raw,
        "client": (client, 50000),
        "server": ("127.0.0.1", 8000),
    }
    return Request(scope)


def status_of(error: pytest.ExceptionInfo[HTTPException]) -> tuple[int, str]:
    return error.value.status_code, error.value.detail["code"]


def test_local_development_authenticator_warns_loudly(capsys: pytest.CaptureFixture[str]) -> None:
    local_development_authenticator()
    assert "LOCAL DEVELOPMENT AUTHENTICATOR" in capsys.readouterr().err


@pytest.mark.parametrize("host", ["127.0.0.1:8000", "localhost:8000", "[::1]:8000", "localhost"])
def test_local_development_accepts_loopback_clients(host: str) -> None:
    actor = local_development_authenticator()(request(host=host))
    assert isinstance(actor, Actor) and actor.id == "local-developer"


def test_local_development_refuses_other_machines() -> None:
    assert local_development_authenticator()(request(client="192.168.1.20")) is None


def test_local_development_refuses_a_rebound_host_name() -> None:
    # DNS rebinding: the browser talks to 127.0.0.1 but names the attacker's host.
    assert local_development_authenticator()(request(host="evil.example:8000")) is None


def test_bearer_tokens_map_to_their_actor() -> None:
    authenticate = bearer_token_authenticator({"t-1": {"id": "alice", "type": "human"}})
    found = authenticate(request(headers={"Authorization": "Bearer t-1"}))
    assert isinstance(found, Actor) and found.id == "alice"
    assert authenticate(request(headers={"Authorization": "Bearer t-2"})) is None
    assert authenticate(request()) is None


async def test_async_authenticators_are_awaited() -> None:
    async def authenticate(_: Request) -> dict[str, str]:
        return {"id": "carol", "type": "human"}

    found = await Security(authenticate=authenticate).actor(request())
    assert found == Authenticated(Actor(id="carol", type="human"))


async def test_first_authenticator_takes_a_token_after_an_asynchronous_session() -> None:
    async def session(_: Request) -> None:
        return None

    tokens = bearer_token_authenticator({"t-1": {"id": "alice", "type": "human"}})
    security = Security(authenticate=first_authenticator(session, tokens))
    found = await security.actor(request(headers={"Authorization": "Bearer t-1"}))
    assert found == Authenticated(Actor(id="alice", type="human"))


async def test_first_authenticator_stops_at_the_first_actor() -> None:
    asked: list[str] = []

    async def session(_: Request) -> dict[str, str]:
        asked.append("session")
        return {"id": "carol", "type": "human"}

    def tokens(_: Request) -> None:
        asked.append("tokens")

    found = await Security(authenticate=first_authenticator(session, tokens)).actor(request())
    assert found.actor.id == "carol" and asked == ["session"]


async def test_first_authenticator_with_no_actor_is_401() -> None:
    none = first_authenticator(
        lambda _: None, bearer_token_authenticator({"t-1": {"id": "a", "type": "human"}})
    )
    with pytest.raises(HTTPException) as caught:
        await Security(authenticate=none).actor(request())
    assert status_of(caught) == (401, "aais.unauthenticated")


def test_first_authenticator_needs_authenticators() -> None:
    with pytest.raises(ValueError, match="authenticators"):
        first_authenticator()
    with pytest.raises(TypeError, match=r"authenticators\[1\]"):
        first_authenticator(lambda _: None, "not callable")  # type: ignore[arg-type]


async def test_an_authenticator_returning_junk_is_a_server_error() -> None:
    with pytest.raises(HTTPException) as caught:
        await Security(authenticate=lambda _: {"name": "x"}).actor(request())
    assert status_of(caught) == (500, "aais.bad_authenticator")


async def test_no_actor_is_401() -> None:
    with pytest.raises(HTTPException) as caught:
        await Security(authenticate=lambda _: None).actor(request())
    assert status_of(caught) == (401, "aais.unauthenticated")


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Origin": "http://127.0.0.1:8000"}, None),
        ({"Origin": "https://app.example"}, None),
        ({"Sec-Fetch-Site": "same-origin"}, None),
        ({}, None),
        ({"Origin": "http://127.0.0.1:9999"}, 403),
        ({"Origin": "null"}, 403),
        ({"Sec-Fetch-Site": "same-site"}, 403),
    ],
)
def test_origin_rules(headers: dict[str, str], expected: int | None) -> None:
    security = Security(
        authenticate=lambda _: None, allowed_origins=frozenset({"https://app.example"})
    )
    if expected is None:
        security.check_origin(request(headers=headers))
        return
    with pytest.raises(HTTPException) as caught:
        security.check_origin(request(headers=headers))
    assert caught.value.status_code == expected


async def test_state_changes_need_json() -> None:
    security = Security(authenticate=lambda _: {"id": "a", "type": "human"})
    with pytest.raises(HTTPException) as caught:
        await security.state_change(request(headers={"Content-Type": "text/plain"}))
    assert status_of(caught) == (415, "aais.unsupported_media_type")
    found = await security.state_change(
        request(headers={"Content-Type": "application/json; charset=utf-8"})
    )
    assert found.actor.id == "a"


async def test_cookie_sessions_need_a_matching_csrf_header() -> None:
    security = Security(
        authenticate=lambda _: Authenticated(Actor(id="a", type="human"), cookie_session=True)
    )
    json_type = {"Content-Type": "application/json"}
    with pytest.raises(HTTPException) as caught:
        await security.state_change(request(headers={**json_type, "Cookie": "aais_csrf=abc"}))
    assert status_of(caught) == (403, "aais.csrf")
    ok = request(headers={**json_type, "Cookie": "aais_csrf=abc", "X-AAIS-CSRF": "abc"})
    assert (await security.state_change(ok)).actor.id == "a"

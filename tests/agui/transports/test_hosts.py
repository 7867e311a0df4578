"""Host and Origin parsing: a table of hostile values, and hypothesis for the loopback check."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi import HTTPException
from hypothesis import given
from hypothesis import strategies as st

from aais_agui.http.hosts import Authority, is_loopback_name, parse_host, parse_origin
from aais_agui.http.security import Security, local_development_authenticator

from .test_security import request

HOSTILE_HOSTS = [
    "[::1].evil.com:8000",
    "[::1].evil.com",
    "127.0.0.1:8000@evil.com",
    "127.0.0.1@evil.com",
    "localhost@evil.com:8000",
    "evil.com#@127.0.0.1",
    "evil.com\\@127.0.0.1",
    "127.0.0.1:8000/evil.com",
    "127.0.0.1:8000?evil.com",
    "127.0.0.1 evil.com",
    "127.0.0.1:8000 ",
    "127.0.0.1:²",
    "127.0.0.1:\uff18\uff10",
    "127.0.0.1:99999",
    "127.0.0.1:",
    "127.0.0.1:0",
    "127.0.0.1:80:80",
    "[::1",
    "::1",
    "[::1]evil",
    "[::1]:80x",
    "[127.0.0.1]",
    "[fe80::1%25lo]:80",
    "localhost%2eevil.com",
    "localhost.",
    "\uff4cocalhost",
    "local\u200bhost",
    "127.1",
    "0x7f.0.0.1",
    "0177.0.0.1",
    "2130706433",
    "127.0.0.1.evil.com.1",
    "-evil.com",
    "evil-.com",
    "a..b",
    "",
    "x" * 400,
    "localhost\r\nX: y",
]

LOOPBACK_HOSTS = [
    ("127.0.0.1:8000", Authority("127.0.0.1", 8000)),
    ("localhost", Authority("localhost", None)),
    ("LOCALHOST:1", Authority("localhost", 1)),
    ("[::1]:8000", Authority("::1", 8000)),
    ("[::1]", Authority("::1", None)),
    ("127.0.0.2", Authority("127.0.0.2", None)),
]


@pytest.mark.parametrize("value", HOSTILE_HOSTS)
def test_hostile_hosts_do_not_parse(value: str) -> None:
    assert parse_host(value) is None
    assert not is_loopback_name(parse_host(value))


@pytest.mark.parametrize(("value", "expected"), LOOPBACK_HOSTS)
def test_loopback_hosts_parse(value: str, expected: Authority) -> None:
    assert parse_host(value) == expected
    assert is_loopback_name(parse_host(value))


@pytest.mark.parametrize(
    "value", ["example.com:443", "my_service:8080", "10.0.0.1", "[2001:db8::1]"]
)
def test_ordinary_hosts_parse_but_are_not_loopback(value: str) -> None:
    assert parse_host(value) is not None
    assert not is_loopback_name(parse_host(value))


@given(st.text(max_size=40))
def test_a_parsed_host_is_exactly_what_was_sent(value: str) -> None:
    parsed = parse_host(value)
    if parsed is not None:
        shown = f"[{parsed.host}]" if ":" in parsed.host else parsed.host
        port = "" if parsed.port is None else f":{parsed.port}"
        assert value.lower() == shown + port


@given(st.text(alphabet=st.characters(codec="ascii"), min_size=1, max_size=30))
def test_text_after_a_loopback_name_is_never_loopback(junk: str) -> None:
    if junk[0] == ":" or junk[0].isdigit():
        return  # a port, or another loopback address such as 127.0.0.10
    for value in (f"127.0.0.1{junk}", f"[::1]{junk}", f"localhost{junk}"):
        assert not is_loopback_name(parse_host(value))


@pytest.mark.parametrize("host", HOSTILE_HOSTS)
def test_the_local_development_login_refuses_hostile_hosts(host: str) -> None:
    assert local_development_authenticator()(request(host=host)) is None


@pytest.mark.parametrize("host", ["[::1].evil.com:8000", "127.0.0.1:8000@evil.com", "127.0.0.1:²"])
async def test_a_malformed_host_is_400_before_authentication(host: str) -> None:
    security = Security(authenticate=lambda _: {"id": "a", "type": "human"})
    with pytest.raises(HTTPException) as caught:
        await security.actor(request(host=host))
    assert (caught.value.status_code, caught.value.detail["code"]) == (400, "aais.bad_host")


HOSTILE_ORIGINS = [
    "null",
    "http://127.0.0.1:8000@evil.com",
    "http://evil.com@127.0.0.1:8000",
    "http://[::1].evil.com:8000",
    "http://127.0.0.1:8000/",
    "http://127.0.0.1:8000/path",
    "http://127.0.0.1:8000?x",
    "http://127.0.0.1:8000#x",
    "ftp://127.0.0.1:8000",
    "javascript://127.0.0.1:8000",
    "http//127.0.0.1:8000",
    "https://127.0.0.1:8000",
    "http://127.0.0.1:8001",
    "http://127.0.0.1",
    "http://localhost:8000",
    "http://127.0.0.1:²",
    " http://127.0.0.1:8000",
    "http://127.0.0.1:8000 ",
    "http://127.0.0.1:8000, http://127.0.0.1:8000",
    "",
]


@pytest.mark.parametrize("origin", HOSTILE_ORIGINS)
def test_hostile_origins_are_foreign(origin: str) -> None:
    security = Security(authenticate=lambda _: None)
    with pytest.raises(HTTPException) as caught:
        security.check_origin(request(host="127.0.0.1:8000", headers={"Origin": origin}))
    assert caught.value.detail["code"] == "aais.foreign_origin"


@pytest.mark.parametrize(
    ("host", "origin"),
    [
        ("127.0.0.1:8000", "http://127.0.0.1:8000"),
        ("127.0.0.1:8000", "HTTP://127.0.0.1:8000"),
        ("localhost", "http://localhost:80"),
        ("localhost:80", "http://localhost"),
        ("[::1]:8000", "http://[::1]:8000"),
    ],
)
def test_the_own_origin_matches_in_any_equivalent_spelling(host: str, origin: str) -> None:
    Security(authenticate=lambda _: None).check_origin(
        request(host=host, headers={"Origin": origin})
    )


def test_an_origin_is_foreign_when_the_host_is_malformed() -> None:
    headers: dict[str, Any] = {"Origin": "http://127.0.0.1:8000@evil.com"}
    with pytest.raises(HTTPException):
        Security(authenticate=lambda _: None).check_origin(
            request(host="127.0.0.1:8000@evil.com", headers=headers)
        )


def test_allowed_origins_must_be_origins() -> None:
    with pytest.raises(ValueError, match="allowed_origins"):
        Security(authenticate=lambda _: None, allowed_origins=frozenset({"app.example"}))


@pytest.mark.parametrize(
    ("origin", "expected"),
    [
        ("https://app.example", ("https", Authority("app.example", 443))),
        ("http://[::1]", ("http", Authority("::1", 80))),
        ("https://app.example/", None),
    ],
)
def test_origins_parse_with_default_ports(origin: str, expected: Any) -> None:
    assert parse_origin(origin) == expected


@pytest.mark.parametrize(
    "header",
    [
        {"X-Forwarded-For": "203.0.113.9"},
        {"Forwarded": "for=203.0.113.9"},
        {"X-Real-IP": "203.0.113.9"},
    ],
)
def test_the_local_development_login_refuses_proxied_requests(header: dict[str, str]) -> None:
    # A reverse proxy on this machine connects from loopback with Host 127.0.0.1:PORT.
    assert local_development_authenticator()(request(headers=header)) is None

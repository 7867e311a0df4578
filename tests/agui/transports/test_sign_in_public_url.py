"""Behind a TLS proxy: the cookies are Secure because the configured public URL is https.

The proxy ends TLS and forwards plain HTTP with ``Host: 127.0.0.1`` and no
``X-Forwarded-Proto`` (nginx's default), so nothing in the request says HTTPS; the
sign-in's redirect URL (the public URL people reach) does. A real OpenID provider
(node-oidc-provider) signs people in.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from langgraph.checkpoint.memory import InMemorySaver

from aais_agui import create_app
from aais_agui.http.sign_in import SESSION_COOKIE, BrowserSignIn, SignInSettings
from aais_langgraph import ApprovalAuthority
from aais_langgraph.ledger import SqliteLedger
from hostile.report import record
from support.oidc_provider import OpenIdProvider, free_port, openid_provider, sign_in_at_provider

from ..demo_graph import EffectLog, build_demo_graph
from .test_sign_in import _serve, set_cookies

pytestmark = pytest.mark.slow  # an OpenID provider process

PUBLIC_URL = "https://approvals.example.test"
CATEGORY = "browser session cookies"


@dataclass
class Site:
    url: str
    provider: OpenIdProvider


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    folder: Path = tmp_path_factory.mktemp("sign-in-proxied")
    redirect_url = f"{PUBLIC_URL}/login/callback"
    with openid_provider(redirect_url) as provider:
        ledger = SqliteLedger(folder / "ledger.db", synchronous="NORMAL")
        ledger.setup()
        graph = build_demo_graph(EffectLog(folder / "effects.db"), InMemorySaver())
        sign_in = BrowserSignIn(
            SignInSettings(
                issuer=provider.issuer,
                client_id=provider.client_id,
                client_secret=provider.client_secret,
                redirect_url=redirect_url,
                scopes=("openid", "profile", "groups"),
            )
        )
        app = create_app(
            graph, authority=ApprovalAuthority(ledger), authenticate=sign_in.authenticator
        )
        app.include_router(sign_in.router)
        with _serve(app, free_port()) as url:
            yield Site(url, provider)


PROXIED = {"host": "127.0.0.1"}
"""What the proxy forwards: its upstream's loopback name, no X-Forwarded-Proto."""


def test_the_sign_in_cookie_is_secure_when_the_public_url_is_https(site: Site) -> None:
    started = httpx.get(f"{site.url}/login", headers=PROXIED)
    assert started.status_code == 302, started.text
    secure = bool(set_cookies(started)["aais_sign_in"]["secure"])
    record(CATEGORY, 1, failed_open=int(not secure))
    assert secure


def test_the_session_cookie_is_secure_when_the_public_url_is_https(site: Site) -> None:
    started = httpx.get(f"{site.url}/login", headers=PROXIED)
    url = sign_in_at_provider(
        started.headers["location"], "bob", redirect_url=site.provider.redirect_url
    )
    parts = urlsplit(url)
    browser_value = set_cookies(started)["aais_sign_in"].value
    response = httpx.get(
        f"{site.url}{parts.path}?{parts.query}",
        headers={**PROXIED, "cookie": f"aais_sign_in={browser_value}"},
    )
    assert response.status_code == 303, response.text
    cookies = set_cookies(response)
    secure = bool(cookies[SESSION_COOKIE]["secure"])
    record(CATEGORY, 1, failed_open=int(not secure))
    assert secure and cookies[SESSION_COOKIE]["httponly"]


def test_the_csrf_cookie_is_secure_when_the_public_url_is_https(site: Site) -> None:
    started = httpx.get(f"{site.url}/login", headers=PROXIED)
    url = sign_in_at_provider(
        started.headers["location"], "bob", redirect_url=site.provider.redirect_url
    )
    parts = urlsplit(url)
    browser_value = set_cookies(started)["aais_sign_in"].value
    signed_in = httpx.get(
        f"{site.url}{parts.path}?{parts.query}",
        headers={**PROXIED, "cookie": f"aais_sign_in={browser_value}"},
    )
    session = set_cookies(signed_in)[SESSION_COOKIE].value
    response = httpx.get(
        f"{site.url}/approvals/csrf",
        headers={**PROXIED, "cookie": f"{SESSION_COOKIE}={session}"},
    )
    assert response.status_code == 200, response.text
    secure = bool(set_cookies(response)["aais_csrf"]["secure"])
    record(CATEGORY, 1, failed_open=int(not secure))
    assert secure

"""What another site open in the victim's browser could send: fetch metadata, forms, CSRF.

Carol signs in with a cookie session (so CSRF tokens are required); each request
carries her cookie as a browser would attach it. Both state-changing routes
(the AAIS decisions endpoint and the AG-UI endpoint) must refuse every one.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aais_agui import run_agent_input

from .conftest import CAROL_SESSION, Paused, Probe, Site

CATEGORY = "browser (fetch metadata, CSRF)"
JSON = "application/json"

FETCH_METADATA: list[dict[str, str]] = [
    {"Sec-Fetch-Site": "cross-site"},
    {"Sec-Fetch-Site": "same-site"},
    {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"},
    {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"},
    {"Sec-Fetch-Site": "CROSS-SITE"},
    {"Sec-Fetch-Site": "same-origin, cross-site"},
    {"Sec-Fetch-Site": ""},
    {"Sec-Fetch-Site": "unknown"},
    {"Origin": "null"},
    {"Origin": "null", "Sec-Fetch-Site": "cross-site"},
    {"Origin": "https://evil.example", "Sec-Fetch-Site": "same-origin"},
]

FORM_TYPES = [
    "text/plain",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
    "application/json-patch+json",
    "application/jsonx",
    "text/json",
    "application/json, text/plain",
    "",
]


def _targets(paused: Paused) -> list[tuple[str, bytes]]:
    """(path, JSON body) of both state-changing routes, answering ``paused`` as alice would."""
    decided = paused.decided()
    entry = {"interruptId": paused.interrupts[0]["id"], "status": "resolved"}
    agui = run_agent_input(paused.thread_id, resume=[{**entry, "payload": {"aais": decided}}])
    return [
        (f"/approvals/{paused.request_ids[0]}/decisions", json.dumps(decided).encode()),
        ("/agent", json.dumps(agui).encode()),
    ]


def _cookie_client(site: Site, csrf: str | None = None) -> httpx.Client:
    cookies = {"session": CAROL_SESSION}
    if csrf is not None:
        cookies["aais_csrf"] = csrf
    return httpx.Client(base_url=site.url, cookies=cookies, timeout=30)


def _send(client: httpx.Client, path: str, body: bytes, headers: dict[str, Any]) -> httpx.Response:
    return client.post(path, content=body, headers=headers)


def test_cross_site_fetches_are_refused(site: Site) -> None:
    paused = site.pause()
    probe = Probe(site, CATEGORY, [paused])
    with site.client() as alice, _cookie_client(site, "t0k") as carol:
        for headers in FETCH_METADATA:
            for path, body in _targets(paused):
                for client, extra in ((alice, {}), (carol, {"X-AAIS-CSRF": "t0k"})):
                    sent = {"Content-Type": JSON, **extra, **headers}
                    response = _send(client, path, body, sent)
                    assert response.status_code == 403, (headers, path, response.status_code)
                    probe.response(response, f"{headers} on {path}")
    probe.finish()
    probe.still_answerable()


def test_form_posts_are_refused(site: Site) -> None:
    paused = site.pause()
    probe = Probe(site, CATEGORY, [paused])
    with site.client() as alice, _cookie_client(site, "t0k") as carol:
        for media_type in FORM_TYPES:
            for path, body in _targets(paused):
                for client in (alice, carol):
                    headers = {"Content-Type": media_type, "X-AAIS-CSRF": "t0k"}
                    response = _send(client, path, body, headers)
                    assert response.status_code == 415, (media_type, path, response.status_code)
                    probe.response(response, f"Content-Type {media_type!r} on {path}")
    probe.finish()
    probe.still_answerable()


def test_cookie_sessions_without_the_csrf_token_are_refused(site: Site) -> None:
    paused = site.pause()
    probe = Probe(site, CATEGORY, [paused])
    cases: list[tuple[str | None, dict[str, str]]] = [
        (None, {}),
        ("t0k", {}),
        (None, {"X-AAIS-CSRF": "t0k"}),
        ("t0k", {"X-AAIS-CSRF": "t0K"}),
        ("t0k", {"X-AAIS-CSRF": "t0k "}),
        ("t0k", {"X-AAIS-CSRF": "t0"}),
        ("t0k", {"X-AAIS-CSRF": "t0kt0k"}),
        ("", {"X-AAIS-CSRF": ""}),
        ("t0k", {"X-AAIS-CSRF": "\xe9t0k"}),
    ]
    for cookie, headers in cases:
        with _cookie_client(site, cookie) as carol:
            for path, body in _targets(paused):
                sent = {"Content-Type": JSON, "Origin": site.url, **headers}
                try:
                    response = _send(carol, path, body, sent)
                except (httpx.LocalProtocolError, UnicodeEncodeError):
                    continue  # not sendable by an HTTP client
                assert response.status_code == 403, (cookie, headers, response.status_code)
                assert response.json()["error"]["code"] == "aais.csrf"
                probe.response(response, f"csrf cookie {cookie!r} header {headers} on {path}")
    probe.finish()
    probe.still_answerable()


def test_random_csrf_tokens_never_pass(site: Site) -> None:
    paused = site.pause()
    probe = Probe(site, CATEGORY, [paused])
    carol = _cookie_client(site, "the-real-token")
    targets = _targets(paused)

    @settings(
        max_examples=40,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(
        token=st.text(
            alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=40
        ).filter(lambda token: token != "the-real-token"),
        target=st.sampled_from([0, 1]),
    )
    def send(token: str, target: int) -> None:
        path, body = targets[target]
        response = _send(carol, path, body, {"Content-Type": JSON, "X-AAIS-CSRF": token})
        assert response.status_code == 403
        probe.response(response, f"csrf token {token!r}")

    try:
        send()
    finally:
        carol.close()
    probe.finish()
    probe.still_answerable()

"""Hostile ``Host`` headers over real HTTP: refused on every authenticated route (400), and
never loopback to the local-development login (rebound, malformed or proxied)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from langgraph.checkpoint.memory import InMemorySaver

from aais_agui import create_app, local_development_authenticator
from aais_langgraph import ApprovalAuthority
from aais_langgraph.ledger import SqliteLedger
from agui.demo_graph import EffectLog, build_demo_graph
from agui.http_support import serve

from .conftest import Paused, Probe, Site

CATEGORY = "HTTP profile"


def _post(client: httpx.Client, paused: Paused, body: Any, **options: Any) -> httpx.Response:
    return client.post(f"/approvals/{paused.request_ids[0]}/decisions", **body, **options)


def hostile_hosts(port: str) -> list[str]:
    return [
        f"[::1].evil.com:{port}",
        f"127.0.0.1:{port}@evil.com",
        f"localhost@evil.com:{port}",
        f"127.0.0.1:{port}:{port}",
        f"127.0.0.1:{port}/x",
        f"[::ffff:7f00:1].evil.com:{port}",
        "127.0.0.1:99999",
        "127.0.0.1:0",
        "127.0.0.1:\xb2",
        "[::1",
        "::1",
        "localhost%00",
        "x" * 500,
    ]


ROUTES = [
    ("GET", "/approvals/snapshot"),
    ("GET", "/approvals/csrf"),
    ("GET", "/inbox/config"),
    ("GET", "/agent/capabilities"),
    ("GET", "/inbox/explanations/apr_x"),
    ("GET", "/inbox/threads/t"),
]


def test_bad_hosts_are_refused(site: Site) -> None:
    paused = site.pause()
    probe = Probe(site, CATEGORY, [paused])
    port = site.url.rsplit(":", 1)[1]
    with site.client() as client:
        for host in hostile_hosts(port):
            headers = {b"Host": host.encode("latin-1")}
            response = _post(client, paused, {"json": paused.decided(), "headers": headers})
            assert response.status_code == 400, (host, response.status_code)
            assert response.json()["error"]["code"] == "aais.bad_host"
            probe.response(response, f"host {host!r} on decisions")
            for method, path in ROUTES:
                got = client.request(method, path, headers=headers)
                assert got.status_code == 400, (host, path, got.status_code)
                probe.response(got, f"host {host!r} on {path}")
    probe.finish()
    probe.still_answerable()


def test_the_local_development_login_refuses_rebound_and_malformed_hosts(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The demo's login over real HTTP: only a loopback client naming a loopback host."""
    folder = tmp_path_factory.mktemp("local-login")
    ledger = SqliteLedger(folder / "ledger.db", synchronous="NORMAL")
    ledger.setup()
    authority = ApprovalAuthority(ledger)
    effects = EffectLog(folder / "effects.db")
    graph = build_demo_graph(effects, InMemorySaver())
    app = create_app(graph, authority=authority, authenticate=local_development_authenticator())
    with serve(app) as url:
        local = Site(url, authority, effects, graph)
        paused = local.pause()
        probe = Probe(local, CATEGORY, [paused])
        port = url.rsplit(":", 1)[1]
        rebound = [f"evil.example:{port}", f"127.0.0.1.evil.example:{port}", "localhost.evil"]
        with local.client(token=None) as client:
            for host in [*hostile_hosts(port), *rebound]:
                headers = {b"Host": host.encode("latin-1")}
                response = _post(client, paused, {"json": paused.decided(), "headers": headers})
                assert response.status_code in (400, 401), (host, response.status_code)
                probe.response(response, f"local login, host {host!r}")
            for proxied in ({"X-Forwarded-For": "203.0.113.9"}, {"Forwarded": "for=x"}):
                response = _post(client, paused, {"json": paused.decided(), "headers": proxied})
                assert response.status_code == 401
                probe.response(response, f"local login, proxied {proxied}")
        probe.finish()
        probe.still_answerable()

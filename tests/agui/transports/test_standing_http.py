"""What stands, over real HTTP: grants with a revoke (SPEC §9), recent resolutions, audit status.

The revoke is a state change: same authentication, Origin / fetch-metadata and CSRF rules as
the decisions endpoint; it is audited under the authenticated actor and the next matching
action asks again.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import Request
from langgraph.checkpoint.memory import InMemorySaver

from aais_agui import Authenticated, bearer_token_authenticator, create_app
from aais_langgraph import ApprovalAuthority, build_decision
from aais_langgraph.ledger import SqliteLedger
from aais_langgraph.protocol import Actor

from ..conftest import ALICE
from ..demo_graph import EffectLog, build_demo_graph
from ..http_support import serve

BOB = {"id": "bob", "type": "human"}
MALLORY = {"id": "mallory", "type": "human"}
SESSION_CHOICES = [
    {"decision": "approve", "scope": "once", "label": "Allow once"},
    {
        "decision": "approve",
        "scope": "session",
        "label": "Allow git status for this session",
        "scope_constraints": {"command_prefix": ["git", "status"]},
    },
    {"decision": "deny", "scope": "once", "label": "Deny"},
]


@dataclass
class Site:
    url: str
    authority: ApprovalAuthority


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    folder: Path = tmp_path_factory.mktemp("standing")
    ledger = SqliteLedger(folder / "ledger.db", synchronous="NORMAL")
    ledger.setup()
    authority = ApprovalAuthority(ledger)
    graph = build_demo_graph(EffectLog(folder / "effects.db"), InMemorySaver())
    bearer = bearer_token_authenticator({"alice-token": ALICE})

    def authenticate(request: Request) -> Actor | Authenticated | None:
        actor = bearer(request)
        if actor is not None:
            return actor  # type: ignore[return-value]
        if request.cookies.get("session") == "bob-session":
            return Authenticated(Actor.from_data(BOB), cookie_session=True)
        return None

    app = create_app(graph, authority=authority, authenticate=authenticate)
    with serve(app) as url:
        yield Site(url, authority)


@pytest.fixture
def client(site: Site) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=site.url, headers={"Authorization": "Bearer alice-token"}, timeout=30
    ) as client:
        yield client


def action(command: str) -> dict[str, Any]:
    return {
        "kind": "process.exec",
        "name": "shell.exec",
        "summary": "Run a command",
        "arguments": {"command": command},
    }


def origin(session: str) -> dict[str, Any]:
    return {"harness": "tests", "session_id": session}


def session_grant(authority: ApprovalAuthority, session: str) -> str:
    """Approve a request for the session (as Mallory in the body); the new grant's id."""
    requested = authority.request(
        action("git status -s"),
        origin=origin(session),
        choices=SESSION_CHOICES,
        expires_in=timedelta(minutes=5),
    )
    decided = build_decision(requested, decision="approve", scope="session", actor=MALLORY)
    assert authority.decide(decided, actor=BOB).resolution.outcome == "approved"
    [grant] = authority.list_grants(session_id=session)
    return grant.grant_id


def live_grant_ids(client: httpx.Client) -> set[str]:
    response = client.get("/inbox/grants")
    assert response.status_code == 200
    return {grant["grant_id"] for grant in response.json()["grants"]}


def test_grants_list_live_grants_with_their_constraints_explained(
    client: httpx.Client, site: Site
) -> None:
    grant_id = session_grant(site.authority, "s-list")
    [shown] = [g for g in client.get("/inbox/grants").json()["grants"] if g["grant_id"] == grant_id]
    assert shown["scope"] == "session" and shown["session_id"] == "s-list"
    assert shown["constraints"] == {"command_prefix": ["git", "status"]}
    assert any("git status" in line for line in shown["explanation"]), shown["explanation"]


def test_the_standing_routes_need_authentication(site: Site) -> None:
    grant_id = session_grant(site.authority, "s-anon")
    with httpx.Client(base_url=site.url) as anonymous:
        assert anonymous.get("/inbox/grants").status_code == 401
        assert anonymous.get("/inbox/resolutions").status_code == 401
        assert anonymous.post(f"/inbox/grants/{grant_id}/revoke", json={}).status_code == 401
    assert site.authority.match_grant(action("git status"), origin("s-anon")) is not None


def test_a_revoke_is_audited_under_the_authenticated_actor_and_the_next_action_asks(
    client: httpx.Client, site: Site
) -> None:
    grant_id = session_grant(site.authority, "s-revoke")
    assert site.authority.match_grant(action("git status"), origin("s-revoke")) is not None
    response = client.post(f"/inbox/grants/{grant_id}/revoke", json={})
    assert response.status_code == 200 and response.json() == {
        "grant_id": grant_id,
        "revoked": True,
    }
    assert grant_id not in live_grant_ids(client)
    assert site.authority.match_grant(action("git status"), origin("s-revoke")) is None
    screening = site.authority.screen(action("git status"), origin=origin("s-revoke"))
    assert screening.resolved is None  # a human is asked again
    [entry] = [
        e
        for e in site.authority.ledger.audit_entries()
        if e.kind == "revoked" and e.payload["grant_id"] == grant_id
    ]
    assert entry.payload["actor"]["id"] == ALICE["id"]
    again = client.post(f"/inbox/grants/{grant_id}/revoke", json={})
    assert again.status_code == 404 and again.json()["error"]["code"] == "inbox.unknown_grant"
    assert site.authority.verify_audit().ok


@pytest.mark.parametrize(
    "headers",
    [{"Origin": "https://evil.example"}, {"Origin": "null"}, {"Sec-Fetch-Site": "cross-site"}],
)
def test_a_foreign_origin_cannot_revoke(
    client: httpx.Client, site: Site, headers: dict[str, str]
) -> None:
    grant_id = session_grant(site.authority, f"s-foreign-{len(str(headers))}")
    response = client.post(f"/inbox/grants/{grant_id}/revoke", json={}, headers=headers)
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "aais.foreign_origin"
    assert grant_id in live_grant_ids(client)


def test_a_cookie_session_needs_the_csrf_token_to_revoke(client: httpx.Client, site: Site) -> None:
    grant_id = session_grant(site.authority, "s-csrf")
    with httpx.Client(base_url=site.url, cookies={"session": "bob-session"}) as browser:
        assert browser.post(f"/inbox/grants/{grant_id}/revoke", json={}).status_code == 403
        wrong = {"X-AAIS-CSRF": "x"}
        assert (
            browser.post(f"/inbox/grants/{grant_id}/revoke", json={}, headers=wrong).status_code
            == 403
        )
        assert grant_id in live_grant_ids(client)
        token = browser.get("/approvals/csrf").json()["csrf_token"]
        ok = browser.post(
            f"/inbox/grants/{grant_id}/revoke", json={}, headers={"X-AAIS-CSRF": token}
        )
        assert ok.status_code == 200
    assert grant_id not in live_grant_ids(client)


def test_recent_resolutions_show_outcome_actor_time_digest_and_the_audit_status(
    client: httpx.Client, site: Site
) -> None:
    requested = site.authority.request(
        action("rm -rf build"), origin=origin("s-recent"), expires_in=timedelta(minutes=5)
    )
    decided = build_decision(requested, decision="deny", actor=MALLORY)
    site.authority.decide(decided, actor=BOB)
    body = client.get("/inbox/resolutions").json()
    [shown] = [r for r in body["resolutions"] if r["request_id"] == requested.request.id]
    assert shown["outcome"] == "denied"
    assert shown["actor"]["id"] == "bob"  # the authenticated actor, never the body's
    assert shown["action_digest"] == requested.request.action_digest
    assert shown["resolved_at"] and shown["summary"] == "Run a command"
    assert body["resolutions"][0]["request_id"] == requested.request.id  # newest first
    assert body["audit"]["ok"] is True and body["audit"]["checked"] > 0

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
from aais_langgraph.authority import AccessPolicy
from aais_langgraph.ledger import SqliteLedger
from aais_langgraph.protocol import Actor
from hostile.report import record

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


def test_a_cancel_shows_who_cancelled_it(client: httpx.Client, site: Site) -> None:
    requested = site.authority.request(
        action("make deploy"), origin=origin("s-cancel"), expires_in=timedelta(minutes=5)
    )
    assert site.authority.cancel(requested.request.id, actor=BOB).resolution.outcome == (
        "cancelled"
    )
    body = client.get("/inbox/resolutions").json()
    [shown] = [r for r in body["resolutions"] if r["request_id"] == requested.request.id]
    assert shown["outcome"] == "cancelled"
    assert shown["actor"] is not None and shown["actor"]["id"] == "bob"


def test_the_audit_status_counts_the_first_decision_right_after_it(
    tmp_path: Path,
) -> None:
    """The page asks once on an empty ledger, then once right after the first decision:
    the second answer has checked the decision's entries, it does not repeat the first."""
    ledger = SqliteLedger(tmp_path / "ledger.db", synchronous="NORMAL")
    ledger.setup()
    authority = ApprovalAuthority(ledger)
    graph = build_demo_graph(EffectLog(tmp_path / "effects.db"), InMemorySaver())
    authenticate = bearer_token_authenticator({"alice-token": ALICE})
    app = create_app(graph, authority=authority, authenticate=authenticate)
    with (
        serve(app) as url,
        httpx.Client(base_url=url, headers={"Authorization": "Bearer alice-token"}) as client,
    ):
        first = client.get("/inbox/resolutions").json()["audit"]
        assert first["ok"] is True and first["checked"] == 0
        requested = authority.request(
            action("uptime"), origin=origin("s-first"), expires_in=timedelta(minutes=5)
        )
        authority.decide(build_decision(requested, decision="approve", actor=ALICE), actor=ALICE)
        audit = client.get("/inbox/resolutions").json()["audit"]
    entries = len(list(authority.ledger.audit_entries()))
    assert audit["ok"] is True and audit["current"] is True
    assert audit["checked"] == entries > 0


# --- a deployment with an access policy: no existence oracle on grants ---------------------

ERIN = {"id": "erin", "type": "human"}
DAVE = {"id": "dave", "type": "human"}


@pytest.fixture(scope="module")
def policy_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    folder: Path = tmp_path_factory.mktemp("standing-policy")
    ledger = SqliteLedger(folder / "ledger.db", synchronous="NORMAL")
    ledger.setup()
    policy = AccessPolicy.from_mapping({"default_approvers": ["sre"]})
    authority = ApprovalAuthority(ledger, authorizer=policy)
    graph = build_demo_graph(EffectLog(folder / "effects.db"), InMemorySaver())
    people = {
        "erin-token": Authenticated(Actor.from_data(ERIN), groups=frozenset({"sre"})),
        "dave-token": Authenticated(Actor.from_data(DAVE), groups=frozenset({"support"})),
    }

    def authenticate(request: Request) -> Authenticated | None:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        return people.get(token) if scheme == "Bearer" else None

    app = create_app(graph, authority=authority, authenticate=authenticate)
    with serve(app) as url:
        yield Site(url, authority)


def test_revoking_an_unknown_grant_and_someone_elses_give_one_answer(policy_site: Site) -> None:
    authority = policy_site.authority
    requested = authority.request(
        action("git status -s"),
        origin=origin("s-oracle"),
        choices=SESSION_CHOICES,
        expires_in=timedelta(minutes=5),
    )
    erin = Authenticated(Actor.from_data(ERIN), groups=frozenset({"sre"})).principal
    decided = build_decision(requested, decision="approve", scope="session", actor=ERIN)
    assert authority.decide(decided, actor=erin).resolution.outcome == "approved"
    [grant] = authority.list_grants(session_id="s-oracle")
    with httpx.Client(
        base_url=policy_site.url, headers={"Authorization": "Bearer dave-token"}, timeout=30
    ) as dave:
        assert grant.grant_id not in live_grant_ids(dave)  # dave may not even view it
        someone_elses = dave.post(f"/inbox/grants/{grant.grant_id}/revoke", json={})
        unknown = dave.post("/inbox/grants/grt_no_such_grant/revoke", json={})
    same = (someone_elses.status_code, someone_elses.content) == (
        unknown.status_code,
        unknown.content,
    )
    still_live = any(g.grant_id == grant.grant_id for g in authority.list_grants())
    record("existence oracles", 1, failed_open=int(not same or not still_live))
    assert someone_elses.status_code == 403
    assert someone_elses.json()["error"]["code"] == "aais.forbidden"
    assert (someone_elses.status_code, someone_elses.json()) == (
        unknown.status_code,
        unknown.json(),
    )
    assert still_live
    with httpx.Client(
        base_url=policy_site.url, headers={"Authorization": "Bearer erin-token"}, timeout=30
    ) as erin_client:
        revoked = erin_client.post(f"/inbox/grants/{grant.grant_id}/revoke", json={})
    assert revoked.status_code == 200 and revoked.json()["revoked"] is True

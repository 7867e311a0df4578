"""The demo graph served by ``create_app`` on loopback: bearer users alice and bob, and a
cookie session for bob (which needs the CSRF token); shared by the HTTP and WebSocket tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import Request
from langgraph.checkpoint.memory import InMemorySaver

from aais_agui import (
    ApprovalService,
    Authenticated,
    ServiceSettings,
    bearer_token_authenticator,
    create_app,
)
from aais_langgraph import ApprovalAuthority
from aais_langgraph.ledger import SqliteLedger
from aais_langgraph.protocol import Actor
from aais_langgraph.webhooks import SlackApp, SubscriptionPlan

from .conftest import ALICE
from .demo_graph import EffectLog, build_demo_graph
from .http_support import serve

BOB = {"id": "bob", "type": "human"}
MAX_BODY = 64_000
OTHER_ORIGIN = "https://inbox.example"


@dataclass
class Site:
    url: str
    db: Path
    authority: ApprovalAuthority
    effects: EffectLog
    graph: Any

    @property
    def ws(self) -> str:
        return self.url.replace("http://", "ws://") + "/approvals/ws"


REVOKED: set[str] = set()
"""Cookie sessions a test has revoked (the authenticator refuses them from then on)."""


@contextmanager
def served_site(folder: Path, *, slack: SlackApp | None = None) -> Iterator[Site]:
    """``create_app`` over a SQLite ledger in ``folder``, on an ephemeral loopback port;
    with ``slack``, its interaction endpoint too (its messages are recorded, not sent:
    the app is served without its lifespan's jobs)."""
    plan = None if slack is None else SubscriptionPlan(slack.subscriptions)
    ledger = SqliteLedger(folder / "ledger.db", synchronous="NORMAL", delivery_plan=plan)
    ledger.setup()
    authority = ApprovalAuthority(ledger)
    effects = EffectLog(folder / "effects.db")
    graph = build_demo_graph(effects, InMemorySaver())
    bearer = bearer_token_authenticator({"alice-token": ALICE, "bob-token": BOB})

    def authenticate(request: Request) -> Actor | Authenticated | None:
        actor = bearer(request)
        if actor is not None:
            return actor  # type: ignore[return-value]
        if request.cookies.get("session") == "bob-session" and "bob-session" not in REVOKED:
            return Authenticated(Actor.from_data(BOB), cookie_session=True)
        return None

    settings = ServiceSettings(
        max_body_bytes=MAX_BODY,
        allowed_origins=[OTHER_ORIGIN],
        stream_poll=0.05,
        reauth_every=0.5,
    )
    service = ApprovalService(graph, authority, settings=settings, slack=slack)
    app = create_app(service, authenticate=authenticate)
    with serve(app) as url:
        yield Site(url, folder / "ledger.db", authority, effects, graph)

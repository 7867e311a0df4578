"""On every backend: a stream's filter finds the escalations that ran since it began in the
audit chain, and the groups each named, as the access object reads them."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timedelta, timezone

from aais_langgraph.authority import AccessPolicy, ApprovalAuthority, Principal
from aais_langgraph.ledger import Ledger
from aais_langgraph.ledger.follow_ups import escalated_to
from aais_langgraph.protocol import Actor
from aais_langgraph.threads import EventFilter
from aais_langgraph.webhooks import FollowUpRunner, SubscriptionPlan

POLICY = AccessPolicy.from_mapping(
    {
        "default_approvers": ["sre"],
        "approvers": [
            {
                "names": ["deploy"],
                "groups": ["sre"],
                "escalate_after": 60,
                "escalate_to": ["managers", "directors"],
            }
        ],
    }
)
PLAN = SubscriptionPlan([], policy=POLICY)


def person(name: str, group: str) -> Principal:
    return Principal(Actor(id=name, type="human"), groups=frozenset({group}))


def test_an_escalation_is_found_for_the_escalated_group_only(
    make_ledger: Callable[..., Ledger],
) -> None:
    ledger = make_ledger(PLAN)
    start = datetime.now(timezone.utc)
    moment = {"now": start}
    authority = ApprovalAuthority(ledger, authorizer=POLICY, clock=lambda: moment["now"])
    viewers = {
        who: person(who, group)
        for who, group in [("mia", "managers"), ("ivan", "interns"), ("sam", "sre")]
    }
    cuts = {who: EventFilter(authority, viewer) for who, viewer in viewers.items()}
    for cut in cuts.values():
        assert asyncio.run(cut.aescalated()) == []  # the streams begin
    requested = authority.request(
        {"kind": "tool_call", "name": "deploy", "summary": "Deploy", "arguments": {}},
        origin={"harness": "tests", "session_id": "s-1"},
        request_id="apr_followed",
        expires_in=timedelta(hours=1),
    )
    assert escalated_to(ledger, "apr_followed") is None

    moment["now"] = start + timedelta(seconds=61)
    assert [work.target for work in FollowUpRunner(authority, PLAN).run_due()] == ["escalation"]

    assert escalated_to(ledger, "apr_followed") == {"managers", "directors"}
    [shown] = asyncio.run(cuts["mia"].aescalated())
    stored = ledger.get_request("apr_followed")
    assert stored is not None and shown == stored.envelope
    assert shown["request"]["id"] == requested.request.id
    assert cuts["mia"]({"resolution": {"request_id": "apr_followed"}})  # its later events too
    assert asyncio.run(cuts["ivan"].aescalated()) == []
    assert asyncio.run(cuts["sam"].aescalated()) == []  # saw it already: no second copy
    assert asyncio.run(cuts["mia"].aescalated()) == []  # told once

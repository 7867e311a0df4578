"""A forged escalation through the served AG-UI agent: someone who can write the ledger
file marks the escalation done and appends its ``follow_up`` entry with a chain hash they
compute; nobody gains a decision from it (the groups are the policy's, the time must be
due, and with a key the entry must carry its seal)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from aais_langgraph import ApprovalAuthority
from aais_langgraph.authority import AccessPolicy
from aais_langgraph.authority.cedar import CedarAuthorizer
from aais_langgraph.ledger import SqliteLedger
from aais_langgraph.ledger.follow_ups import escalation_id
from aais_langgraph.protocol import format_timestamp
from aais_langgraph.webhooks import SubscriptionPlan
from support.attacker import Storage

from .conftest import Clock
from .demo_graph import EffectLog
from .test_agent import paused, request_id
from .test_authorization_served import person, refused

KEY = b"served-escalation-key".ljust(32, b"k")
SCHEDULE = AccessPolicy.from_mapping(
    {
        "default_approvers": ["sre"],
        "approvers": [
            {
                "kinds": ["fs.delete"],
                "groups": ["sre"],
                "escalate_after": 60,
                "escalate_to": ["managers"],
            }
        ],
    }
)
PLAN = SubscriptionPlan([], policy=SCHEDULE)
CEDAR = """
permit (principal in Group::"sre", action in [Action::"view", Action::"decide"], resource);
permit (principal, action in [Action::"view", Action::"decide"], resource is Request)
when { resource.escalated_to.containsAny(principal.groups) };
permit (
    principal is User,
    action in [Action::"start", Action::"post", Action::"view"],
    resource is Thread
);
"""
GUS = person("gus", "guest")
MIA = person("mia", "managers")


@pytest.fixture(params=[None, KEY], ids=["no-key", "key"])
def authority(tmp_path: Path, clock: Clock, request: pytest.FixtureRequest) -> ApprovalAuthority:
    ledger = SqliteLedger(tmp_path / "served.db", synchronous="NORMAL", delivery_plan=PLAN)
    ledger.setup()
    return ApprovalAuthority(
        ledger, authorizer=CedarAuthorizer(CEDAR), clock=clock, key=request.param
    )


def _forge(path: Path, request: str, groups: list[str], clock: Clock) -> None:
    storage = Storage(path)
    work_id = escalation_id(request)
    storage.sql(
        "UPDATE aais_outbox SET state = 'done', attempts = 1 WHERE kind = 'follow_up' "
        "AND work_id = ?",
        (work_id,),
    )
    payload = {
        "request_id": request,
        "follow_up": "escalation",
        "work_id": work_id,
        "by": "system",
        "escalated_to": groups,
        "ran_at": format_timestamp(clock()),
    }
    storage.append_entry("follow_up", payload, format_timestamp(clock()))


async def test_a_forged_escalation_to_a_foreign_group_decides_nothing_over_ag_ui(
    tmp_path: Path, clock: Clock, effects: EffectLog, make_agent: Any
) -> None:
    thread_id, [interrupt] = await paused(make_agent(), "delete /srv/forged.txt")
    clock.advance(timedelta(seconds=61))
    _forge(tmp_path / "served.db", request_id(interrupt), ["guest"], clock)

    await refused(
        make_agent(), thread_id, interrupt, GUS, effects
    )  # sees the open thread, decides nothing


@pytest.mark.parametrize("authority", [KEY], ids=["key"], indirect=True)
async def test_a_forged_escalation_with_a_key_lets_the_rules_group_decide_nothing_over_ag_ui(
    tmp_path: Path, clock: Clock, effects: EffectLog, make_agent: Any
) -> None:
    thread_id, [interrupt] = await paused(make_agent(), "delete /srv/f.txt")
    clock.advance(timedelta(seconds=61))
    _forge(tmp_path / "served.db", request_id(interrupt), ["managers"], clock)

    await refused(
        make_agent(), thread_id, interrupt, MIA, effects
    )  # sees the open thread, decides nothing

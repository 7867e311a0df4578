"""An escalation through the served AG-UI agent: the escalated group decides once the
escalation ran, not before, and not because a clock passed its moment."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from ag_ui.core import EventType

from aais_langgraph import ApprovalAuthority
from aais_langgraph.authority import AccessPolicy
from aais_langgraph.ledger import SqliteLedger
from aais_langgraph.webhooks import FollowUpRunner, SubscriptionPlan

from .conftest import Clock
from .demo_graph import EffectLog
from .test_agent import answer, paused, run, terminal
from .test_authorization_served import person, refused

POLICY = AccessPolicy.from_mapping(
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
PLAN = SubscriptionPlan([], policy=POLICY)
MIA = person("mia", "managers")


@pytest.fixture
def authority(tmp_path: Path, clock: Clock) -> ApprovalAuthority:
    ledger = SqliteLedger(tmp_path / "ledger.db", synchronous="NORMAL", delivery_plan=PLAN)
    ledger.setup()
    return ApprovalAuthority(ledger, authorizer=POLICY, clock=clock)


async def test_the_escalated_group_decides_over_ag_ui_once_the_escalation_ran(
    make_agent: Any, authority: ApprovalAuthority, effects: EffectLog, clock: Clock
) -> None:
    thread_id, [interrupt] = await paused(make_agent(), "delete /srv/escalate.txt")
    runner = FollowUpRunner(authority, PLAN)

    await refused(make_agent(), thread_id, interrupt, MIA, effects, sees_it=False)
    clock.advance(timedelta(seconds=61))  # past its moment; no worker ran it yet
    await refused(make_agent(), thread_id, interrupt, MIA, effects, sees_it=False)

    assert [work.target for work in await runner.arun_due()] == ["escalation"]
    events = await run(make_agent(), thread_id, resume=[answer(interrupt)], actor=MIA)

    assert terminal(events).type == EventType.RUN_FINISHED
    assert [kind for _, kind, _ in effects.list()] == ["delete_file"]
    audited = [e.payload for e in authority.ledger.audit_entries() if e.kind == "follow_up"]
    assert [(a["follow_up"], a["by"], "actor" in a) for a in audited] == [
        ("escalation", "system", False)
    ]

"""Cedar policies grant escalated groups: ``resource.escalated`` and ``resource.escalated_to``
hold once a request's escalation ran (a durable fact of the ledger), never before."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from aais_langgraph import build_decision
from aais_langgraph.authority import AccessPolicy, ApprovalAuthority, ForbiddenError, Principal
from aais_langgraph.authority.authorization import Resource
from aais_langgraph.authority.cedar import CedarAuthorizer
from aais_langgraph.ledger import FOLLOW_UP, InMemoryLedger, SqliteLedger
from aais_langgraph.ledger.follow_ups import escalation_id
from aais_langgraph.protocol import Actor
from aais_langgraph.webhooks import FollowUpRunner, SubscriptionPlan

SCHEDULE = AccessPolicy.from_mapping(
    {
        "approvers": [
            {
                "names": ["deploy*"],
                "groups": ["sre"],
                "escalate_after": 60,
                "escalate_to": ["managers", "directors"],
            }
        ]
    }
)
"""The plan's rules: what escalates, when, and to whom (Cedar decides who may then act)."""
PLAN = SubscriptionPlan([], policy=SCHEDULE)

ANY_ESCALATED_GROUP = """
permit (principal in Group::"sre", action in [Action::"view", Action::"decide"], resource);
permit (principal, action in [Action::"view", Action::"decide"], resource is Request)
when { resource.escalated_to.containsAny(principal.groups) };
"""
ONE_GROUP = """
permit (principal in Group::"sre", action in [Action::"view", Action::"decide"], resource);
permit (principal in Group::"managers", action == Action::"view", resource is Request)
when { resource.escalated && resource.escalated_to.contains("managers") };
"""
NO_ESCALATION = """
permit (principal in Group::"sre", action in [Action::"view", Action::"decide"], resource);
"""


def person(name: str, *groups: str) -> Principal:
    return Principal(Actor(id=name, type="human"), groups=frozenset(groups))


MIA = person("mia", "managers")
DORA = person("dora", "directors", "finance")
IVAN = person("ivan", "interns")
SAM = person("sam", "sre")


class Clock:
    def __init__(self) -> None:
        self.now = datetime.now(timezone.utc)

    def __call__(self) -> datetime:
        return self.now


def raised(policies: str, ledger: Any = None) -> tuple[ApprovalAuthority, Clock, str]:
    clock = Clock()
    authority = ApprovalAuthority(
        ledger or InMemoryLedger(delivery_plan=PLAN),
        authorizer=CedarAuthorizer(policies),
        clock=clock,
    )
    authority.request(
        {"kind": "tool_call", "name": "deploy", "summary": "Deploy", "arguments": {"to": "prod"}},
        origin={"harness": "tests", "session_id": "s-1"},
        request_id="apr_cedar_escalation",
        thread_id="t-1",
        expires_in=timedelta(hours=2),
    )
    return authority, clock, "apr_cedar_escalation"


def escalate(authority: ApprovalAuthority, clock: Clock) -> None:
    clock.now += timedelta(seconds=61)
    ran = FollowUpRunner(authority, PLAN).run_due()
    assert [work.target for work in ran] == ["escalation"]


def test_members_of_any_escalated_group_view_and_decide_once_it_ran() -> None:
    authority, clock, request_id = raised(ANY_ESCALATED_GROUP)
    access = authority.access
    assert access.visible(MIA, [request_id]) == frozenset()
    clock.now += timedelta(seconds=61)  # past its moment, but no worker ran it
    assert access.visible(MIA, [request_id]) == frozenset()

    escalate(authority, clock)

    assert access.visible(MIA, [request_id]) == {request_id}
    assert access.visible(DORA, [request_id]) == {request_id}
    assert access.visible(IVAN, [request_id]) == frozenset()
    requested = authority.get_request(request_id)
    assert requested is not None
    with pytest.raises(ForbiddenError):
        authority.decide(
            build_decision(requested, decision="approve", actor=IVAN.actor), actor=IVAN
        )
    assert authority.get_resolution(request_id) is None  # a refusal destroys nothing
    resolved = authority.decide(
        build_decision(requested, decision="approve", actor=MIA.actor), actor=MIA
    )
    assert resolved.resolution.outcome == "approved"


def test_the_resource_carries_the_groups_the_escalation_named() -> None:
    authority, clock, request_id = raised(ANY_ESCALATED_GROUP)
    before = authority.access.stored_resource(request_id)
    assert before is not None and (before.escalated, before.escalated_to) == (False, frozenset())

    escalate(authority, clock)

    after = authority.access.stored_resource(request_id)
    assert after is not None and after.escalated
    assert after.escalated_to == {"managers", "directors"}


def test_a_policy_naming_one_group_grants_that_group_only() -> None:
    authority, clock, request_id = raised(ONE_GROUP)
    escalate(authority, clock)
    access = authority.access

    assert access.visible(MIA, [request_id]) == {request_id}
    assert access.visible(DORA, [request_id]) == frozenset()  # escalated to, not in the policy
    assert access.visible(SAM, [request_id]) == {request_id}
    requested = authority.get_request(request_id)
    assert requested is not None
    with pytest.raises(ForbiddenError):  # view only: the policy lets managers look, not decide
        authority.decide(build_decision(requested, decision="approve", actor=MIA.actor), actor=MIA)


def test_a_planted_escalation_row_without_its_audit_entry_lets_nobody_in(tmp_path: Any) -> None:
    ledger = SqliteLedger(tmp_path / "ledger.db", delivery_plan=PLAN)
    ledger.setup()
    authority, _, request_id = raised(ANY_ESCALATED_GROUP, ledger)
    row = ledger.get_work(FOLLOW_UP, escalation_id(request_id))
    assert row is not None
    with ledger._write() as cur:  # what an attacker with the database file could do
        cur.execute("UPDATE aais_outbox SET state = 'done' WHERE work_id = ?", (row.work_id,))

    assert authority.access.visible(MIA, [request_id]) == frozenset()
    ledger.close()


def test_policies_that_never_mention_escalation_read_nothing_of_it() -> None:
    cedar = CedarAuthorizer(NO_ESCALATION)
    authority, clock, request_id = raised(NO_ESCALATION)
    requested = authority.get_request(request_id)
    assert requested is not None
    assert not cedar.escalates(requested.request)
    assert CedarAuthorizer(ANY_ESCALATED_GROUP).escalates(requested.request)
    escalate(authority, clock)
    assert authority.access.visible(MIA, [request_id]) == frozenset()
    resource = authority.access.stored_resource(request_id)
    assert resource is not None and not resource.escalated  # not asked: no ledger read


def test_the_group_principal_carries_its_own_name_as_groups() -> None:
    # "Which groups decide this?" asks with Group::"<name>" as the principal: the
    # escalated-group policy reads principal.groups, which it has.
    cedar = CedarAuthorizer(ANY_ESCALATED_GROUP)
    authority, clock, request_id = raised(ANY_ESCALATED_GROUP)
    escalate(authority, clock)
    resource = authority.access.stored_resource(request_id, decision="approve")
    assert isinstance(resource, Resource)
    assert cedar.group_may_decide("managers", resource).allowed
    assert not cedar.group_may_decide("interns", resource).allowed

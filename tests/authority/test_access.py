"""The access object: every authorization question in one place, each with an async twin."""

from __future__ import annotations

import asyncio

import pytest

from aais_langgraph.authority import (
    ADMINISTRATOR,
    Access,
    AccessPolicy,
    AllowAuthenticated,
    ApprovalAuthority,
    CedarAuthorizer,
    ForbiddenError,
    Permission,
    Principal,
    Resource,
    Verb,
)
from aais_langgraph.protocol import Actor, Request

from .support import action, new_request, origin

ALICE = Principal(Actor(id="alice", type="human"), groups=frozenset({"sre"}))
BOB = Principal(Actor(id="bob", type="human"), groups=frozenset({"dev"}))
SRE_ONLY = {"default_approvers": ["sre"]}


def at_risk(authority: ApprovalAuthority, level: str, command: str) -> Request:
    """A stored request of ``level`` risk."""
    risk = {"level": level, "reasons": ["a test"]}
    return authority.request(action(command), origin=origin(), risk=risk).request


class OnlyAlice:
    """An authorizer that answers for named principals only (no group question)."""

    def authorize(self, principal: Principal, verb: Verb, resource: Resource) -> Permission:
        return Permission(principal.id == "alice", "only alice")


def test_the_authority_holds_one_access_object_and_its_authorizer(
    authority: ApprovalAuthority,
) -> None:
    assert isinstance(authority.access, Access)
    policy = AccessPolicy.from_mapping(SRE_ONLY)
    authority.authorizer = policy
    assert authority.access.authorizer is policy and authority.authorizer is policy


def test_a_trusted_caller_is_asked_about_nothing(authority: ApprovalAuthority) -> None:
    authority.authorizer = AccessPolicy.from_mapping(SRE_ONLY)
    access = authority.access
    requested = new_request(authority, thread_id="thr_1")
    for trusted in (None, ADMINISTRATOR):
        assert access.trusts(trusted) and access.sees_everything(trusted)
        assert access.may_view(trusted, requested.request.id)
        assert access.view_selection(trusted) is None
        assert access.thread_access(trusted, "thr_1").trusted
    assert not access.trusts(BOB) and not access.sees_everything(BOB)


def test_the_default_authorizer_lets_everyone_view_without_asking(
    authority: ApprovalAuthority,
) -> None:
    assert isinstance(authority.authorizer, AllowAuthenticated)
    assert authority.access.sees_everything(BOB) and not authority.access.trusts(BOB)


def test_require_and_visible_follow_the_policy(authority: ApprovalAuthority) -> None:
    authority.authorizer = AccessPolicy.from_mapping(SRE_ONLY)
    access = authority.access
    first = new_request(authority).request.id
    second = new_request(authority, command="node --check other.js").request.id
    assert access.visible(ALICE, [first, second, "apr_unknown"]) == {first, second}
    assert access.visible(BOB, [first, second]) == frozenset()
    access.require(ALICE, "decide", first, decision="approve")
    with pytest.raises(ForbiddenError) as refused:
        access.require(BOB, "decide", first, decision="approve")
    assert refused.value.verb == "decide"


def test_each_async_twin_gives_the_answer_of_its_question(authority: ApprovalAuthority) -> None:
    authority.authorizer = AccessPolicy.from_mapping(SRE_ONLY)
    access = authority.access
    requested = new_request(authority, thread_id="thr_1")
    request_id = requested.request.id
    resource = access.request_resource(requested.request, decision="approve")

    async def asked() -> None:
        for who in (ALICE, BOB):
            assert await access.amay_view(who, request_id) == access.may_view(who, request_id)
            assert await access.avisible(who, [request_id]) == access.visible(who, [request_id])
            assert await access.apermits(who, "decide", resource) == access.permits(
                who, "decide", resource
            )
            assert await access.aview_selection(who) == access.view_selection(who)
            assert await access.athread_access(who, "thr_1") == access.thread_access(who, "thr_1")
        await access.arequire(ALICE, "decide", request_id, decision="approve")
        with pytest.raises(ForbiddenError):
            await access.arequire(BOB, "decide", request_id, decision="approve")
        with pytest.raises(ForbiddenError):
            await access.acheck(BOB, "decide", resource)
        assert await access.adeciding_groups(requested.request, ["sre", "dev"]) == frozenset(
            {"sre"}
        )

    asyncio.run(asked())


def test_an_access_policy_names_the_groups_its_rules_let_decide(
    authority: ApprovalAuthority,
) -> None:
    authority.authorizer = AccessPolicy.from_mapping(
        {
            "administrator_groups": ["admins"],
            "default_approvers": ["ops"],
            "approvers": [{"risk": ["high"], "groups": ["sre"], "users": ["carol"]}],
        }
    )
    high = at_risk(authority, "high", "rm -r build")
    low = at_risk(authority, "low", "ls")
    groups = ["sre", "ops", "admins", "dev"]
    assert authority.access.deciding_groups(high, groups) == frozenset({"sre", "admins"})
    assert authority.access.deciding_groups(low, groups) == frozenset({"ops", "admins"})


def test_cedar_answers_for_the_group_itself(authority: ApprovalAuthority) -> None:
    authority.authorizer = CedarAuthorizer(
        'permit (principal in Group::"sre", action == Action::"decide", resource)'
        " when { resource.risk_rank >= 2 };\n"
        'permit (principal == User::"alice", action == Action::"decide", resource);'
    )
    high = at_risk(authority, "high", "rm -r build")
    low = at_risk(authority, "low", "ls")
    assert authority.access.deciding_groups(high, ["sre", "dev"]) == frozenset({"sre"})
    # A policy naming one user grants no group.
    assert authority.access.deciding_groups(low, ["sre", "dev"]) == frozenset()


def test_an_authorizer_that_answers_only_for_people_cannot_say_which_groups_decide(
    authority: ApprovalAuthority,
) -> None:
    authority.authorizer = OnlyAlice()
    requested = new_request(authority).request
    assert authority.access.deciding_groups(requested, ["sre"]) is None
    assert authority.access.may_view(ALICE, requested.id)
    assert not authority.access.may_view(BOB, requested.id)

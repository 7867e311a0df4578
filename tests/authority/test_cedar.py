"""The Cedar authorizer: its policies decide who may view, decide, cancel and revoke."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aais_langgraph import build_decision
from aais_langgraph.authority import ApprovalAuthority, ForbiddenError, Principal
from aais_langgraph.authority.access import GRANT_NOT_REVOCABLE
from aais_langgraph.authority.cedar import CedarAuthorizer
from aais_langgraph.ledger import Ledger
from aais_langgraph.protocol import Actor, ApprovalRequested, ApprovalResolved

from .support import SECRET, FakeClock

POLICIES = """
permit (principal in Group::"sre", action == Action::"decide", resource)
when { resource.kind == "process.exec" && resource.risk_rank >= 2 };

forbid (principal, action == Action::"decide", resource)
when { context.own && context.decision == "approve" };

permit (principal, action in [Action::"view", Action::"cancel"], resource)
when { context.own };

permit (principal in Group::"sre", action == Action::"view", resource)
when { resource.kind == "process.exec" };

forbid (principal, action == Action::"decide", resource)
when { resource.argument_keys.contains("token") };

permit (principal in Group::"sre", action == Action::"revoke", resource is Grant)
when { resource.kind == "process.exec" };

permit (principal in Group::"audit", action == Action::"view", resource is Thread);

permit (principal == User::"erin", action == Action::"view", resource)
when { resource.requester == "alice" && resource.session == "s-1" };
permit (principal is User, action == Action::"start", resource);
permit (principal is User, action in [Action::"post", Action::"view"], resource is Thread)
when { context.own };
"""
"""policy0 … policy7, in this order (cedarpy numbers them)."""


def person(name: str, *groups: str, administrator: bool = False) -> Principal:
    return Principal(
        Actor(id=name, type="human"), groups=frozenset(groups), administrator=administrator
    )


ALICE = person("alice", "sre")
SAM = person("sam", "sre")
BOB = person("bob", "dev")
ERIN = person("erin", "audit")

CHOICES: list[dict[str, Any]] = [
    {"decision": "approve", "scope": "once", "label": "Approve once"},
    {
        "decision": "approve",
        "scope": "session",
        "label": "Approve deploys for this session",
        "scope_constraints": {"command_prefix": "deploy "},
    },
    {"decision": "deny", "scope": "once", "label": "Deny"},
]


def act(kind: str = "process.exec", **arguments: Any) -> dict[str, Any]:
    return {
        "kind": kind,
        "name": "deploy",
        "summary": "Deploy",
        "arguments": {"command": f"deploy --password={SECRET}", **arguments},
    }


def ask(
    authority: ApprovalAuthority,
    risk: str = "high",
    requester: str | None = "alice",
    *,
    kind: str = "process.exec",
    thread_id: str | None = None,
    **arguments: Any,
) -> ApprovalRequested:
    return authority.request(
        act(kind, **arguments),
        origin={"harness": "tests", "session_id": "s-1"},
        risk={"level": risk, "reasons": ["x"]},
        choices=CHOICES,
        thread_id=thread_id,
        context=None if requester is None else {"requester": requester},
    )


def answer(
    authority: ApprovalAuthority,
    requested: ApprovalRequested,
    principal: Principal,
    kind: str = "approve",
    scope: str = "once",
) -> ApprovalResolved:
    decided = build_decision(
        requested,
        decision=kind,  # type: ignore[arg-type]
        actor=principal.actor,
        scope=scope,  # type: ignore[arg-type]
        decided_at=requested.request.created_at,
    )
    return authority.decide(decided.to_json(), actor=principal)


def refused(
    authority: ApprovalAuthority, request_id: str, call: Callable[[], object]
) -> ForbiddenError:
    """``call`` raises ForbiddenError and records nothing: the request stays pending."""
    tip = authority.ledger.audit_tip()
    with pytest.raises(ForbiddenError) as info:
        call()
    assert info.value.code == "aais.forbidden"
    assert SECRET not in info.value.reason
    assert SECRET not in str(info.value)
    assert authority.ledger.audit_tip() == tip
    stored = authority.ledger.get_request(request_id)
    assert stored is not None
    assert stored.status == "pending"
    assert authority.get_resolution(request_id) is None
    return info.value


@pytest.fixture
def cedar(ledger: Ledger, clock: FakeClock) -> ApprovalAuthority:
    return ApprovalAuthority(ledger, clock=clock, authorizer=CedarAuthorizer(POLICIES))


def test_an_sre_approves_someone_elses_high_risk_command(cedar: ApprovalAuthority) -> None:
    requested = ask(cedar, "high", "alice")
    assert answer(cedar, requested, SAM).resolution.outcome == "approved"
    critical = ask(cedar, "critical", None)
    assert answer(cedar, critical, ALICE).resolution.outcome == "approved"


def test_nobody_approves_their_own_request(cedar: ApprovalAuthority) -> None:
    requested = ask(cedar, "high", "alice")
    error = refused(cedar, requested.request.id, lambda: answer(cedar, requested, ALICE))
    assert error.verb == "decide"
    assert error.reason == "refused by Cedar policy policy1"
    # a denial of her own request is no approval of it
    assert answer(cedar, requested, ALICE, "deny").resolution.outcome == "denied"


@pytest.mark.parametrize(
    ("risk", "kind", "who"),
    [
        ("high", "process.exec", BOB),
        ("high", "process.exec", ERIN),
        ("medium", "process.exec", SAM),
        ("low", "process.exec", ALICE),
        ("critical", "payments.transfer", SAM),
    ],
)
def test_what_no_policy_permits_is_refused(
    cedar: ApprovalAuthority, risk: str, kind: str, who: Principal
) -> None:
    requested = ask(cedar, risk, "carol", kind=kind)
    for decision in ("approve", "deny"):
        error = refused(
            cedar,
            requested.request.id,
            lambda decision=decision: answer(cedar, requested, who, decision),  # type: ignore[misc]
        )
        assert error.reason == "no Cedar policy permits decide here"


def test_a_forbid_on_argument_names_refuses_without_the_value(
    cedar: ApprovalAuthority,
) -> None:
    requested = ask(cedar, "high", "carol", token=SECRET)
    error = refused(cedar, requested.request.id, lambda: answer(cedar, requested, SAM))
    assert error.reason == "refused by Cedar policy policy4"
    assert SECRET not in error.reason


def test_who_may_view_a_request(cedar: ApprovalAuthority) -> None:
    requested = ask(cedar, "high", "alice")
    request_id = requested.request.id
    assert cedar.may_view(ALICE, request_id) is True  # her own (and an SRE)
    assert cedar.may_view(SAM, request_id) is True  # an SRE, process.exec
    assert cedar.may_view(ERIN, request_id) is True  # policy7: alice's, in session s-1
    assert cedar.may_view(BOB, request_id) is False
    with pytest.raises(ForbiddenError) as info:
        cedar.require(BOB, "view", request_id)
    assert info.value.reason == "no Cedar policy permits view here"
    payment = ask(cedar, "low", "bob", kind="payments.transfer")
    assert cedar.may_view(BOB, payment.request.id) is True
    assert cedar.may_view(SAM, payment.request.id) is False
    assert cedar.may_view(ERIN, payment.request.id) is False


def test_who_may_cancel_a_request(cedar: ApprovalAuthority) -> None:
    requested = ask(cedar, "high", "bob")
    for who in (ALICE, SAM, ERIN):
        refused(
            cedar,
            requested.request.id,
            lambda who=who: cedar.cancel(requested.request.id, actor=who),  # type: ignore[misc]
        )
    resolved = cedar.cancel(requested.request.id, actor=BOB)
    assert resolved.resolution.outcome == "cancelled"


def test_who_may_view_a_thread(cedar: ApprovalAuthority) -> None:
    ask(cedar, "low", "bob", kind="payments.transfer", thread_id="t-1")
    erin, bob, sam = (cedar.thread_access(who, "t-1") for who in (ERIN, BOB, SAM))
    assert erin.content and erin.visible  # policy6: audit sees threads
    assert bob.follows and not bob.content and bob.visible  # may view a request on it
    assert not sam.visible


def test_who_may_revoke_a_grant(cedar: ApprovalAuthority) -> None:
    requested = ask(cedar, "high", "alice")
    resolved = answer(cedar, requested, SAM, scope="session")
    assert resolved.resolution.outcome == "approved"
    (grant,) = cedar.list_grants()
    tip = cedar.ledger.audit_tip()
    assert not cedar.may_view(BOB, requested.request.id)
    with pytest.raises(ForbiddenError) as info:
        cedar.revoke_grant(grant.grant_id, actor=BOB)
    # Bob may not even view the grant's request: the answer an unknown grant gets.
    assert info.value.reason == GRANT_NOT_REVOCABLE
    assert cedar.ledger.audit_tip() == tip
    assert [live.grant_id for live in cedar.list_grants()] == [grant.grant_id]
    assert cedar.revoke_grant(grant.grant_id, actor=ALICE) is True
    assert cedar.list_grants() == []


def test_reconcile_needs_a_policy(cedar: ApprovalAuthority) -> None:
    requested = ask(cedar, "high", "alice")
    answer(cedar, requested, SAM)
    with pytest.raises(ForbiddenError) as info:
        cedar.require(SAM, "reconcile", requested.request.id)
    assert info.value.reason == "no Cedar policy permits reconcile here"


def test_an_administrator_needs_no_policy(ledger: Ledger, clock: FakeClock) -> None:
    authority = ApprovalAuthority(ledger, clock=clock, authorizer=CedarAuthorizer(""))
    admin = person("alice", administrator=True)
    requested = ask(authority, "critical", "alice")
    assert authority.may_view(admin, requested.request.id) is True
    authority.require(admin, "reconcile", requested.request.id)
    assert answer(authority, requested, admin).resolution.outcome == "approved"
    other = ask(authority, "critical", "alice")
    refused(authority, other.request.id, lambda: answer(authority, other, person("alice")))


def test_a_policy_that_fails_to_evaluate_refuses_with_a_generic_reason(
    ledger: Ledger, clock: FakeClock
) -> None:
    broken = CedarAuthorizer(
        'permit (principal, action, resource) when { resource.nonexistent == "x" };'
    )
    authority = ApprovalAuthority(ledger, clock=clock, authorizer=broken)
    requested = ask(authority, "high", "carol")
    for call in (
        lambda: answer(authority, requested, SAM),
        lambda: authority.cancel(requested.request.id, actor=SAM),
    ):
        error = refused(authority, requested.request.id, call)
        assert error.reason == "the Cedar policies failed to evaluate; refused"
    assert authority.may_view(SAM, requested.request.id) is False


def test_a_policy_set_that_does_not_parse_is_refused_at_construction() -> None:
    with pytest.raises(ValueError) as error:
        CedarAuthorizer(f'permit (principal, action, resource) when {{ "{SECRET}" == ')
    assert str(error.value).startswith("policies: Cedar cannot parse them")
    with pytest.raises(ValueError):
        CedarAuthorizer("allow everyone;")


def test_policies_are_read_from_a_file(tmp_path: Path, ledger: Ledger, clock: FakeClock) -> None:
    path = tmp_path / "policies.cedar"
    path.write_text(POLICIES, encoding="utf-8")
    for source in (path, str(path)):
        authority = ApprovalAuthority(ledger, clock=clock, authorizer=CedarAuthorizer(path=source))
        requested = ask(authority, "high", "alice")
        refused(authority, requested.request.id, lambda: answer(authority, requested, ALICE))  # noqa: B023
        assert answer(authority, requested, SAM).resolution.outcome == "approved"
    bad = tmp_path / "bad.cedar"
    bad.write_text("permit (principal, action, resource", encoding="utf-8")
    with pytest.raises(ValueError) as error:
        CedarAuthorizer(path=bad)
    assert str(error.value).startswith("policies:")
    with pytest.raises(OSError):
        CedarAuthorizer(path=tmp_path / "absent.cedar")


@pytest.mark.parametrize(
    "arguments",
    [{}, {"policies": POLICIES, "path": "policies.cedar"}],
    ids=["neither", "both"],
)
def test_exactly_one_of_text_and_path(arguments: dict[str, Any]) -> None:
    with pytest.raises(ValueError) as error:
        CedarAuthorizer(**arguments)
    assert str(error.value) == "policies, path: give exactly one"


def test_a_forbid_that_fails_to_evaluate_refuses_instead_of_being_skipped(
    ledger: Ledger, clock: FakeClock
) -> None:
    """Cedar skips a policy whose evaluation errors; a broken ``forbid`` must not let
    through what it was written to stop, while a broken ``permit`` grants nothing."""
    policies = """
    permit (principal, action, resource);
    forbid (principal, action == Action::"decide", resource) when { resource.nonexistent == "x" };
    """
    authority = ApprovalAuthority(ledger, clock=clock, authorizer=CedarAuthorizer(policies))
    requested = ask(authority, "high", "bob")
    with pytest.raises(ForbiddenError, match="forbid policy failed to evaluate"):
        answer(authority, requested, SAM)
    assert authority.get_resolution(requested.request.id) is None
    assert authority.may_view(SAM, requested.request.id)  # the forbid is about deciding

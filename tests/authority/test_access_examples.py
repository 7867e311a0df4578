"""The example access policy and Cedar policy set in examples/access do what their comments say."""

from __future__ import annotations

from pathlib import Path

import pytest

from aais_langgraph.authority import (
    ApprovalAuthority,
    Authorizer,
    ForbiddenError,
    Principal,
    load_access_policy,
)
from aais_langgraph.authority.cedar import CedarAuthorizer
from aais_langgraph.ledger import InMemoryLedger
from aais_langgraph.protocol import Actor, ApprovalRequested, build_decision

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "access"


def person(name: str, *groups: str) -> Principal:
    return Principal(Actor(id=name, type="human"), frozenset(groups))


SRE, OTHER_SRE, DEV, AUDITOR = (
    person("alice", "sre"),
    person("erin", "sre"),
    person("bob", "dev"),
    person("ann", "audit"),
)


def shell(authority: ApprovalAuthority, *, requester: str, level: str) -> ApprovalRequested:
    return authority.request(
        {
            "kind": "process.exec",
            "name": "shell",
            "summary": "Run a shell command",
            "arguments": {"command": "systemctl restart api"},
        },
        origin={"harness": "test", "session_id": "s-1"},
        risk={"level": level, "reasons": ["restarts a service"]},
        context={"requester": requester},
    )


def decide(authority: ApprovalAuthority, requested: ApprovalRequested, who: Principal) -> str:
    decided = build_decision(requested, decision="approve", actor=who.actor)
    return authority.decide(decided, actor=who).resolution.outcome


@pytest.fixture(params=["access.toml", "policies.cedar"])
def authorizer(request: pytest.FixtureRequest) -> Authorizer:
    path = EXAMPLES / request.param
    if path.suffix == ".toml":
        return load_access_policy(path)
    return CedarAuthorizer(path=path)


def test_an_sre_approves_a_high_risk_shell_command(authorizer: Authorizer) -> None:
    authority = ApprovalAuthority(InMemoryLedger(), authorizer=authorizer)
    requested = shell(authority, requester="bob", level="high")
    assert decide(authority, requested, SRE) == "approved"


def test_a_developer_may_not_and_nothing_is_recorded(authorizer: Authorizer) -> None:
    authority = ApprovalAuthority(InMemoryLedger(), authorizer=authorizer)
    requested = shell(authority, requester="carol", level="high")
    tip = authority.ledger.audit_tip()
    with pytest.raises(ForbiddenError):
        decide(authority, requested, DEV)
    assert authority.ledger.audit_tip() == tip
    assert authority.get_resolution(requested.request.id) is None


def test_nobody_approves_their_own_run_at_high_risk(authorizer: Authorizer) -> None:
    authority = ApprovalAuthority(InMemoryLedger(), authorizer=authorizer)
    requested = shell(authority, requester="alice", level="critical")
    with pytest.raises(ForbiddenError):
        decide(authority, requested, SRE)
    assert decide(authority, requested, OTHER_SRE) == "approved"


def test_requesters_see_their_own_requests(authorizer: Authorizer) -> None:
    authority = ApprovalAuthority(InMemoryLedger(), authorizer=authorizer)
    mine = shell(authority, requester="bob", level="high").request.id
    theirs = shell(authority, requester="carol", level="high").request.id
    assert authority.may_view(DEV, mine) and not authority.may_view(DEV, theirs)


def test_the_toml_example_lets_auditors_see_and_asks_finance_twice() -> None:
    policy = load_access_policy(EXAMPLES / "access.toml")
    authority = ApprovalAuthority(InMemoryLedger(), authorizer=policy)
    requested = shell(authority, requester="carol", level="high").request.id
    assert authority.may_view(AUDITOR, requested)
    assert authority.quorum_of("payments.transfer", "transfer", "critical") == 2
    assert authority.quorum_of("payments.transfer", "transfer", "high") == 1

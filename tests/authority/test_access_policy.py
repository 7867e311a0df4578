"""The TOML access policy: its parsing, and who it lets view, decide, cancel, revoke, reconcile."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from aais_langgraph import build_decision
from aais_langgraph.authority import (
    AccessPolicy,
    ApprovalAuthority,
    ForbiddenError,
    Principal,
    RequestLimits,
    load_access_policy,
)
from aais_langgraph.authority.access import GRANT_NOT_REVOCABLE
from aais_langgraph.authority.access_policy import ApproverRule
from aais_langgraph.gate.execution import reconcile_execution
from aais_langgraph.ledger import InMemoryLedger, Ledger
from aais_langgraph.protocol import Actor, ApprovalRequested, ApprovalResolved, build_request
from aais_langgraph.threads import visible_snapshot

from .support import SECRET, START, FakeClock

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

# -- parsing ---------------------------------------------------------------------------

DOCUMENTED = """
administrators = ["ops-admin"]
administrator_groups = ["admins"]
viewer_groups = ["audit"]
default_approvers = ["*"]

[[approvers]]
kinds = ["process.exec"]
names = ["deploy*"]
risk = ["high", "critical"]
groups = ["sre"]
users = []

[[approvers]]
kinds = ["payments.*"]
users = ["dave"]

[separation_of_duties]
from_risk = "high"

[requesters]
view_own = true
cancel_own = false

[grants]
revoke_groups = ["sre"]

[reconcile]
groups = ["oncall"]
"""

BAD = "sk-bad-value-7c1e"
"""A value that must not appear in any parse error."""


def write(tmp_path: Path, text: str, name: str = "access.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_the_documented_file_loads_into_its_rules(tmp_path: Path) -> None:
    policy = load_access_policy(write(tmp_path, DOCUMENTED))
    assert policy.administrators == frozenset({"ops-admin"})
    assert policy.administrator_groups == frozenset({"admins"})
    assert policy.viewer_groups == frozenset({"audit"})
    assert policy.default_approvers.groups == frozenset({"*"})
    first, second = policy.approvers
    assert first.kinds == ("process.exec",)
    assert first.names == ("deploy*",)
    assert first.risk == frozenset({"high", "critical"})
    assert first.groups == frozenset({"sre"})
    assert first.users == frozenset()
    assert first.index == 0
    assert second.kinds == ("payments.*",)
    assert second.users == frozenset({"dave"})
    assert second.groups == frozenset()
    assert second.risk == frozenset()
    assert second.index == 1
    assert policy.separation_from_risk == "high"
    assert policy.requesters_view_own is True
    assert policy.requesters_cancel_own is False
    assert policy.revoke_groups == frozenset({"sre"})
    assert policy.reconcile_groups == frozenset({"oncall"})


def test_a_file_and_its_parsed_mapping_give_the_same_policy(tmp_path: Path) -> None:
    assert load_access_policy(write(tmp_path, DOCUMENTED)) == AccessPolicy.from_mapping(
        tomllib.loads(DOCUMENTED)
    )
    assert load_access_policy(str(write(tmp_path, DOCUMENTED))) == load_access_policy(
        tmp_path / "access.toml"
    )


def test_an_empty_file_is_the_permissive_default(tmp_path: Path) -> None:
    policy = load_access_policy(write(tmp_path, ""))
    assert policy == AccessPolicy()
    assert policy.approvers == ()
    assert policy.default_approvers.groups == frozenset({"*"})
    assert policy.separation_from_risk is None
    assert policy.requesters_view_own is True
    assert policy.requesters_cancel_own is True
    assert policy.reconcile_groups is None
    assert policy.revoke_groups == frozenset()


BAD_FILES: list[tuple[str, str]] = [
    (f'colour = "{BAD}"', "colour:"),
    (f'administrators = "{BAD}"', "administrators:"),
    ("administrators = [31337]", "administrators:"),
    (f'administrator_groups = {{ name = "{BAD}" }}', "administrator_groups:"),
    (f'viewer_groups = "{BAD}"', "viewer_groups:"),
    ('viewer_groups = [""]', "viewer_groups:"),
    (f'default_approvers = "{BAD}"', "default_approvers:"),
    (f'approvers = "{BAD}"', "approvers:"),
    ('[approvers]\ngroups = ["sre"]', "approvers:"),
    (f'approvers = ["{BAD}"]', "approvers[0]:"),
    (f'[[approvers]]\ngroups = ["sre"]\nwhom = "{BAD}"', "approvers[0].whom:"),
    (f'[[approvers]]\ngroups = ["sre"]\nrisk = ["high", "{BAD}"]', "approvers[0].risk:"),
    (f'[[approvers]]\ngroups = ["sre"]\nrisk = "{BAD}"', "approvers[0].risk:"),
    (f'[[approvers]]\ngroups = "{BAD}"', "approvers[0].groups:"),
    ("[[approvers]]\ngroups = [31337]", "approvers[0].groups:"),
    ('[[approvers]]\ngroups = ["sre", ""]', "approvers[0].groups:"),
    (f'[[approvers]]\nusers = "{BAD}"', "approvers[0].users:"),
    (f'[[approvers]]\ngroups = ["sre"]\nkinds = "{BAD}"', "approvers[0].kinds:"),
    ('[[approvers]]\nusers = ["dave"]\nnames = [31337]', "approvers[0].names:"),
    (f'[[approvers]]\nkinds = ["{BAD}"]', "approvers[0]:"),
    (f'[[approvers]]\ngroups = ["sre"]\n[[approvers]]\nkinds = ["{BAD}"]', "approvers[1]:"),
    (
        f'[[approvers]]\ngroups = ["sre"]\n[[approvers]]\ngroups = ["dev"]\nrisk = ["{BAD}"]',
        "approvers[1].risk:",
    ),
    (f'[[approvers]]\ngroups = []\nusers = []\nkinds = ["{BAD}"]', "approvers[0]:"),
    (f'separation_of_duties = "{BAD}"', "separation_of_duties:"),
    (f'[separation_of_duties]\nfrom_risk = "{BAD}"', "separation_of_duties.from_risk:"),
    ("[separation_of_duties]\nfrom_risk = 31337", "separation_of_duties.from_risk:"),
    ('[separation_of_duties]\nfrom_risk = ["high"]', "separation_of_duties.from_risk:"),
    (f'[separation_of_duties]\nfrom = "{BAD}"', "separation_of_duties.from:"),
    (f'[requesters]\nview_own = "{BAD}"', "requesters.view_own:"),
    ("[requesters]\nview_own = 1", "requesters.view_own:"),
    (f'[requesters]\ncancel_own = "{BAD}"', "requesters.cancel_own:"),
    (f'[requesters]\nview_all = "{BAD}"', "requesters.view_all:"),
    (f'requesters = "{BAD}"', "requesters:"),
    (f'[grants]\nrevoke_groups = "{BAD}"', "grants.revoke_groups:"),
    (f'[grants]\nrevoke_users = ["{BAD}"]', "grants.revoke_users:"),
    (f'grants = "{BAD}"', "grants:"),
    (f'[reconcile]\ngroups = "{BAD}"', "reconcile.groups:"),
    (f'[reconcile]\nusers = ["{BAD}"]', "reconcile.users:"),
    (f'reconcile = ["{BAD}"]', "reconcile:"),
]


@pytest.mark.parametrize(("text", "prefix"), BAD_FILES)
def test_a_bad_setting_is_named_by_its_key_path_without_its_value(
    tmp_path: Path, text: str, prefix: str
) -> None:
    with pytest.raises(ValueError) as from_file:
        load_access_policy(write(tmp_path, text))
    with pytest.raises(ValueError) as from_mapping:
        AccessPolicy.from_mapping(tomllib.loads(text))
    for error in (from_file.value, from_mapping.value):
        message = str(error)
        assert message.startswith(prefix), message
        assert BAD not in message
        assert "31337" not in message


def test_a_file_that_is_not_toml_is_named_without_its_content(tmp_path: Path) -> None:
    path = write(tmp_path, f'default_approvers = ["dev"\n{BAD} = [[[ oops', name="team.toml")
    with pytest.raises(ValueError) as error:
        load_access_policy(path)
    assert str(error.value).startswith("team.toml: not TOML")
    assert BAD not in str(error.value)


def test_a_missing_file_is_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        load_access_policy(tmp_path / "absent.toml")


# -- semantics through a real authority ------------------------------------------------

TEAM: dict[str, Any] = {
    "approvers": [
        {"kinds": ["process.exec"], "risk": ["high", "critical"], "groups": ["sre"]},
        {"kinds": ["payments.*"], "groups": ["finance"]},
    ],
    "default_approvers": ["dev", "sre"],
    "separation_of_duties": {"from_risk": "high"},
    "requesters": {"view_own": True, "cancel_own": True},
    "viewer_groups": ["audit"],
}


def person(name: str, *groups: str, administrator: bool = False) -> Principal:
    return Principal(
        Actor(id=name, type="human"), groups=frozenset(groups), administrator=administrator
    )


PEOPLE: dict[str, Principal] = {
    "alice": person("alice", "sre"),
    "sam": person("sam", "sre"),
    "bob": person("bob", "dev"),
    "carol": person("carol", "finance"),
    "dave": person("dave", "finance"),
    "erin": person("erin", "audit"),
    "mallory": person("mallory"),
}

CHOICES: list[dict[str, Any]] = [
    {"decision": "approve", "scope": "once", "label": "Approve once"},
    {
        "decision": "approve",
        "scope": "session",
        "label": "Approve deploys for this session",
        "scope_constraints": {"command_prefix": "deploy "},
    },
    {"decision": "deny", "scope": "once", "label": "Deny"},
    {"decision": "cancel", "scope": "once", "label": "Withdraw"},
]

OUTCOMES = {"approve": "approved", "deny": "denied", "cancel": "cancelled"}

NAMES = {"process.exec": "deploy", "payments.transfer": "transfer", "payments.refund": "refund"}


def act(kind: str = "process.exec", name: str | None = None) -> dict[str, Any]:
    """An action whose arguments hold a secret-looking value no reason may echo."""
    return {
        "kind": kind,
        "name": name or NAMES.get(kind, "act"),
        "summary": "Deploy" if kind == "process.exec" else "Move money",
        "arguments": {"command": f"deploy --token {SECRET}", "amount": 125},
    }


def ask(
    authority: ApprovalAuthority,
    kind: str = "process.exec",
    risk: str = "high",
    requester: str | None = None,
    *,
    name: str | None = None,
    thread_id: str | None = None,
    session_id: str = "s-1",
) -> ApprovalRequested:
    return authority.request(
        act(kind, name),
        origin={"harness": "tests", "session_id": session_id},
        risk={"level": risk, "reasons": ["x"]},
        choices=CHOICES,
        thread_id=thread_id,
        context=None if requester is None else {"requester": requester},
    )


def answer(
    authority: ApprovalAuthority,
    requested: ApprovalRequested,
    principal: Principal,
    kind: str,
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


def attempt(
    authority: ApprovalAuthority, requested: ApprovalRequested, principal: Principal, op: str
) -> Callable[[], ApprovalResolved]:
    """The call ``op`` names: ``approve``/``deny``/``cancel`` as a decision, ``withdraw`` as
    :meth:`ApprovalAuthority.cancel`."""
    if op == "withdraw":
        return lambda: authority.cancel(requested.request.id, actor=principal)
    return lambda: answer(authority, requested, principal, op)


def assert_refused(
    authority: ApprovalAuthority, request_id: str, call: Callable[[], object]
) -> ForbiddenError:
    """``call`` raises ForbiddenError and leaves the request pending, unresolved, unaudited."""
    tip = authority.ledger.audit_tip()
    sequence = authority.ledger.last_sequence()
    with pytest.raises(ForbiddenError) as info:
        call()
    assert info.value.code == "aais.forbidden"
    assert SECRET not in info.value.reason
    assert SECRET not in str(info.value)
    assert authority.ledger.audit_tip() == tip
    assert authority.ledger.last_sequence() == sequence
    stored = authority.ledger.get_request(request_id)
    assert stored is not None
    assert stored.status == "pending"
    assert authority.get_resolution(request_id) is None
    assert request_id in {row.request_id for row in authority.ledger.list_pending()}
    return info.value


@pytest.fixture
def team(ledger: Ledger, clock: FakeClock) -> ApprovalAuthority:
    return ApprovalAuthority(ledger, clock=clock, authorizer=AccessPolicy.from_mapping(TEAM))


# (kind, risk, requester, who, op, allowed)
CASES: list[tuple[str, str, str | None, str, str, bool]] = [
    # high-risk process.exec: sre decides; its requester may not approve it herself
    ("process.exec", "high", "alice", "alice", "approve", False),
    ("process.exec", "high", "alice", "alice", "deny", True),
    ("process.exec", "high", "alice", "alice", "cancel", True),
    ("process.exec", "high", "alice", "alice", "withdraw", True),
    ("process.exec", "high", "alice", "sam", "approve", True),
    ("process.exec", "high", "alice", "sam", "deny", True),
    ("process.exec", "high", "alice", "sam", "withdraw", True),
    ("process.exec", "high", "alice", "bob", "approve", False),
    ("process.exec", "high", "alice", "bob", "deny", False),
    ("process.exec", "high", "alice", "bob", "cancel", False),
    ("process.exec", "high", "alice", "bob", "withdraw", False),
    ("process.exec", "high", "alice", "carol", "approve", False),
    ("process.exec", "high", "alice", "erin", "approve", False),
    ("process.exec", "high", "alice", "erin", "withdraw", False),
    ("process.exec", "high", "alice", "mallory", "deny", False),
    ("process.exec", "high", "alice", "mallory", "withdraw", False),
    ("process.exec", "critical", "sam", "sam", "approve", False),
    ("process.exec", "critical", "sam", "alice", "approve", True),
    # a dev's critical request: he may withdraw it, not decide it
    ("process.exec", "critical", "bob", "bob", "approve", False),
    ("process.exec", "critical", "bob", "bob", "deny", False),
    ("process.exec", "critical", "bob", "bob", "cancel", True),
    ("process.exec", "critical", "bob", "bob", "withdraw", True),
    ("process.exec", "critical", "bob", "alice", "approve", True),
    # below high risk: the default approvers (dev, sre), no separation of duties
    ("process.exec", "low", "bob", "bob", "approve", True),
    ("process.exec", "medium", "alice", "alice", "approve", True),
    ("process.exec", "low", "bob", "alice", "approve", True),
    ("process.exec", "low", "bob", "carol", "approve", False),
    ("process.exec", "low", "bob", "carol", "withdraw", False),
    ("process.exec", "medium", "bob", "erin", "deny", False),
    # payments: finance, matched before the defaults
    ("payments.transfer", "medium", "bob", "carol", "approve", True),
    ("payments.transfer", "medium", "bob", "dave", "deny", True),
    ("payments.transfer", "medium", "bob", "bob", "approve", False),
    ("payments.transfer", "medium", "bob", "bob", "withdraw", True),
    ("payments.transfer", "medium", "bob", "alice", "approve", False),
    ("payments.transfer", "medium", "bob", "alice", "withdraw", False),
    ("payments.refund", "critical", "carol", "carol", "approve", False),
    ("payments.refund", "critical", "carol", "carol", "deny", True),
    ("payments.refund", "critical", "carol", "carol", "cancel", True),
    ("payments.refund", "critical", "carol", "dave", "approve", True),
    ("payments.refund", "critical", "carol", "sam", "approve", False),
    ("payments.refund", "low", "carol", "carol", "approve", True),
    # nobody's run: no separation of duties, nobody withdraws it as their own
    ("process.exec", "high", None, "sam", "approve", True),
    ("process.exec", "high", None, "bob", "withdraw", False),
    ("payments.transfer", "high", None, "carol", "approve", True),
]


@pytest.mark.parametrize(("kind", "risk", "requester", "who", "op", "allowed"), CASES)
def test_who_may_decide_and_cancel(
    team: ApprovalAuthority,
    kind: str,
    risk: str,
    requester: str | None,
    who: str,
    op: str,
    allowed: bool,
) -> None:
    requested = ask(team, kind, risk, requester)
    request_id = requested.request.id
    principal = PEOPLE[who]
    call = attempt(team, requested, principal, op)
    verb = "decide" if op in ("approve", "deny") else "cancel"
    decision = "cancel" if op == "withdraw" else op
    stored = team.get_stored_request(request_id)
    assert stored is not None
    resource = team.resource_of(stored, requested.request, decision=decision)
    assert team.permits(principal, verb, resource).allowed is allowed  # type: ignore[arg-type]
    if not allowed:
        assert_refused(team, request_id, call)
        return
    tip = team.ledger.audit_tip()
    resolved = call()
    assert resolved.resolution.outcome == OUTCOMES[decision]
    assert team.ledger.audit_tip() != tip
    recorded = team.get_resolution(request_id)
    assert recorded is not None
    assert recorded.resolution.outcome == OUTCOMES[decision]
    assert team.ledger.list_pending() == []


def test_separation_of_duties_names_itself_and_not_the_arguments(
    team: ApprovalAuthority,
) -> None:
    requested = ask(team, "process.exec", "high", "alice")
    error = assert_refused(
        team, requested.request.id, lambda: answer(team, requested, PEOPLE["alice"], "approve")
    )
    assert error.verb == "decide"
    assert "separation of duties" in error.reason
    # the refusal left the request open: another SRE approves it, once
    assert answer(team, requested, PEOPLE["sam"], "approve").resolution.outcome == "approved"


def test_a_refusal_names_the_rule_that_applies(team: ApprovalAuthority) -> None:
    exec_request = ask(team, "process.exec", "high", "alice")
    error = assert_refused(
        team, exec_request.request.id, lambda: answer(team, exec_request, PEOPLE["bob"], "deny")
    )
    assert "sre" in error.reason
    assert "approver rule 1" in error.reason
    payment = ask(team, "payments.transfer", "low", "bob")
    error = assert_refused(
        team, payment.request.id, lambda: answer(team, payment, PEOPLE["alice"], "approve")
    )
    assert "finance" in error.reason
    assert "approver rule 2" in error.reason
    other = ask(team, "files.write", "low", "bob", name="write")
    error = assert_refused(
        team, other.request.id, lambda: answer(team, other, PEOPLE["carol"], "approve")
    )
    assert "the default approvers" in error.reason
    assert "dev" in error.reason
    assert "sre" in error.reason


def test_the_channel_actor_replaces_the_one_in_the_decision_body(
    team: ApprovalAuthority,
) -> None:
    requested = ask(team, "process.exec", "high", "alice")
    claims_to_be_sam = build_decision(
        requested,
        decision="approve",
        actor=PEOPLE["sam"].actor,
        decided_at=requested.request.created_at,
    )
    assert_refused(
        team,
        requested.request.id,
        lambda: team.decide(claims_to_be_sam.to_json(), actor=PEOPLE["alice"]),
    )


def test_a_refused_decision_is_refused_again_after_a_recorded_one(
    team: ApprovalAuthority,
) -> None:
    requested = ask(team, "process.exec", "high", "alice")
    assert answer(team, requested, PEOPLE["sam"], "approve").resolution.outcome == "approved"
    tip = team.ledger.audit_tip()
    with pytest.raises(ForbiddenError):
        answer(team, requested, PEOPLE["bob"], "deny")
    with pytest.raises(ForbiddenError):
        team.cancel(requested.request.id, actor=PEOPLE["mallory"])
    assert team.ledger.audit_tip() == tip
    resolution = team.get_resolution(requested.request.id)
    assert resolution is not None
    assert resolution.resolution.outcome == "approved"


def test_trusted_callers_are_not_checked(team: ApprovalAuthority) -> None:
    requested = ask(team, "process.exec", "high", "alice")
    decided = build_decision(
        requested,
        decision="approve",
        actor=PEOPLE["mallory"].actor,
        decided_at=requested.request.created_at,
    )
    assert team.decide(decided.to_json()).resolution.outcome == "approved"
    other = ask(team, "process.exec", "high", "alice")
    assert team.cancel(other.request.id).resolution.outcome == "cancelled"


# who may view each request: requester, approver, auditor, stranger
VIEWS: list[tuple[str, str, str | None, dict[str, bool]]] = [
    (
        "process.exec",
        "high",
        "alice",
        {
            "alice": True,
            "sam": True,
            "erin": True,
            "bob": False,
            "carol": False,
            "mallory": False,
        },
    ),
    (
        "process.exec",
        "high",
        "bob",
        {"bob": True, "alice": True, "erin": True, "carol": False, "mallory": False},
    ),
    (
        "payments.transfer",
        "medium",
        "bob",
        {
            "bob": True,
            "carol": True,
            "dave": True,
            "erin": True,
            "alice": False,
            "mallory": False,
        },
    ),
    (
        "process.exec",
        "low",
        None,
        {"alice": True, "bob": True, "erin": True, "carol": False, "mallory": False},
    ),
]


@pytest.mark.parametrize(("kind", "risk", "requester", "expected"), VIEWS)
def test_who_may_view_a_request(
    team: ApprovalAuthority,
    kind: str,
    risk: str,
    requester: str | None,
    expected: dict[str, bool],
) -> None:
    requested = ask(team, kind, risk, requester)
    for who, allowed in expected.items():
        assert team.may_view(PEOPLE[who], requested.request.id) is allowed, who
        if allowed:
            team.require(PEOPLE[who], "view", requested.request.id)
        else:
            with pytest.raises(ForbiddenError) as info:
                team.require(PEOPLE[who], "view", requested.request.id)
            assert info.value.code == "aais.forbidden"
    assert team.may_view(None, requested.request.id) is True
    assert team.may_view(person("root", administrator=True), requested.request.id) is True
    assert team.may_view(PEOPLE["alice"], "apr_unknown") is False


def test_requesters_see_their_own_only_when_the_policy_says_so(
    ledger: Ledger, clock: FakeClock
) -> None:
    private = AccessPolicy.from_mapping(
        {**TEAM, "requesters": {"view_own": False, "cancel_own": False}}
    )
    authority = ApprovalAuthority(ledger, clock=clock, authorizer=private)
    requested = ask(authority, "payments.transfer", "medium", "bob")
    assert authority.may_view(PEOPLE["bob"], requested.request.id) is False
    assert authority.may_view(PEOPLE["carol"], requested.request.id) is True
    assert_refused(
        authority,
        requested.request.id,
        lambda: authority.cancel(requested.request.id, actor=PEOPLE["bob"]),
    )
    assert_refused(
        authority,
        requested.request.id,
        lambda: answer(authority, requested, PEOPLE["bob"], "cancel"),
    )


def test_who_may_view_a_thread(team: ApprovalAuthority) -> None:
    ask(team, "payments.transfer", "medium", "bob", thread_id="t-pay")
    # bob's run raised it (he reads the thread), carol decides it (she follows the
    # request only), erin audits (she reads every thread)
    expected = {
        "bob": (True, True),
        "carol": (True, False),
        "erin": (True, True),
        "alice": (False, False),
        "mallory": (False, False),
    }
    for who, (visible, content) in expected.items():
        access = team.thread_access(PEOPLE[who], "t-pay")
        assert (access.visible, access.content) == (visible, content), who
    assert team.thread_access(None, "t-pay").trusted
    assert team.thread_access(person("root", administrator=True), "t-pay").trusted
    # a thread with nothing on it yet is nobody's
    assert team.thread_access(PEOPLE["mallory"], "t-new").visible


def test_the_snapshot_shows_each_person_what_they_may_view(team: ApprovalAuthority) -> None:
    requests = {
        "exec-alice": ask(team, "process.exec", "high", "alice"),
        "pay-bob": ask(team, "payments.transfer", "medium", "bob"),
        "low-none": ask(team, "process.exec", "low", None),
    }
    expected = {
        "alice": {"exec-alice", "low-none"},
        "sam": {"exec-alice", "low-none"},
        "bob": {"pay-bob", "low-none"},
        "carol": {"pay-bob"},
        "erin": {"exec-alice", "pay-bob", "low-none"},
        "mallory": set(),
    }
    snapshot = team.snapshot()
    for who, labels in expected.items():
        shown = visible_snapshot(team, snapshot, PEOPLE[who])
        ids = {request.id for request in shown.snapshot.pending}
        assert ids == {requests[label].request.id for label in labels}, who
        text = json.dumps(shown.to_json())
        for label, requested in requests.items():
            assert (requested.request.id in text) is (label in labels), (who, label)
    assert len(visible_snapshot(team, snapshot, None).snapshot.pending) == 3


def test_the_snapshot_agrees_with_may_view_for_a_requester_named_only_in_context(
    team: ApprovalAuthority, clock: FakeClock
) -> None:
    requested = build_request(
        act("payments.transfer"),
        origin={"harness": "tests", "session_id": "s-1"},
        risk={"level": "medium", "reasons": ["x"]},
        choices=CHOICES,
        created_at=clock(),
    )
    team.add(requested, context={"requester": "bob"})
    assert team.may_view(PEOPLE["bob"], requested.request.id) is True
    shown = visible_snapshot(team, team.snapshot(), PEOPLE["bob"])
    assert [request.id for request in shown.snapshot.pending] == [requested.request.id]


def approved_with_grant(authority: ApprovalAuthority) -> tuple[ApprovalRequested, str]:
    """A high-risk deploy alice asked for, approved by sam for the session: its grant."""
    requested = ask(authority, "process.exec", "high", "alice")
    resolved = answer(authority, requested, PEOPLE["sam"], "approve", scope="session")
    assert resolved.resolution.outcome == "approved"
    (grant,) = authority.list_grants()
    return requested, grant.grant_id


def assert_grant_live(authority: ApprovalAuthority, grant_id: str) -> None:
    """The grant covers alice's next deploy (it was made for her request), never bob's."""
    assert grant_id in {grant.grant_id for grant in authority.list_grants()}
    origin = {"harness": "tests", "session_id": "s-1"}
    found = authority.match_grant(act(), origin, requester="alice")
    assert found is not None
    assert found.grant_id == grant_id
    assert authority.match_grant(act(), origin, requester="bob") is None


@pytest.mark.parametrize("who", ["bob", "carol", "erin", "mallory"])
def test_a_grant_is_revoked_only_by_who_may_decide_its_request(
    team: ApprovalAuthority, who: str
) -> None:
    _, grant_id = approved_with_grant(team)
    tip = team.ledger.audit_tip()
    with pytest.raises(ForbiddenError) as info:
        team.revoke_grant(grant_id, actor=PEOPLE[who])
    assert info.value.code == "aais.forbidden"
    assert info.value.verb == "revoke"
    assert SECRET not in info.value.reason
    assert team.ledger.audit_tip() == tip
    assert_grant_live(team, grant_id)
    # alice may: she is an SRE, and revoking is no approval of her own request
    assert team.revoke_grant(grant_id, actor=PEOPLE["alice"]) is True
    assert team.list_grants() == []
    assert team.match_grant(act(), {"harness": "tests", "session_id": "s-1"}) is None


def test_revoke_groups_may_revoke_any_grant(ledger: Ledger, clock: FakeClock) -> None:
    policy = AccessPolicy.from_mapping({**TEAM, "grants": {"revoke_groups": ["secops"]}})
    authority = ApprovalAuthority(ledger, clock=clock, authorizer=policy)
    _, grant_id = approved_with_grant(authority)
    with pytest.raises(ForbiddenError):
        authority.revoke_grant(grant_id, actor=PEOPLE["bob"])
    assert_grant_live(authority, grant_id)
    assert authority.revoke_grant(grant_id, actor=person("sec", "secops")) is True
    assert authority.list_grants() == []


@pytest.mark.parametrize(
    ("who", "views"), [("bob", False), ("carol", False), ("erin", True), ("mallory", False)]
)
def test_a_grant_one_may_not_view_is_refused_as_an_unknown_one_is(
    team: ApprovalAuthority, who: str, views: bool
) -> None:
    """No existence oracle: whoever may not even view a grant's request gets, on revoking
    it, the very refusal an unknown grant gets; whoever may view it learns why not."""
    requested, grant_id = approved_with_grant(team)
    with pytest.raises(ForbiddenError) as unknown:
        team.revoke_grant("grant_unknown", actor=PEOPLE[who])
    with pytest.raises(ForbiddenError) as existing:
        team.revoke_grant(grant_id, actor=PEOPLE[who])
    assert unknown.value.reason == GRANT_NOT_REVOCABLE
    assert team.may_view(PEOPLE[who], requested.request.id) is views
    if views:  # erin (audit) sees the grant: she learns why she may not revoke it
        assert existing.value.reason != GRANT_NOT_REVOCABLE
    else:
        assert (existing.value.verb, existing.value.reason) == ("revoke", GRANT_NOT_REVOCABLE)
    assert_grant_live(team, grant_id)


def test_an_unknown_grant_is_refused_to_a_person(team: ApprovalAuthority) -> None:
    with pytest.raises(ForbiddenError):
        team.revoke_grant("grant_unknown", actor=PEOPLE["alice"])
    assert team.revoke_grant("grant_unknown") is False


@pytest.mark.parametrize("who", ["bob", "carol", "erin", "mallory"])
def test_reconcile_is_refused_to_who_may_not_decide(team: ApprovalAuthority, who: str) -> None:
    requested, _ = approved_with_grant(team)
    request_id = requested.request.id
    tip = team.ledger.audit_tip()
    with pytest.raises(ForbiddenError) as info:
        team.require(PEOPLE[who], "reconcile", request_id)
    assert info.value.code == "aais.forbidden"
    assert info.value.verb == "reconcile"
    with pytest.raises(ForbiddenError):
        reconcile_execution(team, request_id, "done", actor=PEOPLE[who])
    with pytest.raises(ForbiddenError):
        reconcile_execution(team, request_id, "retry", actor=PEOPLE[who].actor)
    assert team.ledger.audit_tip() == tip
    assert team.execution(request_id) is None
    team.require(PEOPLE["sam"], "reconcile", request_id)
    team.require(PEOPLE["alice"], "reconcile", request_id)


def test_reconcile_groups_replace_the_deciders(ledger: Ledger, clock: FakeClock) -> None:
    policy = AccessPolicy.from_mapping({**TEAM, "reconcile": {"groups": ["oncall"]}})
    authority = ApprovalAuthority(ledger, clock=clock, authorizer=policy)
    requested, _ = approved_with_grant(authority)
    request_id = requested.request.id
    with pytest.raises(ForbiddenError):
        authority.require(PEOPLE["sam"], "reconcile", request_id)
    with pytest.raises(ForbiddenError):
        reconcile_execution(authority, request_id, "done", actor=PEOPLE["sam"])
    authority.require(person("pat", "oncall"), "reconcile", request_id)


ADMINISTERED: dict[str, Any] = {
    **TEAM,
    "administrators": ["root"],
    "administrator_groups": ["admins"],
    "requesters": {"view_own": False, "cancel_own": False},
}


@pytest.mark.parametrize(
    "admin",
    [
        person("root"),
        person("una", "admins"),
        person("alice", "sre", administrator=True),
        person("zed", administrator=True),
    ],
    ids=["administrators", "administrator_groups", "flag-sre", "flag-nobody"],
)
def test_administrators_may_do_everything(
    ledger: Ledger, clock: FakeClock, admin: Principal
) -> None:
    authority = ApprovalAuthority(
        ledger, clock=clock, authorizer=AccessPolicy.from_mapping(ADMINISTERED)
    )
    # their own high-risk request: separation of duties does not bind them
    own = ask(authority, "process.exec", "critical", admin.id)
    assert authority.may_view(admin, own.request.id) is True
    resolved = answer(authority, own, admin, "approve", scope="session")
    assert resolved.resolution.outcome == "approved"
    authority.require(admin, "reconcile", own.request.id)
    assert reconcile_execution(authority, own.request.id, "done", actor=admin) is None
    (grant,) = authority.list_grants()
    assert authority.revoke_grant(grant.grant_id, actor=admin) is True
    # anyone's request, of any rule
    payment = ask(authority, "payments.refund", "critical", "carol", thread_id="t-1")
    assert authority.may_view(admin, payment.request.id) is True
    access = authority.thread_access(admin, "t-1")
    assert access.content and not access.hidden
    assert authority.cancel(payment.request.id, actor=admin).resolution.outcome == "cancelled"
    other = ask(authority, "payments.transfer", "low", "carol")
    assert answer(authority, other, admin, "deny").resolution.outcome == "denied"
    shown = visible_snapshot(authority, authority.snapshot(), admin)
    assert shown.snapshot.pending == authority.snapshot().snapshot.pending


# -- property: every refusal records nothing, every view matches may_view --------------

KINDS = ["process.exec", "payments.transfer", "files.read"]
ACTION_NAMES = ["deploy", "transfer", "read"]
GROUPS = ["sre", "dev", "finance", "audit", "admins"]
RISKS = ["low", "medium", "high", "critical"]
IDS = ["alice", "bob", "carol", "dave"]


def subset(options: list[str], min_size: int = 0, max_size: int = 3) -> st.SearchStrategy[Any]:
    return st.lists(st.sampled_from(options), min_size=min_size, max_size=max_size, unique=True)


@st.composite
def approver_rules(draw: st.DrawFn) -> dict[str, Any]:
    rule: dict[str, Any] = {}
    if draw(st.booleans()):
        rule["kinds"] = draw(subset(["process.exec", "payments.*", "files.*", "*"], 1))
    if draw(st.booleans()):
        rule["names"] = draw(subset(["deploy*", "transfer", "read", "x*"], 1))
    if draw(st.booleans()):
        rule["risk"] = draw(subset(RISKS, 1, 4))
    groups = draw(subset([*GROUPS, "*"]))
    users = draw(subset(IDS, 0, 2))
    if not groups and not users:
        groups = [draw(st.sampled_from(GROUPS))]
    if groups:
        rule["groups"] = groups
    if users:
        rule["users"] = users
    return rule


@st.composite
def policies(draw: st.DrawFn) -> dict[str, Any]:
    document: dict[str, Any] = {
        "approvers": draw(st.lists(approver_rules(), max_size=3)),
        "default_approvers": draw(subset([*GROUPS, "*"])),
        "requesters": {"view_own": draw(st.booleans()), "cancel_own": draw(st.booleans())},
    }
    threshold = draw(st.none() | st.sampled_from(RISKS))
    if threshold is not None:
        document["separation_of_duties"] = {"from_risk": threshold}
    if draw(st.booleans()):
        document["viewer_groups"] = draw(subset(GROUPS))
    if draw(st.booleans()):
        document["administrators"] = draw(subset(IDS, 0, 1))
    if draw(st.booleans()):
        document["administrator_groups"] = draw(subset(GROUPS, 0, 1))
    return document


principals = st.builds(
    lambda name, groups, administrator: person(name, *groups, administrator=administrator),
    st.sampled_from(IDS),
    subset(GROUPS),
    st.sampled_from([False, False, False, True]),
)

raised = st.tuples(
    st.sampled_from(KINDS),
    st.sampled_from(ACTION_NAMES),
    st.sampled_from(RISKS),
    st.none() | st.sampled_from(IDS),
)

OPS = ["approve", "deny", "cancel", "withdraw"]


@settings(max_examples=60, deadline=None)
@given(
    document=policies(),
    people=st.lists(principals, min_size=1, max_size=4),
    raises=st.lists(raised, min_size=1, max_size=4),
    tries=st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 3), st.sampled_from(OPS)), max_size=8
    ),
)
def test_property_refusals_record_nothing_and_views_match_may_view(
    document: dict[str, Any],
    people: list[Principal],
    raises: list[tuple[str, str, str, str | None]],
    tries: list[tuple[int, int, str]],
) -> None:
    policy = AccessPolicy.from_mapping(document)
    authority = ApprovalAuthority(
        InMemoryLedger(),
        clock=FakeClock(START),
        authorizer=policy,
        limits=RequestLimits.unbounded(),
    )
    requests = [
        ask(authority, kind, risk, requester, name=name) for kind, name, risk, requester in raises
    ]
    for who, which, op in tries:
        principal = people[who % len(people)]
        requested = requests[which % len(requests)]
        request_id = requested.request.id
        verb = "decide" if op in ("approve", "deny") else "cancel"
        decision = "cancel" if op == "withdraw" else op
        stored = authority.get_stored_request(request_id)
        assert stored is not None
        resource = authority.resource_of(stored, requested.request, decision=decision)
        permission = authority.permits(principal, verb, resource)  # type: ignore[arg-type]
        # an independent look at two rules the policy must keep
        administers = (
            principal.administrator
            or principal.id in policy.administrators
            or not policy.administrator_groups.isdisjoint(principal.groups)
        )
        if administers:
            assert permission.allowed
        threshold = policy.separation_from_risk
        if (
            not administers
            and op == "approve"
            and threshold is not None
            and resource.requester == principal.id
            and RISKS.index(requested.request.risk.level) >= RISKS.index(threshold)
        ):
            assert not permission.allowed
        call = attempt(authority, requested, principal, op)
        before = authority.get_resolution(request_id)
        tip = authority.ledger.audit_tip()
        event(f"{verb} {'allowed' if permission.allowed else 'refused'}")
        if not permission.allowed:
            with pytest.raises(ForbiddenError) as info:
                call()
            assert info.value.code == "aais.forbidden"
            assert SECRET not in info.value.reason
            assert authority.ledger.audit_tip() == tip
            after = authority.ledger.get_request(request_id)
            assert after is not None
            assert after.status == stored.status
            assert authority.get_resolution(request_id) == before
            continue
        resolved = call()
        if stored.status == "pending":
            assert resolved.resolution.outcome == OUTCOMES[decision]
            assert authority.ledger.audit_tip() != tip
            after = authority.ledger.get_request(request_id)
            assert after is not None
            assert after.status == "resolved"
    snapshot = authority.snapshot()
    pending = {request.id for request in snapshot.snapshot.pending}
    everyone = [*people, person("stranger"), person("auditor", "audit")]
    for principal in everyone:
        shown = visible_snapshot(authority, snapshot, principal)
        ids = {request.id for request in shown.snapshot.pending}
        assert ids == {rid for rid in pending if authority.may_view(principal, rid)}
        text = json.dumps(shown.to_json())
        for requested in requests:
            if not authority.may_view(principal, requested.request.id):
                assert requested.request.id not in text


def test_the_default_rule_is_described_as_such() -> None:
    assert ApproverRule(frozenset({"*"})).describe() == "the default approvers"
    assert ApproverRule(frozenset({"sre"}), index=2).describe() == "approver rule 3"

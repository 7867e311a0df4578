"""The policy hook: allow/deny/ask on new actions, objections to approvals, constraint text."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from aais_langgraph.authority import (
    ApprovalAuthority,
    PolicyVerdict,
    explain_constraints,
)
from aais_langgraph.ledger import Ledger
from aais_langgraph.protocol import Action, Decision, Origin, Request, Risk

from .support import FakeClock, action, assert_spec_valid, decision, new_request, origin

ALICE = {"id": "alice", "type": "human", "display_name": "Alice"}
MALLORY = {"id": "mallory", "type": "human"}


@dataclass
class ScriptedPolicy:
    """A policy whose answers the test sets, recording what it was asked."""

    verdict: PolicyVerdict = field(default_factory=PolicyVerdict)
    objection: str | None = None
    asked: list[str] = field(default_factory=list)

    def on_request(self, action: Action, origin: Origin) -> PolicyVerdict:
        return self.verdict

    def on_decision(self, request: Request, decision: Decision) -> str | None:
        self.asked.append(decision.id)
        return self.objection


@pytest.fixture
def policy() -> ScriptedPolicy:
    return ScriptedPolicy()


@pytest.fixture
def governed(ledger: Ledger, clock: FakeClock, policy: ScriptedPolicy) -> ApprovalAuthority:
    return ApprovalAuthority(ledger, clock=clock, policy=policy)


def test_allow_verdict_approves_without_asking(
    governed: ApprovalAuthority, policy: ScriptedPolicy
) -> None:
    policy.verdict = PolicyVerdict("allow", reason="Read-only checks are allowed.")
    resolved = governed.screen(action(), origin=origin()).resolved
    assert resolved is not None
    assert resolved.resolution.outcome == "approved"
    assert resolved.resolution.message == "Read-only checks are allowed."
    assert resolved.resolution.extensions == {"aais-langgraph.org/policy": {"verdict": "approved"}}
    assert_spec_valid(resolved.to_json())


def test_deny_verdict_denies_without_asking(
    governed: ApprovalAuthority, policy: ScriptedPolicy
) -> None:
    policy.verdict = PolicyVerdict("deny")
    resolved = governed.screen(action("rm -rf /"), origin=origin()).resolved
    assert resolved is not None
    assert resolved.resolution.outcome == "denied"
    assert resolved.resolution.message == "Denied by policy."
    assert_spec_valid(resolved.to_json())


def test_policy_verdict_is_audited(governed: ApprovalAuthority, policy: ScriptedPolicy) -> None:
    policy.verdict = PolicyVerdict("deny")
    resolved = governed.screen(action(), origin=origin()).resolved
    assert resolved is not None
    last = governed.ledger.audit_entries()[-1]
    assert (last.kind, last.payload["outcome"]) == ("resolved", "denied")
    assert last.payload["resolution_id"] == resolved.resolution.id
    assert governed.verify_audit().ok


def test_policy_is_consulted_before_grants(
    governed: ApprovalAuthority, policy: ScriptedPolicy
) -> None:
    requested = new_request(governed)
    governed.decide(decision(requested, scope="session"))
    assert governed.match_grant(action("node --check b.js"), origin()) is not None
    policy.verdict = PolicyVerdict("deny")
    resolved = governed.screen(action("node --check b.js"), origin=origin()).resolved
    assert resolved is not None
    assert resolved.resolution.outcome == "denied"


def test_ask_verdict_carries_risk_and_choices(
    governed: ApprovalAuthority, policy: ScriptedPolicy
) -> None:
    risk = Risk(level="high", reasons=["Deletes files"])
    policy.verdict = PolicyVerdict("ask", risk=risk)
    screening = governed.screen(action(), origin=origin())
    assert screening.resolved is None
    assert screening.verdict.risk == risk


def test_objection_makes_approval_invalid_and_keeps_request_pending(
    governed: ApprovalAuthority, policy: ScriptedPolicy
) -> None:
    requested = new_request(governed)
    policy.objection = "Deploys are frozen until Monday."
    refused = governed.decide(decision(requested))
    assert refused.resolution.outcome == "invalid"
    assert refused.resolution.message == "Deploys are frozen until Monday."
    assert_spec_valid(refused.to_json())
    assert governed.get_resolution(requested.request.id) is None
    policy.objection = None
    assert governed.decide(decision(requested)).resolution.outcome == "approved"


def test_empty_objection_still_refuses(governed: ApprovalAuthority, policy: ScriptedPolicy) -> None:
    requested = new_request(governed)
    policy.objection = ""
    refused = governed.decide(decision(requested))
    assert (refused.resolution.outcome, refused.resolution.message) == (
        "invalid",
        "Refused by policy.",
    )


def test_the_policy_sees_a_denial_and_its_objection_records_nothing(
    governed: ApprovalAuthority, policy: ScriptedPolicy
) -> None:
    requested = new_request(governed)
    policy.objection = "Only the owner may decide."
    denied = decision(requested, "deny")
    answered = governed.decide(denied)
    assert answered.resolution.outcome == "invalid"
    assert policy.asked == [denied["decision"]["id"]]
    assert governed.get_resolution(requested.request.id) is None
    policy.objection = None
    assert governed.decide(decision(requested, "deny")).resolution.outcome == "denied"


def test_the_policy_sees_a_cancel_by_its_actor(
    governed: ApprovalAuthority, policy: ScriptedPolicy
) -> None:
    requested = new_request(governed)
    policy.objection = "Only the owner may cancel."
    refused = governed.cancel(requested.request.id, actor=MALLORY)
    assert refused.resolution.outcome == "invalid" and len(policy.asked) == 1
    assert governed.get_resolution(requested.request.id) is None
    policy.objection = None
    cancelled = governed.cancel(requested.request.id, actor=ALICE)
    assert cancelled.resolution.outcome == "cancelled"
    by = cancelled.resolution.extensions["aais-langgraph.org/resolved_by"]
    assert by["id"] == "alice" and by["type"] == "human"
    resolved_entries = [e for e in governed.ledger.audit_entries() if e.kind == "resolved"]
    assert resolved_entries[-1].payload["actor_id"] == "alice"
    assert governed.verify_audit().ok


def test_every_resolution_without_a_decision_names_who_or_what_made_it(
    governed: ApprovalAuthority, clock: FakeClock
) -> None:
    by_sweep = new_request(governed)
    clock.advance(3600)
    by_run = new_request(governed)
    quiet = new_request(governed)
    [expired] = governed.expire_due()
    assert expired.resolution.request_id == by_sweep.request.id
    stale = governed.supersede(by_run.request.id)
    cancelled = governed.cancel(quiet.request.id)
    names = {
        resolved.resolution.outcome: resolved.resolution.extensions[
            "aais-langgraph.org/resolved_by"
        ]["id"]
        for resolved in (expired, stale, cancelled)
    }
    assert names == {
        "expired": "aais-langgraph.expiry",
        "stale": "aais-langgraph.superseded",
        "cancelled": "aais-langgraph.runtime",
    }


@pytest.mark.parametrize(
    ("changes", "outcome"),
    [
        ({"action_digest": "sha256:" + "0" * 64}, "stale"),
        ({"scope": "persistent"}, "invalid"),
    ],
    ids=["forged_digest", "unoffered_scope"],
)
def test_policy_sees_only_decisions_that_passed_every_other_check(
    governed: ApprovalAuthority, policy: ScriptedPolicy, changes: dict[str, Any], outcome: str
) -> None:
    requested = new_request(governed)
    policy.objection = "Refused."
    assert governed.decide(decision(requested, **changes)).resolution.outcome == outcome
    assert policy.asked == []


def test_policy_is_not_asked_about_expired_approval(
    governed: ApprovalAuthority, policy: ScriptedPolicy, clock: FakeClock
) -> None:
    requested = new_request(governed, expires_in=60)
    policy.objection = "Refused."
    clock.advance(60)
    assert governed.decide(decision(requested)).resolution.outcome == "expired"
    assert policy.asked == []


def test_explain_constraints_for_the_conformance_session_choice() -> None:
    lines = explain_constraints({"action_name": "shell.exec", "command_prefix": "node --check "})
    assert lines == [
        "only the action named 'shell.exec'",
        "argument 'command' starting with 'node --check' as whole words, with no shell "
        "operators, substitutions, redirections, globs or newlines",
    ]


def test_explain_constraints_names_every_known_key() -> None:
    lines = explain_constraints(
        {
            "action_kind": "process.exec",
            "arguments": {"mode": "dry-run"},
            "argument_prefixes": {"path": "/tmp/"},
            "resource_prefix": "file:///w/",
            "working_directory": "/w",
            "expires_at": "2026-08-30T19:00:00Z",
            "expires_in_seconds": 600,
        }
    )
    assert lines == [
        "only actions of kind 'process.exec'",
        "argument 'mode' exactly equal to 'dry-run'",
        "argument 'path' at or under '/tmp'",
        "resource at or under 'file:///w'",
        "working directory exactly '/w'",
        "until 2026-08-30T19:00:00Z",
        "for 600 seconds after approval",
    ]


def test_explain_constraints_warns_about_unknown_keys() -> None:
    lines = explain_constraints({"command_prefix": "ls", "max_cost": 1, "budget": 2})
    assert (
        lines[-1] == "unrecognised constraint(s) 'budget', 'max_cost': the grant will never apply"
    )


def test_explain_constraints_warns_about_malformed_values() -> None:
    lines = explain_constraints({"argument_prefixes": "ls", "expires_in_seconds": -1})
    assert lines[-1] == (
        "malformed constraint(s) 'argument_prefixes', 'expires_in_seconds': "
        "the grant will never apply"
    )

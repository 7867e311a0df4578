"""The six shared AAIS conformance cases, run against the authority on every ledger backend."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from aais_langgraph.authority import ApprovalAuthority
from aais_langgraph.ledger import Ledger
from aais_langgraph.protocol import ApprovalResolved, action_digest, parse_timestamp

from .support import assert_spec_valid, load_conformance

SUITE = load_conformance("cases.json")
REQUEST = load_conformance("shell-approval.json")
DECISION = load_conformance("approve-once.json")
CASES = {case["name"]: case for case in SUITE["cases"]}


def test_suite_names_the_six_shared_cases() -> None:
    assert set(CASES) == {
        "approve_once",
        "expired",
        "changed_action",
        "unoffered_scope",
        "identical_replay",
        "conflicting_replay",
    }


def test_fixture_digest_is_the_suite_digest() -> None:
    assert action_digest(REQUEST["request"]["action"]) == SUITE["action_digest"]
    assert REQUEST["request"]["action_digest"] == SUITE["action_digest"]
    assert DECISION["decision"]["action_digest"] == SUITE["action_digest"]


def _other_offered_decision(kind: str) -> str:
    """An offered decision kind different from ``kind`` (once scope)."""
    offered = {c["decision"] for c in REQUEST["request"]["choices"] if c["scope"] == "once"}
    return sorted(offered - {kind})[0]


def run_case(ledger: Ledger, case: dict[str, Any]) -> tuple[ApprovalResolved, ApprovalResolved]:
    """Apply the case's mutation; return (first answer, answer the case is about)."""
    moment = parse_timestamp(case.get("now", DECISION["decision"]["decided_at"]))
    authority = ApprovalAuthority(ledger, clock=lambda: moment)
    authority.add(copy.deepcopy(REQUEST))
    decided = copy.deepcopy(DECISION)
    current_action = None
    replay = case["outcome"] in ("same_resolution", "conflict")
    for mutation in filter(None, case.get("mutation", "").split("+")):
        path, _, value = mutation.partition("=")
        if path == "current_action.summary":
            current_action = copy.deepcopy(REQUEST["request"]["action"])
            current_action["summary"] += " (changed)"
        elif path == "decision.id":
            decided["decision"]["id"] = value or decided["decision"]["id"] + "_other"
        elif path == "decision.decision":
            decided["decision"]["decision"] = value or _other_offered_decision(
                decided["decision"]["decision"]
            )
        elif path == "decision.scope":
            decided["decision"]["scope"] = value
        else:
            raise AssertionError(f"unknown mutation {mutation}")
    if replay:
        first = authority.decide(copy.deepcopy(DECISION))
        return first, authority.decide(decided)
    answer = authority.decide(decided, current_action=current_action)
    return answer, answer


@pytest.mark.parametrize("name", sorted(CASES))
def test_conformance_case_resolves_as_specified(ledger: Ledger, name: str) -> None:
    case = CASES[name]
    first, answer = run_case(ledger, case)
    assert_spec_valid(answer.to_json())
    assert answer.resolution.request_id == REQUEST["request"]["id"]
    assert answer.resolution.action_digest == SUITE["action_digest"]
    expected = case["outcome"]
    if expected == "same_resolution":
        assert answer == first
        assert answer.resolution.outcome == "approved"
    else:
        assert answer.resolution.outcome == expected


def test_approve_once_is_recorded_with_its_decision(ledger: Ledger) -> None:
    answer, _ = run_case(ledger, CASES["approve_once"])
    authority = ApprovalAuthority(ledger)
    assert authority.get_resolution(REQUEST["request"]["id"]) == answer
    assert answer.resolution.decision_id == DECISION["decision"]["id"]
    assert answer.resolution.effective_scope == "once"


@pytest.mark.parametrize("name", ["expired", "changed_action"])
def test_terminal_refusal_is_recorded(ledger: Ledger, name: str) -> None:
    answer, _ = run_case(ledger, CASES[name])
    recorded = ApprovalAuthority(ledger).get_resolution(REQUEST["request"]["id"])
    assert recorded == answer


def test_unoffered_scope_is_not_recorded_and_request_stays_pending(ledger: Ledger) -> None:
    run_case(ledger, CASES["unoffered_scope"])
    authority = ApprovalAuthority(
        ledger, clock=lambda: parse_timestamp(CASES["approve_once"]["now"])
    )
    assert authority.get_resolution(REQUEST["request"]["id"]) is None
    assert authority.decide(copy.deepcopy(DECISION)).resolution.outcome == "approved"


def test_conflicting_replay_leaves_the_recorded_resolution_unchanged(ledger: Ledger) -> None:
    first, conflict = run_case(ledger, CASES["conflicting_replay"])
    assert conflict.resolution.outcome == "conflict"
    assert ApprovalAuthority(ledger).get_resolution(REQUEST["request"]["id"]) == first

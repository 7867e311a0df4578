"""Grants from approved session/persistent choices: what they cover, for how long, revocation."""

from __future__ import annotations

import json
from typing import Any

import pytest

from aais_langgraph.authority import ApprovalAuthority, constraints_match
from aais_langgraph.ledger import Grant
from aais_langgraph.protocol import AAISValidationError, Action

from .support import FakeClock, action, assert_spec_valid, decision, new_request, origin


def choices(scope: str, constraints: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"decision": "approve", "scope": "once", "label": "Once"},
        {
            "decision": "approve",
            "scope": scope,
            "label": "Standing",
            "scope_constraints": constraints,
        },
        {"decision": "deny", "scope": "once", "label": "Deny"},
    ]


def grant_for(
    authority: ApprovalAuthority,
    constraints: dict[str, Any],
    *,
    scope: str = "session",
    session_id: str = "s-1",
    **request_extra: Any,
) -> Grant:
    """Approve a request in ``scope`` offering ``constraints``; return the recorded grant."""
    requested = new_request(
        authority, session_id=session_id, choices=choices(scope, constraints), **request_extra
    )
    resolved = authority.decide(decision(requested, scope=scope))
    assert resolved.resolution.outcome == "approved"
    assert resolved.resolution.effective_scope == scope
    (grant,) = [g for g in authority.list_grants() if g.request_id == requested.request.id]
    return grant


def covers(authority: ApprovalAuthority, session_id: str = "s-1", **action_args: Any) -> bool:
    command = action_args.pop("command", "node --check other.js")
    return authority.match_grant(action(command, **action_args), origin(session_id)) is not None


PREFIX = {"command_prefix": "node --check "}


def test_session_grant_matches_same_session_within_constraints(
    authority: ApprovalAuthority,
) -> None:
    grant = grant_for(authority, PREFIX)
    assert grant.scope == "session"
    assert grant.action_name == "shell.exec"
    assert authority.match_grant(action("node --check other.js"), origin("s-1")) == grant


def test_session_grant_does_not_match_another_session(authority: ApprovalAuthority) -> None:
    grant_for(authority, PREFIX)
    assert not covers(authority, session_id="s-2")


def test_session_grant_does_not_match_outside_command_prefix(authority: ApprovalAuthority) -> None:
    grant_for(authority, PREFIX)
    assert not covers(authority, command="rm -rf /")
    assert not covers(authority, command="node --checkout")


def test_grant_does_not_match_another_action_name(authority: ApprovalAuthority) -> None:
    grant_for(authority, PREFIX)
    other = {**action("node --check other.js"), "name": "shell.exec_root"}
    assert authority.match_grant(other, origin()) is None


def test_arguments_constraint_needs_equal_json_values(authority: ApprovalAuthority) -> None:
    grant_for(authority, {"arguments": {"dry_run": True, "retries": 1}})
    assert covers(authority, arguments={"dry_run": True, "retries": 1})
    assert not covers(authority, arguments={"dry_run": False, "retries": 1})
    assert not covers(authority, arguments={"dry_run": 1, "retries": 1})
    assert not covers(authority, arguments={"dry_run": True, "retries": True})
    assert not covers(authority, arguments={"retries": 1})


def test_argument_prefixes_constraint_needs_string_with_prefix(
    authority: ApprovalAuthority,
) -> None:
    grant_for(authority, {"argument_prefixes": {"path": "/tmp/"}})
    assert covers(authority, arguments={"path": "/tmp/build"})
    assert not covers(authority, arguments={"path": "/etc/passwd"})
    assert not covers(authority, arguments={"path": ["/tmp/x"]})
    assert not covers(authority)


def test_command_prefix_and_argument_prefixes_must_both_hold(authority: ApprovalAuthority) -> None:
    # A second constraint on ``command`` narrows the grant; it must never replace the first.
    grant_for(authority, {"command_prefix": "node --check ", "argument_prefixes": {"command": "/"}})
    assert not covers(authority, command="node --check other.js")
    assert not covers(authority, command="/bin/rm -rf /")


def test_resource_prefix_constraint(authority: ApprovalAuthority) -> None:
    grant_for(authority, {"resource_prefix": "file:///workspace/"}, resource="file:///workspace/a")
    assert covers(authority, resource="file:///workspace/b.js")
    assert not covers(authority, resource="file:///etc/shadow")
    assert not covers(authority)


def test_working_directory_constraint(authority: ApprovalAuthority) -> None:
    grant_for(authority, {"working_directory": "/workspace/example"})
    assert covers(authority, working_directory="/workspace/example")
    assert not covers(authority, working_directory="/workspace/example/..")


def test_expires_in_seconds_limits_grant_by_authority_clock(
    authority: ApprovalAuthority, clock: FakeClock
) -> None:
    grant_for(authority, {**PREFIX, "expires_in_seconds": 60})
    clock.advance(59.5)
    assert covers(authority)
    clock.advance(0.5)
    assert not covers(authority)


def test_expires_at_constraint_limits_grant(authority: ApprovalAuthority, clock: FakeClock) -> None:
    grant_for(authority, {**PREFIX, "expires_at": "2026-08-30T18:05:00Z"})
    clock.advance(299)
    assert covers(authority)
    clock.advance(1)
    assert not covers(authority)


def _matches(constraints: dict[str, Any]) -> bool:
    """The matcher on its own: a grant stored with these constraints (such a choice is
    refused when requested, so only the matcher can meet them) covers the action?"""
    return constraints_match(constraints, Action.from_data(action("node --check other.js")))


def test_unknown_constraint_key_never_matches(authority: ApprovalAuthority) -> None:
    assert _matches(PREFIX)
    assert not _matches({**PREFIX, "max_cost_usd": 5})
    with pytest.raises(AAISValidationError):
        grant_for(authority, {**PREFIX, "max_cost_usd": 5})


@pytest.mark.parametrize(
    "constraints",
    [
        {"argument_prefixes": "node"},
        {"argument_prefixes": {"command": 5}},
        {"arguments": ["command"]},
        {"resource_prefix": 7},
    ],
    ids=["prefixes_not_object", "prefix_not_string", "arguments_not_object", "resource_not_string"],
)
def test_malformed_constraint_value_never_matches(
    authority: ApprovalAuthority, constraints: dict[str, Any]
) -> None:
    assert not _matches(constraints)
    with pytest.raises(AAISValidationError):
        grant_for(authority, constraints)


@pytest.mark.parametrize("lifetime", [-5, 0, "60", True])
def test_a_malformed_grant_lifetime_never_matches_and_is_refused_when_requested(
    authority: ApprovalAuthority, lifetime: Any
) -> None:
    assert not _matches({**PREFIX, "expires_in_seconds": lifetime})
    with pytest.raises(AAISValidationError):
        grant_for(authority, {**PREFIX, "expires_in_seconds": lifetime})


def test_persistent_grant_matches_across_sessions_until_revoked(
    authority: ApprovalAuthority, clock: FakeClock
) -> None:
    grant = grant_for(authority, PREFIX, scope="persistent")
    clock.advance(86_400 * 30)
    assert covers(authority, session_id="s-1")
    assert covers(authority, session_id="s-other")
    assert authority.revoke_grant(grant.grant_id) is True
    assert not covers(authority, session_id="s-other")


def test_revoked_grant_no_longer_matches(authority: ApprovalAuthority) -> None:
    grant = grant_for(authority, PREFIX)
    assert authority.revoke_grant(grant.grant_id) is True
    assert not covers(authority)
    assert authority.list_grants() == []
    (revoked,) = authority.list_grants(include_revoked=True)
    assert revoked.revoked_at is not None


def test_revoking_twice_or_unknown_grant_returns_false(authority: ApprovalAuthority) -> None:
    grant = grant_for(authority, PREFIX)
    assert authority.revoke_grant(grant.grant_id) is True
    assert authority.revoke_grant(grant.grant_id) is False
    assert authority.revoke_grant("grant_unknown") is False


def test_once_approval_and_denial_record_no_grant(authority: ApprovalAuthority) -> None:
    once = new_request(authority)
    authority.decide(decision(once))
    denied = new_request(authority)
    authority.decide(decision(denied, "deny"))
    assert authority.list_grants(include_revoked=True) == []


def test_list_grants_by_session_includes_persistent_grants(authority: ApprovalAuthority) -> None:
    session = grant_for(authority, PREFIX, session_id="s-1")
    persistent = grant_for(authority, PREFIX, scope="persistent", session_id="s-1")
    assert {g.grant_id for g in authority.list_grants(session_id="s-1")} == {
        session.grant_id,
        persistent.grant_id,
    }
    assert [g.grant_id for g in authority.list_grants(session_id="s-2")] == [persistent.grant_id]


def test_screen_approves_by_grant_and_names_it(authority: ApprovalAuthority) -> None:
    grant = grant_for(authority, PREFIX)
    screening = authority.screen(action("node --check other.js"), origin=origin())
    resolved = screening.resolved
    assert resolved is not None
    assert resolved.resolution.outcome == "approved"
    named = resolved.resolution.extensions["aais-langgraph.org/grant"]  # type: ignore[index]
    assert named == {"grant_id": grant.grant_id, "request_id": grant.request_id, "scope": "session"}
    assert_spec_valid(resolved.to_json())


def test_screen_by_grant_is_audited(authority: ApprovalAuthority) -> None:
    grant = grant_for(authority, PREFIX)
    resolved = authority.screen(action("node --check other.js"), origin=origin()).resolved
    assert resolved is not None
    last = authority.ledger.audit_entries()[-1]
    assert last.kind == "resolved"
    assert last.payload["resolution_id"] == resolved.resolution.id
    assert last.payload["extensions"]["aais-langgraph.org/grant"]["grant_id"] == grant.grant_id
    assert authority.verify_audit().ok


def test_screen_by_grant_publishes_no_pending_request(authority: ApprovalAuthority) -> None:
    grant_for(authority, PREFIX)
    seq = authority.ledger.last_sequence()
    authority.screen(action("node --check other.js"), origin=origin())
    assert authority.ledger.last_sequence() == seq
    assert authority.ledger.list_pending() == []


def test_screen_without_grant_asks(authority: ApprovalAuthority) -> None:
    grant_for(authority, PREFIX)
    screening = authority.screen(action("rm -rf /"), origin=origin())
    assert screening.resolved is None
    assert screening.verdict.verdict == "ask"


def test_grant_audit_holds_constraints_only_as_digest(authority: ApprovalAuthority) -> None:
    grant_for(authority, {"arguments": {"token": "sk-live-abc"}})
    granted = [e for e in authority.ledger.audit_entries() if e.kind == "granted"]
    assert len(granted) == 1
    assert "sk-live" not in json.dumps(granted[0].payload)


@pytest.mark.parametrize(
    "constraints",
    [
        {"command_prefix": "<img src=x onerror=alert(1)>"},
        {"command_prefix": "ls; rm -rf /"},
        {"argument_prefixes": {"path": "relative/place"}},
        {"budget": 10},
    ],
    ids=["markup_prefix", "shell_text_prefix", "relative_path", "unknown_key"],
)
def test_a_standing_choice_that_can_never_apply_is_refused_when_requested(
    authority: ApprovalAuthority, constraints: dict[str, Any]
) -> None:
    choices = [
        {"decision": "approve", "scope": "once", "label": "Approve once"},
        {
            "decision": "approve",
            "scope": "session",
            "label": "Allow for the session",
            "scope_constraints": constraints,
        },
        {"decision": "deny", "scope": "once", "label": "Deny"},
    ]
    with pytest.raises(AAISValidationError) as refused:
        new_request(authority, choices=choices)
    assert refused.value.pointer.startswith("/request/choices/1/scope_constraints/")
    assert "<img" not in str(refused.value) and "rm -rf" not in str(refused.value)
    assert authority.ledger.list_pending() == []


def test_a_grant_covers_only_its_requester_and_its_request_is_read_once_per_process(
    ledger: Any, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = ApprovalAuthority(ledger, clock=clock)
    requested = writer.request(
        action("node --check script.js"),
        origin=origin("s-1"),
        choices=choices("session", PREFIX),
        context={"requester": "alice"},
    )
    writer.decide(decision(requested, scope="session"))
    reads: list[str] = []
    read = ledger.get_request

    def counted(request_id: str) -> Any:
        reads.append(request_id)
        return read(request_id)

    monkeypatch.setattr(ledger, "get_request", counted)
    other = ApprovalAuthority(ledger, clock=clock)  # another process: it wrote nothing
    for authority, process_reads in ((writer, 0), (other, 1)):
        reads.clear()
        for _ in range(3):
            assert authority.match_grant(
                action("node --check other.js"), origin("s-1"), requester="alice"
            )
            assert (
                authority.match_grant(
                    action("node --check other.js"), origin("s-1"), requester="bob"
                )
                is None
            )
        assert reads == [requested.request.id] * process_reads

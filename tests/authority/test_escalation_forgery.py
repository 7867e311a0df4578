"""A forged escalation grants nothing: the groups come from the policy's rule, and the
escalation counts only when its audit entry is vouched for (sealed with a key) and due.

The attacker can write the ledger's storage (``sqlite3`` on the file, ``psql`` on the
schema) but holds no key: they mark the request's escalation row ``done`` and append a
``follow_up`` entry whose chain hash they compute themselves, naming the groups they like.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from aais_langgraph import build_decision
from aais_langgraph.authority import AccessPolicy, ApprovalAuthority, ForbiddenError, Principal
from aais_langgraph.authority.cedar import CedarAuthorizer
from aais_langgraph.ledger import Ledger, LedgerIntegrityError, SqliteLedger
from aais_langgraph.ledger.follow_ups import escalation_id
from aais_langgraph.protocol import Actor, format_timestamp
from aais_langgraph.webhooks import FollowUpRunner, SubscriptionPlan
from hostile.report import record
from support.attacker import Storage
from support.pg_cluster import fresh_schema_url

KEY = b"k" * 32
CATEGORY = "tampering"
RULES = {
    "approvers": [
        {
            "names": ["pay*"],
            "groups": ["finance"],
            "escalate_after": 3600,
            "escalate_to": ["managers"],
        }
    ]
}
SCHEDULE = AccessPolicy.from_mapping(RULES)
PLAN = SubscriptionPlan([], policy=SCHEDULE)
CEDAR = """
permit (principal in Group::"finance", action in [Action::"view", Action::"decide"], resource);
permit (principal, action in [Action::"view", Action::"decide"], resource is Request)
when { resource.escalated_to.containsAny(principal.groups) };
"""
GUEST = Principal(Actor(id="gus", type="human"), groups=frozenset({"guest"}))
MANAGER = Principal(Actor(id="mia", type="human"), groups=frozenset({"managers"}))
REQUEST_ID = "apr_payment"


class Clock:
    def __init__(self) -> None:
        self.now = datetime.now(timezone.utc)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture(params=["sqlite", "postgres"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Storage:
    if request.param == "postgres":
        return Storage(fresh_schema_url(request.getfixturevalue("postgres_cluster")))
    return Storage(tmp_path / "ledger.db")


@contextmanager
def opened(storage: Storage) -> Iterator[Ledger]:
    if isinstance(storage.where, str):
        from aais_langgraph.ledger.postgres import PostgresLedger

        with PostgresLedger.from_conn_string(storage.where, delivery_plan=PLAN) as postgres:
            postgres.setup()
            yield postgres
    else:
        with SqliteLedger.from_conn_string(storage.where, delivery_plan=PLAN) as ledger:
            yield ledger


def _requested(ledger: Ledger, authorizer: Any, key: bytes | None) -> tuple[Any, Any, Clock]:
    clock = Clock()
    authority = ApprovalAuthority(ledger, authorizer=authorizer, key=key, clock=clock)
    requested = authority.request(
        {"kind": "tool_call", "name": "pay", "summary": "Pay", "arguments": {"amount": 10}},
        origin={"harness": "tests", "session_id": "s-1"},
        request_id=REQUEST_ID,
        thread_id="t-1",
        expires_in=timedelta(hours=4),
    )
    return authority, requested, clock


def _forge_escalation(storage: Storage, groups: list[str], at: datetime) -> None:
    """Mark the escalation row done and append its ``follow_up`` entry, as an attacker."""
    work_id = escalation_id(REQUEST_ID)
    storage.sql(
        "UPDATE aais_outbox SET state = 'done', attempts = 1 WHERE kind = ? AND work_id = ?",
        ("follow_up", work_id),
    )
    payload = {
        "request_id": REQUEST_ID,
        "follow_up": "escalation",
        "work_id": work_id,
        "by": "system",
        "escalated_to": groups,
        "ran_at": format_timestamp(at),
    }
    storage.append_entry("follow_up", payload, format_timestamp(at))


def _decides(authority: ApprovalAuthority, requested: Any, principal: Principal) -> bool:
    """Whether ``principal``'s approval was recorded (a refusal of any kind: not)."""
    approval = build_decision(requested, decision="approve", actor=principal.actor)
    try:
        outcome = authority.decide(approval, actor=principal).resolution.outcome
    except (ForbiddenError, LedgerIntegrityError):
        return False
    return outcome == "approved"


@pytest.mark.parametrize("key", [None, KEY], ids=["no-key", "key"])
def test_a_forged_escalation_naming_a_foreign_group_lets_it_decide_nothing(
    storage: Storage, key: bytes | None
) -> None:
    with opened(storage) as ledger:
        authority, requested, clock = _requested(ledger, CedarAuthorizer(CEDAR), key)
        clock.now += timedelta(seconds=3601)  # due: the rule's groups could decide now
        _forge_escalation(storage, ["guest"], clock.now)

        decided = _decides(authority, requested, GUEST)

        record(CATEGORY, 1, failed_open=int(decided))
        assert not decided
        assert ledger.get_resolution(REQUEST_ID) is None  # still pending, still answerable


def test_a_forged_escalation_fails_verify_with_a_key(storage: Storage) -> None:
    with opened(storage) as ledger:
        authority, _, clock = _requested(ledger, CedarAuthorizer(CEDAR), KEY)
        clock.now += timedelta(seconds=3601)
        _forge_escalation(storage, ["managers"], clock.now)

        verified = authority.verify_audit()

        record(CATEGORY, 1, failed_open=int(verified.ok))
        assert not verified.ok and verified.table == "aais_audit", verified
        assert verified.reason is not None and "seal" in verified.reason


def test_a_forged_escalation_with_a_key_lets_the_escalated_group_decide_nothing(
    storage: Storage,
) -> None:
    with opened(storage) as ledger:
        authority, requested, clock = _requested(ledger, CedarAuthorizer(CEDAR), KEY)
        clock.now += timedelta(seconds=3601)
        _forge_escalation(storage, ["managers"], clock.now)

        decided = _decides(authority, requested, MANAGER)

        record(CATEGORY, 1, failed_open=int(decided))
        assert not decided


@pytest.mark.parametrize("key", [None, KEY], ids=["no-key", "key"])
def test_an_escalation_before_it_was_due_lets_the_policy_group_decide_nothing(
    storage: Storage, key: bytes | None
) -> None:
    with opened(storage) as ledger:
        authority, requested, clock = _requested(ledger, SCHEDULE, key)
        clock.now += timedelta(seconds=60)  # an hour before it is due
        _forge_escalation(storage, ["managers"], clock.now)

        decided = _decides(authority, requested, MANAGER)

        record(CATEGORY, 1, failed_open=int(decided))
        assert not decided
        if key is None:
            verified = authority.verify_audit()
            record(CATEGORY, 1, failed_open=int(verified.ok))
            assert not verified.ok and verified.reason is not None
            assert "before it was due" in verified.reason


@pytest.mark.parametrize("authorizer", [CedarAuthorizer(CEDAR), SCHEDULE], ids=["cedar", "file"])
def test_an_escalation_that_ran_lets_the_rules_groups_decide_and_verifies(
    storage: Storage, authorizer: Any
) -> None:
    with opened(storage) as ledger:
        authority, requested, clock = _requested(ledger, authorizer, KEY)
        clock.now += timedelta(seconds=3600)
        assert [w.target for w in FollowUpRunner(authority, PLAN).run_due()] == ["escalation"]

        assert authority.verify_audit().ok
        assert not _decides(authority, requested, GUEST)
        assert _decides(authority, requested, MANAGER)
        assert authority.verify_audit().ok


@pytest.mark.parametrize("key", [None, KEY], ids=["no-key", "key"])
def test_an_escalation_dated_when_it_will_be_due_lets_no_one_decide_now(
    storage: Storage, key: bytes | None
) -> None:
    with opened(storage) as ledger:
        authority, requested, clock = _requested(ledger, SCHEDULE, key)
        clock.now += timedelta(seconds=60)
        _forge_escalation(storage, ["managers"], clock.now + timedelta(hours=1))

        decided = _decides(authority, requested, MANAGER)

        record(CATEGORY, 1, failed_open=int(decided))
        assert not decided

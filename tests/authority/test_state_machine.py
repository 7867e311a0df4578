"""A model-based test of the decision state machine on the in-memory ledger.

Rules raise requests, decide them with valid, forged, unoffered and late decisions,
replay earlier decisions (optionally under another authenticated actor), cancel,
move the clock and sweep expiries. Each answer is checked against a small model,
and the invariants of DESIGN.md (3, 4, 5) are checked after every step.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
)

from aais_langgraph.authority import ApprovalAuthority
from aais_langgraph.ledger import InMemoryLedger
from aais_langgraph.protocol import (
    ApprovalRequested,
    ApprovalResolved,
    format_timestamp,
    parse_timestamp,
)

from .support import START, FakeClock, action, decision, origin

CHANNEL = {"id": "user_sam", "type": "human", "authenticated_by": "oidc"}
FORGED = "sha256:" + "c" * 64

OFFERS = {
    "once": [("approve", "once"), ("deny", "once")],
    "session": [("approve", "once"), ("approve", "session"), ("deny", "once")],
    "cancel": [("approve", "once"), ("cancel", "once")],
}

# Valid approvals are listed thrice so that enough runs reach an approval.
DECISION_KINDS = [
    *[("approve", "once", "true")] * 3,
    ("approve", "session", "true"),
    ("approve", "persistent", "true"),
    ("deny", "once", "true"),
    ("cancel", "once", "true"),
    ("approve", "once", "forged"),
    ("deny", "once", "forged"),
]


def choices_for(offer: str) -> list[dict[str, Any]]:
    return [
        {
            "decision": kind,
            "scope": scope,
            "label": f"{kind} {scope}",
            **({"scope_constraints": {"command_prefix": "node "}} if scope != "once" else {}),
        }
        for kind, scope in OFFERS[offer]
    ]


class DecisionMachine(RuleBasedStateMachine):
    requests = Bundle("requests")

    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock(START)
        self.authority = ApprovalAuthority(InMemoryLedger(), clock=self.clock)
        self.raised: dict[str, ApprovalRequested] = {}
        self.offers: dict[str, str] = {}
        self.recorded: dict[str, ApprovalResolved] = {}
        # The effective decision (after actor replacement) behind each recorded resolution.
        self.recorded_by: dict[str, dict[str, Any] | None] = {}
        self.recorded_at: dict[str, datetime] = {}
        # Every decision sent, with the actor argument it was sent with.
        self.sent: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
        self.count = 0

    # -- model -------------------------------------------------------------------------

    def expected(self, request_id: str, effective: dict[str, Any]) -> str:
        """The outcome the spec demands for ``effective`` now ("same" = the recorded one)."""
        if request_id in self.recorded:
            return "same" if self.recorded_by[request_id] == effective else "conflict"
        request = self.raised[request_id].request
        assert request.expires_at is not None
        if self.clock.now >= parse_timestamp(request.expires_at):
            return "expired"
        if effective["action_digest"] != request.action_digest:
            return "stale"
        if (effective["decision"], effective["scope"]) not in OFFERS[self.offers[request_id]]:
            return "invalid"
        return {"approve": "approved", "deny": "denied", "cancel": "cancelled"}[
            effective["decision"]
        ]

    def submit(self, body: dict[str, Any], actor: dict[str, Any] | None) -> None:
        request_id = body["decision"]["request_id"]
        effective = {**body["decision"], "actor": actor or body["decision"]["actor"]}
        expected = self.expected(request_id, effective)
        event(f"outcome {expected}")
        answer = self.authority.decide(body, actor=actor)
        self.sent.append((body, actor))
        if expected == "same":
            assert answer == self.recorded[request_id]
            return
        assert answer.resolution.outcome == expected
        if expected in ("approved", "denied", "cancelled", "expired"):
            self.recorded[request_id] = answer
            self.recorded_by[request_id] = effective
            self.recorded_at[request_id] = self.clock.now

    # -- rules -------------------------------------------------------------------------

    @rule(
        target=requests,
        lifetime=st.sampled_from([60, 300, 3600]),
        offer=st.sampled_from(sorted(OFFERS)),
    )
    def raise_request(self, lifetime: int, offer: str) -> str:
        self.count += 1
        requested = self.authority.request(
            action(f"node --check file{self.count}.js"),
            origin=origin(),
            choices=choices_for(offer),
            expires_in=timedelta(seconds=lifetime),
            request_id=f"apr_{self.count}",
        )
        self.raised[requested.request.id] = requested
        self.offers[requested.request.id] = offer
        return requested.request.id

    @rule(
        request_id=requests,
        kind=st.sampled_from(DECISION_KINDS),
        authenticated=st.booleans(),
    )
    def decide(self, request_id: str, kind: tuple[str, str, str], authenticated: bool) -> None:
        self.count += 1
        verdict, scope, digest = kind
        requested = self.raised[request_id]
        body = decision(
            requested,
            verdict,
            scope,
            id=f"dec_{self.count}",
            decided_at=format_timestamp(self.clock.now),
            **({"action_digest": FORGED} if digest == "forged" else {}),
        )
        self.submit(body, CHANNEL if authenticated else None)

    @rule(request_id=requests, past=st.sampled_from([0, 1, 90]))
    def decide_after_expiry(self, request_id: str, past: int) -> None:
        expires_at = parse_timestamp(self.raised[request_id].request.expires_at or "")
        self.clock.set(max(self.clock.now, expires_at + timedelta(seconds=past)))
        self.decide(request_id, ("approve", "once", "true"), authenticated=False)

    @precondition(lambda self: bool(self.sent))
    @rule(data=st.data(), authenticated=st.sampled_from([None, True, False]))
    def replay(self, data: st.DataObject, authenticated: bool | None) -> None:
        body, actor = data.draw(st.sampled_from(self.sent))
        if authenticated is not None:
            actor = CHANNEL if authenticated else None
        self.submit(body, actor)

    @rule(request_id=requests, how=st.sampled_from(["cancel", "supersede"]))
    def close(self, request_id: str, how: str) -> None:
        answer = getattr(self.authority, how)(request_id)
        if request_id in self.recorded:
            assert answer == self.recorded[request_id]
        else:
            assert answer.resolution.outcome == {"cancel": "cancelled", "supersede": "stale"}[how]
            self.recorded[request_id] = answer
            self.recorded_by[request_id] = None

    @rule(seconds=st.integers(min_value=1, max_value=90))
    def advance_clock(self, seconds: int) -> None:
        self.clock.advance(seconds)

    @rule()
    def expire_due(self) -> None:
        due = {
            request_id
            for request_id, requested in self.raised.items()
            if request_id not in self.recorded
            and parse_timestamp(requested.request.expires_at or "") <= self.clock.now
        }
        answers = self.authority.expire_due()
        assert {a.resolution.request_id for a in answers} == due
        for answer in answers:
            assert answer.resolution.outcome == "expired"
            self.recorded[answer.resolution.request_id] = answer
            self.recorded_by[answer.resolution.request_id] = None

    # -- invariants --------------------------------------------------------------------

    @invariant()
    def at_most_one_recorded_resolution_per_request(self) -> None:
        events = self.authority.events_after(0, limit=100_000).events
        resolved = [
            e["resolution"]["request_id"] for e in events if e["type"] == "approval.resolved"
        ]
        assert len(resolved) == len(set(resolved))
        assert set(resolved) == set(self.recorded)

    @invariant()
    def recorded_resolution_never_changes(self) -> None:
        for request_id, first in self.recorded.items():
            assert self.authority.get_resolution(request_id) == first

    @invariant()
    def approved_only_for_true_digest_offered_choice_before_expiry(self) -> None:
        events = self.authority.events_after(0, limit=100_000).events
        decided = {e["decision"]["id"]: e["decision"] for e in events if "decision" in e}
        for request_id, resolved in self.recorded.items():
            if resolved.resolution.outcome != "approved":
                continue
            request = self.raised[request_id].request
            stored = decided[resolved.resolution.decision_id or ""]
            assert stored == self.recorded_by[request_id]
            assert stored["action_digest"] == request.action_digest
            assert request.offers(stored["decision"], stored["scope"]) is not None
            assert self.recorded_at[request_id] < parse_timestamp(request.expires_at or "")

    @invariant()
    def pending_set_is_requests_without_resolution(self) -> None:
        pending = {stored.request_id for stored in self.authority.ledger.list_pending()}
        unresolved = {
            request_id
            for request_id in self.raised
            if self.authority.get_resolution(request_id) is None
        }
        assert pending == unresolved == set(self.raised) - set(self.recorded)

    @invariant()
    def audit_chain_holds(self) -> None:
        assert self.authority.verify_audit().ok


DecisionMachine.TestCase.settings = settings(
    max_examples=150,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_decision_state_machine = DecisionMachine.TestCase

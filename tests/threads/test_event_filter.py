"""An event stream cut to what one viewer may see: the async cut agrees with the sync one."""

from __future__ import annotations

import asyncio
from typing import Any

from aais_langgraph.authority import AccessPolicy, ApprovalAuthority, Principal
from aais_langgraph.ledger import InMemoryLedger
from aais_langgraph.protocol import Actor
from aais_langgraph.threads import EventFilter

ORIGIN = {"harness": "tests", "session_id": "s-1"}
SRE = Principal(Actor(id="alice", type="human"), groups=frozenset({"sre"}))
DEV = Principal(Actor(id="bob", type="human"), groups=frozenset({"dev"}))


def stream(authority: ApprovalAuthority) -> list[dict[str, Any]]:
    """Envelopes about a deploy only the SRE may see, a listing the SRE and the developer
    may see, and one about no request at all."""
    ids = []
    for kind in ("process.exec", "fs.read"):
        action = {"kind": kind, "name": "run", "summary": "Run it", "arguments": {}}
        ids.append(authority.request(action, origin=ORIGIN).request.id)
    deploy, listing = ids
    return [
        {"request": {"id": deploy}},
        {"decision": {"request_id": listing}},
        {"snapshot": {"pending": []}},
        {"resolution": {"request_id": deploy}},
    ]


def test_the_async_cut_keeps_what_the_sync_cut_keeps() -> None:
    policy = AccessPolicy.from_mapping(
        {
            "default_approvers": ["sre", "dev"],
            "approvers": [{"kinds": ["process.*"], "groups": ["sre"]}],
        }
    )
    authority = ApprovalAuthority(InMemoryLedger(), authorizer=policy)
    envelopes = stream(authority)
    for viewer in (SRE, DEV, None):
        expected = EventFilter(authority, viewer).keep(envelopes)
        cut = EventFilter(authority, viewer)
        assert asyncio.run(cut.akeep(envelopes)) == expected
        assert asyncio.run(cut.akeep(envelopes)) == expected  # from what it remembered
    assert len(EventFilter(authority, DEV).keep(envelopes)) == 1
    assert EventFilter(authority, None).keep(envelopes) == envelopes


class CountingLedger(InMemoryLedger):
    """An in-memory ledger that counts reads of the audit chain."""

    audit_reads = 0

    def audit_entries(self, *, after_index: int = -1, limit: int | None = None) -> list[Any]:
        self.audit_reads += 1
        return super().audit_entries(after_index=after_index, limit=limit)


def test_a_policy_that_escalates_nothing_reads_no_audit_for_escalations() -> None:
    quiet = AccessPolicy.from_mapping({"default_approvers": ["sre"]})
    ledger = CountingLedger()
    authority = ApprovalAuthority(ledger, authorizer=quiet)
    stream(authority)
    cut = EventFilter(authority, DEV)
    for _ in range(3):
        assert asyncio.run(cut.aescalated()) == []
    assert ledger.audit_reads == 0


def test_a_policy_that_escalates_follows_the_audit_chain() -> None:
    escalating = AccessPolicy.from_mapping(
        {
            "default_approvers": ["sre"],
            "approvers": [
                {
                    "kinds": ["process.*"],
                    "groups": ["sre"],
                    "escalate_after": 60,
                    "escalate_to": ["dev"],
                }
            ],
        }
    )
    ledger = CountingLedger()
    authority = ApprovalAuthority(ledger, authorizer=escalating)
    cut = EventFilter(authority, DEV)
    assert asyncio.run(cut.aescalated()) == []  # where the stream begins: the tip
    stream(authority)
    assert asyncio.run(cut.aescalated()) == []  # requests, but no escalation ran
    assert ledger.audit_reads == 1
    assert asyncio.run(EventFilter(authority, None).aescalated()) == []  # trusted: all seen

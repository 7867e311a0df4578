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

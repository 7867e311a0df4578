"""The ``a``-prefixed twins give the same answers as their sync methods."""

from __future__ import annotations

import asyncio

from aais_langgraph.authority import ApprovalAuthority

from .support import FakeClock, action, decision, new_request, origin


async def test_arequest_and_adecide_approve(authority: ApprovalAuthority) -> None:
    requested = await authority.arequest(action(), origin=origin(), request_id="apr_async")
    assert (await authority.aget_request("apr_async")) == requested
    assert (await authority.aget_stored_request("apr_async")).status == "pending"  # type: ignore[union-attr]
    resolved = await authority.adecide(decision(requested), actor={"id": "u9", "type": "human"})
    assert resolved.resolution.outcome == "approved"
    assert (await authority.aget_resolution("apr_async")) == resolved


async def test_aadd_is_idempotent(authority: ApprovalAuthority) -> None:
    requested = new_request(authority)
    assert (await authority.aadd(requested.to_json())) == requested


async def test_concurrent_adecide_records_one_resolution(authority: ApprovalAuthority) -> None:
    requested = new_request(authority)
    bodies = [decision(requested, "approve" if i % 2 else "deny") for i in range(10)]
    answers = await asyncio.gather(*(authority.adecide(body) for body in bodies))
    recorded = authority.get_resolution(requested.request.id)
    assert recorded is not None
    assert [a for a in answers if a.resolution.outcome != "conflict"] == [recorded]


async def test_acancel_and_acancel_session_and_thread(authority: ApprovalAuthority) -> None:
    one = new_request(authority, session_id="s-a")
    two = new_request(authority, session_id="s-b")
    three = new_request(authority, thread_id="t-c")
    assert (await authority.acancel(one.request.id)).resolution.outcome == "cancelled"
    assert [r.resolution.request_id for r in await authority.acancel_session("s-b")] == [
        two.request.id
    ]
    assert [r.resolution.request_id for r in await authority.acancel_thread("t-c")] == [
        three.request.id
    ]


async def test_aexpire_aexpire_due_and_asupersede(
    authority: ApprovalAuthority, clock: FakeClock
) -> None:
    first = new_request(authority, expires_in=10)
    second = new_request(authority, expires_in=600)
    third = new_request(authority, expires_in=600)
    clock.advance(10)
    assert [r.resolution.request_id for r in await authority.aexpire_due()] == [first.request.id]
    assert (await authority.aexpire(second.request.id)).resolution.outcome == "expired"
    assert (await authority.asupersede(third.request.id)).resolution.outcome == "stale"


async def test_asnapshot_and_aevents_after(authority: ApprovalAuthority) -> None:
    requested = new_request(authority)
    snapshot = await authority.asnapshot(session_id="s-1", stream="inbox")
    assert [r.id for r in snapshot.snapshot.pending] == [requested.request.id]
    assert snapshot.stream == "inbox"
    page = await authority.aevents_after(0)
    assert page.events == [requested.to_json()]


async def test_grant_twins(authority: ApprovalAuthority) -> None:
    requested = new_request(authority)
    await authority.adecide(decision(requested, scope="session"))
    (grant,) = await authority.alist_grants(session_id="s-1")
    assert (await authority.amatch_grant(action("node --check b.js"), origin())) == grant
    screening = await authority.ascreen(action("node --check b.js"), origin=origin())
    assert screening.resolved is not None
    assert await authority.arevoke_grant(grant.grant_id)
    assert (await authority.amatch_grant(action("node --check b.js"), origin())) is None


async def test_averify_audit(authority: ApprovalAuthority) -> None:
    requested = new_request(authority)
    await authority.adecide(decision(requested))
    assert (await authority.averify_audit()).ok

"""The ``a``-prefixed twins behave like the sync methods, from inside an event loop."""

from __future__ import annotations

import asyncio

from aais_langgraph.ledger import Ledger, verify_audit

from .envelopes import approval, request_envelope


async def test_async_twins_cover_a_request_lifecycle(ledger: Ledger) -> None:
    await ledger.asetup()
    requested = request_envelope("apr_1")

    stored, created = await ledger.aadd_request(requested, thread_id="thr_1")
    assert created is True
    assert await ledger.aget_request("apr_1") == stored
    assert [r.request_id for r in await ledger.alist_pending(thread_id="thr_1")] == ["apr_1"]

    resolution, won = await ledger.arecord_resolution(approval(requested))
    assert won is True
    assert await ledger.aget_resolution("apr_1") == resolution
    assert await ledger.alist_pending() == []
    assert [e["sequence"] for e in await ledger.aevents_after(0)] == [1, 2, 3]

    entry = await ledger.aappend_audit("conflict", {"request_id": "apr_1"})
    assert entry.index == 3
    assert verify_audit(ledger.audit_entries(), ledger.audit_tip()).ok


async def test_async_grants_and_leases(ledger: Ledger) -> None:
    assert await ledger.alist_grants(session_id="s1") == []
    assert await ledger.arevoke_grant("grt_missing", now=1.0) is False
    assert await ledger.aacquire_lease("thr_1", "a", ttl=10, now=0.0) is not None
    assert await ledger.aacquire_lease("thr_1", "b", ttl=10, now=1.0) is None
    assert await ledger.arenew_lease("thr_1", "a", ttl=10, now=5.0) is not None
    assert await ledger.arelease_lease("thr_1", "a") is True


async def test_concurrent_async_resolutions_record_one(ledger: Ledger) -> None:
    requested = request_envelope("apr_1")
    await ledger.aadd_request(requested)
    writes = [
        approval(requested, resolution_id=f"res_{n}", decision_id=f"dec_{n}") for n in range(8)
    ]

    results = await asyncio.gather(*(ledger.arecord_resolution(w) for w in writes))

    assert sum(created for _, created in results) == 1
    assert len({r.envelope["resolution"]["id"] for r, _ in results}) == 1

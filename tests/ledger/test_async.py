"""Every contract method has an ``a``-prefixed twin on every backend, and the twins agree."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from aais_langgraph.ledger import (
    AuditEntry,
    CompactionReport,
    Ledger,
    LedgerContents,
    ResumeWork,
    RetentionPolicy,
    verify_audit,
)
from aais_langgraph.ledger.executions import claim_change
from aais_langgraph.ledger.outbox import DELIVERY, RESUME, reopened_change, retried_change
from aais_langgraph.ledger.resume_work import RESUME_BACKOFF

from .envelopes import approval, grant_for, request_envelope


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


def _sync_methods() -> set[str]:
    """Every public method of the ledger contract that is not itself an async twin."""
    return {
        name
        for name, member in inspect.getmembers(Ledger, inspect.isfunction)
        if not name.startswith("_") and not inspect.iscoroutinefunction(member)
    }


def _parameters(method: Callable[..., Any]) -> list[tuple[str, Any, Any]]:
    parameters = inspect.signature(method).parameters.values()
    return [(p.name, p.kind, p.default) for p in parameters]


def test_every_contract_method_has_an_async_twin_on_every_backend(ledger: Ledger) -> None:
    methods = _sync_methods()
    assert {"add_request", "audit_tip", "contents", "execution_with_entry", "is_set_up"} <= methods
    for name in sorted(methods):
        sync, twin = getattr(ledger, name), getattr(ledger, f"a{name}", None)
        assert twin is not None and inspect.iscoroutinefunction(twin), f"a{name} is missing"
        assert _parameters(twin) == _parameters(sync), f"a{name} takes other parameters"


def _steps() -> list[tuple[str, tuple[Any, ...], dict[str, Any]]]:
    """One call of every contract method, in an order that gives each something to do."""
    requested = request_envelope("apr_1", session_id="s1")
    second = request_envelope("apr_2")
    claim_2 = claim_change("apr_2", "run_c", thread_id=None, ttl=10, now=3.0, retry=False)
    claim = claim_change("apr_1", "run_a", thread_id="thr_1", ttl=10, now=3.0, retry=False)
    return [
        ("setup", (), {}),
        ("is_set_up", (), {}),
        ("add_request", (requested,), {"thread_id": "thr_1", "context": {"k": 1}}),
        ("add_request", (requested,), {"thread_id": "thr_1"}),
        ("add_request", (second,), {}),
        ("get_request", ("apr_1",), {}),
        ("list_pending", (), {"thread_id": "thr_1"}),
        ("list_pending_rows", (), {"session_id": "s1"}),
        ("record_resolution", (approval(requested, grant=grant_for(requested, grant_id="g")),), {}),
        ("get_resolution", ("apr_1",), {}),
        ("record_resolution_claiming", (approval(second), claim_2), {}),
        ("list_grants", (), {"session_id": "s1"}),
        ("revoke_grant", ("g",), {"now": 5.0}),
        ("list_grants", (), {"include_revoked": True}),
        ("events_after", (0,), {"limit": 10}),
        ("first_event_sequence", (), {}),
        ("last_sequence", (), {}),
        ("append_audit", ("conflict", {"request_id": "apr_1"}), {}),
        ("audit_entries", (), {"after_index": 1, "limit": 2}),
        ("audit_entries_at", ([0, 2, 3, 10_000],), {}),
        ("audit_tip", (), {}),
        ("audit_link", (1,), {}),
        ("follow_up_entries", ("apr_1",), {}),
        ("compact_events", (2,), {}),
        ("contents", (), {}),
        ("acquire_lease", ("thr_1", "run_a"), {"ttl": 10, "now": 0.0}),
        ("acquire_lease", ("thr_1", "run_b"), {"ttl": 10, "now": 1.0}),
        ("renew_lease", ("thr_1", "run_a"), {"ttl": 10, "now": 2.0}),
        ("get_lease", ("thr_1",), {}),
        ("list_leases", (), {}),
        ("check_storage", (), {}),
        ("release_lease", ("thr_1", "run_a"), {}),
        ("get_work", (RESUME, "apr_1"), {}),
        (
            "update_work",
            (RESUME, "apr_1", retried_change("busy", 10.0, backoff=RESUME_BACKOFF)),
            {},
        ),
        ("list_work", (RESUME,), {"thread_id": "thr_1"}),
        ("update_execution", ("apr_1", claim), {}),
        ("execution_with_entry", ("apr_1",), {}),
        ("count_pending", (), {"session_id": "sess_1", "limit": 10}),
        ("post_to_thread", ("thr_1", "alice"), {"now": 5.0, "start": True}),
        ("post_to_thread", ("thr_1", "bob"), {"now": 6.0, "start": True}),
        ("post_to_thread", ("thr_1", "bob"), {"now": 7.0}),
        ("thread_record", ("thr_1",), {}),
        ("thread_entries", ("thr_1",), {}),
        ("requests_of_thread", ("thr_1",), {}),
        ("list_executions", (), {"states": ("executing",)}),
        ("claim_work", (DELIVERY, "sender"), {"targets": ("ops",), "ttl": 5.0, "now": 4.0}),
        ("get_work", (DELIVERY, "msg_1"), {}),
        ("update_work", (DELIVERY, "msg_1", reopened_change(4.0)), {}),
        ("list_work", (DELIVERY,), {"states": ("dead",)}),
        ("advance_delivery_cursor", ("ops",), {"start": None, "to": 1, "now": 4.0}),
        ("advance_delivery_cursor", ("ops",), {"start": 0, "to": 2, "now": 4.0}),
        ("delivery_cursor", ("ops",), {}),
        ("compact_history", (RetentionPolicy(keep_last=0),), {"now": 10.0}),
    ]


def _comparable(value: Any) -> Any:
    """``value`` without what two ledgers legitimately differ in: audit times, hence hashes."""
    if isinstance(value, AuditEntry):
        return value.index, value.kind, value.payload
    if isinstance(value, ResumeWork):  # ``created_at`` is each ledger's own clock
        return value.request_id, value.thread_id, value.state, value.attempts, value.last_error
    if isinstance(value, CompactionReport):
        return replace(value, checkpoint=_comparable(value.checkpoint), chained_from=None)
    if isinstance(value, LedgerContents):
        return replace(
            value, audit=_comparable(value.audit), audit_tip=_comparable(value.audit_tip)
        )
    if isinstance(value, list):
        return [_comparable(item) for item in value]
    if isinstance(value, dict) and all(isinstance(key, int) for key in value):
        return {key: _comparable(item) for key, item in value.items()}  # entries by index
    if isinstance(value, tuple) and len(value) == 2 and str(value[1]).startswith("sha256:"):
        return value[0]  # an audit tip
    if isinstance(value, tuple):
        return tuple(_comparable(item) for item in value)
    return value


async def test_async_twins_agree_with_the_sync_methods(
    make_ledger: Callable[[], Ledger],
) -> None:
    steps = _steps()
    assert {name for name, _, _ in steps} == _sync_methods()
    sync_ledger, async_ledger = make_ledger(), make_ledger()

    for name, args, kwargs in steps:
        expected = getattr(sync_ledger, name)(*args, **kwargs)
        got = await getattr(async_ledger, f"a{name}")(*args, **kwargs)
        assert _comparable(got) == _comparable(expected), name

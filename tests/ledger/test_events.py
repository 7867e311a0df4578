"""The event stream: ordered replay after a sequence, and compaction of old events."""

from __future__ import annotations

from aais_langgraph.ledger import Ledger

from .envelopes import approval, request_envelope


def _fill(ledger: Ledger, count: int) -> None:
    for n in range(count):
        ledger.add_request(request_envelope(f"apr_{n}"))


def test_events_after_returns_later_events_in_order(ledger: Ledger) -> None:
    requested = request_envelope("apr_1")
    ledger.add_request(requested)
    ledger.add_request(request_envelope("apr_2"))
    ledger.record_resolution(approval(requested))

    events = ledger.events_after(0)

    assert [e["sequence"] for e in events] == [1, 2, 3, 4]
    assert [e["type"] for e in events] == [
        "approval.requested",
        "approval.requested",
        "approval.decided",
        "approval.resolved",
    ]
    assert [e["sequence"] for e in ledger.events_after(2)] == [3, 4]
    assert ledger.events_after(4) == []


def test_events_after_honours_the_limit(ledger: Ledger) -> None:
    _fill(ledger, 5)

    assert [e["sequence"] for e in ledger.events_after(1, limit=2)] == [2, 3]


def test_compaction_drops_older_events_and_reports_the_gap(ledger: Ledger) -> None:
    _fill(ledger, 5)

    dropped = ledger.compact_events(4)

    assert dropped == 3
    assert ledger.first_event_sequence() == 4
    assert [e["sequence"] for e in ledger.events_after(0)] == [4, 5]
    assert ledger.compact_events(4) == 0


def test_sequences_continue_after_compacting_everything(ledger: Ledger) -> None:
    _fill(ledger, 3)

    assert ledger.compact_events(100) == 3
    assert ledger.first_event_sequence() is None
    assert ledger.last_sequence() == 3

    stored, _ = ledger.add_request(request_envelope("apr_next"))
    assert stored.envelope["sequence"] == 4
    assert ledger.first_event_sequence() == 4


def test_compaction_keeps_requests_resolutions_and_audit(ledger: Ledger) -> None:
    requested = request_envelope("apr_1")
    ledger.add_request(requested)
    ledger.record_resolution(approval(requested))

    ledger.compact_events(100)

    assert ledger.get_request("apr_1") is not None
    assert ledger.get_resolution("apr_1") is not None
    kinds = [entry.kind for entry in ledger.audit_entries()]
    assert len(kinds) == 4 and kinds[-1] == "compacted"  # the three rows' entries stay

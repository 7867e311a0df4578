"""The audit chain: hashing, and detection of edited, deleted, reordered or truncated entries."""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
from typing import Any

import rfc8785

from aais_langgraph.ledger import (
    GENESIS_HASH,
    AuditEntry,
    Ledger,
    chain_hash,
    verify_audit,
)

from .envelopes import approval, grant_for, request_envelope


def _populate(ledger: Ledger) -> list[AuditEntry]:
    """Five audit entries: requested, decided, resolved, granted, then a manual one."""
    requested = request_envelope("apr_1")
    ledger.add_request(requested)
    grant = grant_for(requested, grant_id="grt_1")
    ledger.record_resolution(approval(requested, grant=grant))
    ledger.append_audit("conflict", {"request_id": "apr_1", "secret_hint": "hunter2"})
    return ledger.audit_entries()


def test_chain_hash_is_sha256_of_canonical_content_then_prev_hash() -> None:
    moment = "2026-01-01T00:00:00Z"
    content: dict[str, Any] = {"index": 0, "kind": "requested", "occurred_at": moment}
    payload: dict[str, Any] = {"b": 1, "a": "é"}
    expected = hashlib.sha256(
        rfc8785.dumps({**content, "payload": payload}) + GENESIS_HASH.encode()
    ).hexdigest()

    assert GENESIS_HASH == "sha256:" + "0" * 64
    assert chain_hash(0, "requested", moment, payload, GENESIS_HASH) == ("sha256:" + expected)


def test_entries_link_from_genesis_and_end_at_the_recorded_tip(ledger: Ledger) -> None:
    entries = _populate(ledger)

    assert [e.index for e in entries] == [0, 1, 2, 3, 4]
    assert [e.kind for e in entries] == ["requested", "decided", "resolved", "granted", "conflict"]
    assert entries[0].prev_hash == GENESIS_HASH
    assert all(b.prev_hash == a.entry_hash for a, b in itertools.pairwise(entries))
    assert ledger.audit_tip() == (4, entries[-1].entry_hash)


def test_untouched_chain_verifies(ledger: Ledger) -> None:
    entries = _populate(ledger)

    result = verify_audit(entries, ledger.audit_tip())

    assert result.ok is True
    assert result.checked == 5
    assert result.first_bad_index is None
    assert result.reason is None


def test_audit_payloads_carry_no_argument_values(ledger: Ledger) -> None:
    requested = request_envelope("apr_1", arguments={"password": "pa55word"})
    ledger.add_request(requested)
    ledger.record_resolution(approval(requested))

    assert "pa55word" not in repr(ledger.audit_entries())


def test_audit_entries_pages_by_index(ledger: Ledger) -> None:
    entries = _populate(ledger)

    assert ledger.audit_entries(after_index=2) == entries[3:]
    assert ledger.audit_entries(after_index=0, limit=2) == entries[1:3]


def test_edited_entry_is_named(ledger: Ledger) -> None:
    entries = _populate(ledger)
    entries[2] = dataclasses.replace(
        entries[2], payload={**entries[2].payload, "outcome": "denied"}
    )

    result = verify_audit(entries, ledger.audit_tip())

    assert (result.ok, result.first_bad_index, result.checked) == (False, 2, 2)
    assert result.reason is not None
    assert "denied" not in result.reason


def test_edited_entry_with_recomputed_hash_breaks_the_next_link(ledger: Ledger) -> None:
    entries = _populate(ledger)
    old = entries[1]
    payload = {**old.payload, "decision": "deny"}
    forged_hash = chain_hash(old.index, old.kind, old.occurred_at, payload, old.prev_hash)
    entries[1] = dataclasses.replace(old, payload=payload, entry_hash=forged_hash)

    result = verify_audit(entries, ledger.audit_tip())

    assert (result.ok, result.first_bad_index) == (False, 2)


def test_deleted_entry_is_named(ledger: Ledger) -> None:
    entries = _populate(ledger)
    del entries[3]

    result = verify_audit(entries, ledger.audit_tip())

    assert (result.ok, result.first_bad_index) == (False, 3)


def test_reordered_entries_are_detected_at_the_first_moved_entry(ledger: Ledger) -> None:
    entries = _populate(ledger)
    entries[1], entries[2] = entries[2], entries[1]

    result = verify_audit(entries, ledger.audit_tip())

    assert (result.ok, result.first_bad_index) == (False, 1)


def test_truncated_tail_is_detected_against_the_recorded_tip(ledger: Ledger) -> None:
    entries = _populate(ledger)

    result = verify_audit(entries[:3], ledger.audit_tip())

    assert (result.ok, result.first_bad_index, result.checked) == (False, 3, 3)
    assert result.reason is not None
    assert "truncated" in result.reason


def test_entries_without_a_recorded_tip_fail(ledger: Ledger) -> None:
    entries = _populate(ledger)

    assert verify_audit(entries, None).ok is False
    assert verify_audit([], None).ok is True


def test_entries_beyond_the_recorded_tip_fail(ledger: Ledger) -> None:
    entries = _populate(ledger)

    result = verify_audit(entries, (3, entries[3].entry_hash))

    assert (result.ok, result.first_bad_index) == (False, 4)


def test_truncation_with_a_rewritten_tip_is_caught_by_the_expected_tip(ledger: Ledger) -> None:
    entries = _populate(ledger)
    kept_by_caller = ledger.audit_tip()
    truncated = entries[:2]
    rewritten_tip = (1, entries[1].entry_hash)

    assert verify_audit(truncated, rewritten_tip).ok is True
    result = verify_audit(truncated, rewritten_tip, expected_tip=kept_by_caller)

    assert (result.ok, result.first_bad_index) == (False, 2)


def test_expected_tip_from_earlier_still_verifies_after_growth(ledger: Ledger) -> None:
    _populate(ledger)
    earlier = ledger.audit_tip()
    ledger.append_audit("conflict", {"request_id": "apr_1"})

    result = verify_audit(ledger.audit_entries(), ledger.audit_tip(), expected_tip=earlier)

    assert result.ok is True
    assert result.checked == 6


def test_expected_tip_that_does_not_match_fails(ledger: Ledger) -> None:
    entries = _populate(ledger)

    result = verify_audit(entries, ledger.audit_tip(), expected_tip=(2, "sha256:" + "f" * 64))

    assert (result.ok, result.first_bad_index) == (False, 2)

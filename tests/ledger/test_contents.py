"""``contents()``: every row in one read, each naming the audit entry that vouches for it."""

from __future__ import annotations

from aais_langgraph.ledger import Ledger, verify_contents

from .envelopes import approval, grant_for, request_envelope


def test_contents_hold_every_row_and_each_names_its_audit_entry(ledger: Ledger) -> None:
    requested = request_envelope("apr_1")
    ledger.add_request(requested, thread_id="thr_1", context={"node": "act"}, mac="hmac-sha256:ab")
    grant = grant_for(requested, grant_id="grt_1")
    ledger.record_resolution(approval(requested, grant=grant))
    ledger.add_request(request_envelope("apr_2"))

    contents = ledger.contents()

    assert [r.request_id for r in contents.requests] == ["apr_1", "apr_2"]
    assert [r.request_id for r in contents.resolutions] == ["apr_1"]
    assert [g.grant_id for g in contents.grants] == ["grt_1"]
    assert [sequence for sequence, _ in contents.events] == [1, 2, 3, 4]
    kinds = {entry.index: entry.kind for entry in contents.audit}
    first, second = contents.requests
    assert kinds[first.audit_index] == kinds[second.audit_index] == "requested"  # type: ignore[index]
    assert first.mac == "hmac-sha256:ab" and second.mac is None
    assert kinds[contents.resolutions[0].audit_index] == "resolved"  # type: ignore[index]
    assert kinds[contents.grants[0].audit_index] == "granted"  # type: ignore[index]
    assert contents.audit_tip == (contents.audit[-1].index, contents.audit[-1].entry_hash)
    assert contents.last_sequence == 4
    assert verify_contents(contents).ok


def test_empty_contents_verify(ledger: Ledger) -> None:
    contents = ledger.contents()
    assert contents.requests == [] and contents.audit == [] and contents.audit_tip is None
    assert verify_contents(contents).ok

"""Requests: idempotent creation, ledger-assigned sequences and the pending view."""

from __future__ import annotations

import pytest

from aais_langgraph.ledger import Ledger
from aais_langgraph.protocol import AAISValidationError

from .envelopes import approval, expiry_of, request_envelope


def test_add_request_stores_the_envelope_with_a_fresh_sequence(ledger: Ledger) -> None:
    envelope = request_envelope("apr_1", session_id="sess_a", expires_in=600)

    stored, created = ledger.add_request(envelope, thread_id="thr_1", context={"interrupt": "i1"})

    assert created is True
    assert stored.request_id == "apr_1"
    assert stored.status == "pending"
    assert stored.session_id == "sess_a"
    assert stored.thread_id == "thr_1"
    assert stored.context == {"interrupt": "i1"}
    assert stored.expires_at == expiry_of(600)
    assert stored.envelope == {**envelope, "sequence": 1}
    assert ledger.get_request("apr_1") == stored


def test_adding_the_same_request_again_returns_the_stored_one(ledger: Ledger) -> None:
    first, _ = ledger.add_request(request_envelope("apr_1"), thread_id="thr_1")
    replay = request_envelope("apr_1", session_id="sess_other")

    again, created = ledger.add_request(replay, thread_id="thr_2")

    assert created is False
    assert again == first
    assert again.envelope["sequence"] == 1
    assert ledger.last_sequence() == 1
    assert len(ledger.events_after(0)) == 1
    assert len(ledger.audit_entries()) == 1


def test_sequences_increase_by_one_per_stored_event(ledger: Ledger) -> None:
    sequences = [
        ledger.add_request(request_envelope(f"apr_{n}"))[0].envelope["sequence"] for n in range(5)
    ]

    assert sequences == [1, 2, 3, 4, 5]
    assert ledger.last_sequence() == 5


def test_empty_ledger_has_sequence_zero_and_nothing_stored(ledger: Ledger) -> None:
    assert ledger.last_sequence() == 0
    assert ledger.get_request("apr_missing") is None
    assert ledger.list_pending() == []
    assert ledger.events_after(0) == []
    assert ledger.first_event_sequence() is None
    assert ledger.audit_tip() is None


def test_list_pending_returns_pending_requests_in_sequence_order(ledger: Ledger) -> None:
    for name in ["apr_c", "apr_a", "apr_b"]:
        ledger.add_request(request_envelope(name))

    assert [r.request_id for r in ledger.list_pending()] == ["apr_c", "apr_a", "apr_b"]


def test_list_pending_excludes_resolved_requests(ledger: Ledger) -> None:
    envelopes = {name: request_envelope(name) for name in ["apr_1", "apr_2", "apr_3"]}
    for envelope in envelopes.values():
        ledger.add_request(envelope)

    ledger.record_resolution(approval(envelopes["apr_2"]))

    assert [r.request_id for r in ledger.list_pending()] == ["apr_1", "apr_3"]
    resolved = ledger.get_request("apr_2")
    assert resolved is not None
    assert resolved.status == "resolved"


def test_list_pending_filters_by_thread_session_and_expiry(ledger: Ledger) -> None:
    ledger.add_request(request_envelope("apr_1", session_id="s1", expires_in=60), thread_id="t1")
    ledger.add_request(request_envelope("apr_2", session_id="s2", expires_in=120), thread_id="t1")
    ledger.add_request(request_envelope("apr_3", session_id="s1", expires_in=180), thread_id="t2")
    ledger.add_request(request_envelope("apr_4", session_id="s1", expires_in=240))

    def ids(**filters: object) -> list[str]:
        return [r.request_id for r in ledger.list_pending(**filters)]  # type: ignore[arg-type]

    assert ids(thread_id="t1") == ["apr_1", "apr_2"]
    assert ids(session_id="s1") == ["apr_1", "apr_3", "apr_4"]
    assert ids(thread_id="t1", session_id="s1") == ["apr_1"]
    assert ids(expires_before=expiry_of(120)) == ["apr_1", "apr_2"]
    assert ids(expires_before=expiry_of(120) - 0.001) == ["apr_1"]
    assert ids(session_id="s1", expires_before=expiry_of(1000)) == ["apr_1", "apr_3", "apr_4"]
    assert ids(limit=2) == ["apr_1", "apr_2"]
    assert ids(limit=0) == []


def test_pending_rows_are_the_pending_requests_as_stored(ledger: Ledger) -> None:
    ledger.add_request(request_envelope("apr_1", session_id="s1"), thread_id="t1", context={"k": 1})
    ledger.add_request(request_envelope("apr_2", session_id="s2", expires_in=60))
    ledger.add_request(request_envelope("apr_3", session_id="s1"))
    ledger.record_resolution(approval(request_envelope("apr_3", session_id="s1")))

    rows = ledger.list_pending_rows()

    assert [row.parsed() for row in rows] == ledger.list_pending()
    assert [row.audit_index for row in rows] == [r.audit_index for r in ledger.list_pending()]
    assert [row.request_id for row in ledger.list_pending_rows(session_id="s1")] == ["apr_1"]
    assert rows[0] == ledger.list_pending_rows()[0]  # the same content: an equal row
    assert rows[0] != rows[1] and len({rows[0], rows[1]}) == 2  # hashable, as keys


def test_a_threads_requests_are_its_own_in_sequence_order(ledger: Ledger) -> None:
    threads = {"apr_c": "thr_1", "apr_d": "thr_2", "apr_a": "thr_1", "apr_e": None}
    envelopes = {name: request_envelope(name) for name in [*threads, "apr_b"]}
    for name, thread_id in threads.items():
        ledger.add_request(envelopes[name], thread_id=thread_id)
    ledger.record_resolution(approval(envelopes["apr_c"]))
    ledger.add_request(envelopes["apr_b"], thread_id="thr_1")

    found = ledger.requests_of_thread("thr_1")

    assert [(r.request_id, r.status) for r in found] == [
        ("apr_c", "resolved"),
        ("apr_a", "pending"),
        ("apr_b", "pending"),
    ]
    assert found == [ledger.get_request(name) for name in ["apr_c", "apr_a", "apr_b"]]
    assert [r.request_id for r in ledger.requests_of_thread("thr_1", limit=2)] == [
        "apr_c",
        "apr_a",
    ]
    assert ledger.requests_of_thread("thr_1", limit=0) == []
    assert [r.request_id for r in ledger.requests_of_thread("thr_2")] == ["apr_d"]
    assert ledger.requests_of_thread("thr_none") == []
    found[0].envelope["request"]["status"] = "tampered"
    assert ledger.requests_of_thread("thr_1")[0].envelope["request"]["status"] == "pending"


def test_stored_values_are_detached_from_callers(ledger: Ledger) -> None:
    envelope = request_envelope("apr_1")
    stored, _ = ledger.add_request(envelope, context={"k": ["v"]})

    envelope["request"]["action"]["arguments"]["command"] = "rm -rf /"
    stored.envelope["request"]["status"] = "tampered"
    stored.context["k"].append("x")

    again = ledger.get_request("apr_1")
    assert again is not None
    assert again.envelope["request"]["action"]["arguments"] == {"command": "ls -la"}
    assert again.envelope["request"]["status"] == "pending"
    assert again.context == {"k": ["v"]}


def test_an_envelope_without_request_id_is_refused(ledger: Ledger) -> None:
    envelope = request_envelope("apr_1")
    del envelope["request"]["id"]

    with pytest.raises(AAISValidationError) as caught:
        ledger.add_request(envelope)

    assert caught.value.pointer == "/request/id"
    assert ledger.last_sequence() == 0


def test_non_ijson_envelope_is_refused_without_echoing_and_changes_nothing(
    ledger: Ledger,
) -> None:
    envelope = request_envelope("apr_1")
    envelope["request"]["action"]["arguments"] = {"token": "s3cret", "ratio": float("nan")}

    with pytest.raises(AAISValidationError) as caught:
        ledger.add_request(envelope)

    assert "s3cret" not in str(caught.value)
    assert ledger.get_request("apr_1") is None
    assert ledger.last_sequence() == 0
    assert ledger.audit_tip() is None

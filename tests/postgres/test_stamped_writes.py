"""Stamped writes: templates render the exact bytes; races the locked probe caught end the same.

The templates the client sends to ``aais_stamp`` must be the texts ``dump_json``
and RFC 8785 produce once the holes are filled (checked for arbitrary I-JSON,
including keys whose UTF-16 order differs from code-point order); the server's
SHA-256 over them is checked by ``verify_audit`` in every contract test. A
duplicate request or grant id written concurrently is refused by the table's
unique key, and answers as the locked check did.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aais_langgraph.ledger import verify_audit
from aais_langgraph.ledger._postgres_server_counters import dump_template, fill, jcs_template
from aais_langgraph.ledger.postgres import PostgresLedger
from aais_langgraph.ledger.records import dump_json
from aais_langgraph.protocol import canonical_json
from ledger.envelopes import approval, grant_for, request_envelope

_keys = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=6)
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _keys
)
_json = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=3),
    max_leaves=12,
)
_objects = st.dictionaries(st.sampled_from(["a", "\U0001f600", "\uff61", "z", "sequence"]) | _keys,
                           _json, max_size=6)  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(_objects, st.integers(0, 2**53 - 1))
def test_templates_render_what_dump_json_and_rfc8785_do(obj: dict[str, Any], sequence: int) -> None:
    stamped = {**obj, "sequence": sequence}
    hole = {"sequence": {"v": "s0"}}
    values = {"s0": sequence}
    assert fill(dump_template(stamped, hole), values) == dump_json(stamped)
    assert fill(jcs_template(stamped, hole), values).encode() == canonical_json(stamped)
    nested = {"index": 7, "payload": stamped}
    inner = {"index": {"v": "i0"}, "payload": jcs_template(stamped, hole)}
    assert fill(jcs_template(nested, inner), {**values, "i0": 7}).encode() == canonical_json(nested)


def test_one_request_added_by_racing_threads_is_created_once(postgres_url: str) -> None:
    with PostgresLedger.from_conn_string(postgres_url, pool_size=8) as ledger:
        ledger.setup()
        requested = request_envelope("apr_1")
        barrier = threading.Barrier(8)
        results: list[tuple[Any, bool]] = []

        def add() -> None:
            barrier.wait()
            results.append(ledger.add_request(requested))

        threads = [threading.Thread(target=add) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

        assert sorted(created for _, created in results) == [False] * 7 + [True]
        assert len({dump_json(stored.envelope) for stored, _ in results}) == 1
        contents = ledger.contents()
        assert [r.request_id for r in contents.requests] == ["apr_1"]
        assert contents.last_sequence == 1 and len(contents.audit) == 1
        assert verify_audit(contents.audit, contents.audit_tip).ok


def test_one_grant_id_recorded_by_racing_resolutions_is_recorded_once(postgres_url: str) -> None:
    with PostgresLedger.from_conn_string(postgres_url, pool_size=8) as ledger:
        ledger.setup()
        requests = [request_envelope(f"apr_{n}") for n in range(6)]
        for requested in requests:
            ledger.add_request(requested)
        barrier = threading.Barrier(len(requests))
        outcomes: list[str] = []

        def resolve(requested: dict[str, Any]) -> None:
            barrier.wait()
            try:
                ledger.record_resolution(
                    approval(requested, grant=grant_for(requested, grant_id="grt_1"))
                )
                outcomes.append("recorded")
            except ValueError as error:
                outcomes.append(str(error))

        threads = [threading.Thread(target=resolve, args=(r,)) for r in requests]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

        assert sorted(outcomes) == ["grant: a grant with this id is already recorded"] * 5 + [
            "recorded"
        ]
        contents = ledger.contents()
        assert len(contents.grants) == 1 and len(contents.resolutions) == 1
        assert verify_audit(contents.audit, contents.audit_tip).ok


@pytest.mark.parametrize("kind", ["conflict", "revoked"])
def test_an_appended_entry_comes_back_as_stored(postgres_url: str, kind: str) -> None:
    with PostgresLedger.from_conn_string(postgres_url) as ledger:
        ledger.setup()
        ledger.add_request(request_envelope("apr_1"))
        entry = ledger.append_audit(kind, {"request_id": "apr_1", "sequence": -(2**52)})
        assert ledger.audit_entries()[-1] == entry
        assert entry.index == 1 and entry.payload["sequence"] == -(2**52)


def test_a_connection_keeps_writing_after_a_refused_pipelined_write(postgres_url: str) -> None:
    # A refused write aborts its pipeline before the statements queued after the
    # failing one are parsed. psycopg prepares a statement on its fifth use: one
    # it meant to prepare there must not be taken for prepared on the next writes.
    rounds = 8
    with PostgresLedger.from_conn_string(postgres_url, pool_size=1) as ledger:
        ledger.setup()
        requests = [request_envelope(f"apr_{n}") for n in range(rounds + 1)]
        for requested in requests:
            ledger.add_request(requested)
        first, *rest = requests
        ledger.record_resolution(approval(first, grant=grant_for(first, grant_id="grt_1")))
        for requested in rest:
            with pytest.raises(ValueError, match="grant: a grant with this id"):
                ledger.record_resolution(
                    approval(requested, grant=grant_for(requested, grant_id="grt_1"))
                )
            ledger.record_resolution(approval(requested))
        for n in range(rounds):
            ledger.add_request(request_envelope(f"apr_more_{n}"))
        contents = ledger.contents()
        assert len(contents.resolutions) == rounds + 1
        assert len(contents.requests) == 2 * rounds + 1
        assert verify_audit(contents.audit, contents.audit_tip).ok

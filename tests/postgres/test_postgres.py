"""PostgreSQL specifics: construction, setup, connection modes, exact storage, raw-row tampering."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from psycopg.pq import TransactionStatus
from psycopg.rows import dict_row

from aais_langgraph.ledger import verify_audit
from aais_langgraph.ledger.executions import claim_change, finish_change
from aais_langgraph.ledger.postgres import PostgresLedger
from aais_langgraph.protocol import sha256_digest
from ledger.envelopes import approval, grant_for, request_envelope


def _populate(url: str) -> None:
    """Five audit entries: requested, decided, resolved, granted and a manual conflict."""
    with PostgresLedger.from_conn_string(url) as ledger:
        ledger.setup()
        requested = request_envelope("apr_1")
        ledger.add_request(requested, thread_id="thr_1")
        grant = grant_for(requested, grant_id="grt_1")
        ledger.record_resolution(approval(requested, grant=grant))
        ledger.append_audit("conflict", {"request_id": "apr_1"})


@contextmanager
def _raw(url: str) -> Iterator[psycopg.Connection[Any]]:
    """A plain connection, as an attacker with database access would use."""
    with psycopg.connect(url, autocommit=True) as conn:
        yield conn


def _verify(url: str) -> tuple[bool, int | None]:
    with PostgresLedger.from_conn_string(url) as ledger:
        result = verify_audit(ledger.audit_entries(), ledger.audit_tip())
    return result.ok, result.first_bad_index


def test_state_survives_reconnecting(postgres_url: str) -> None:
    _populate(postgres_url)

    with PostgresLedger.from_conn_string(postgres_url) as ledger:
        ledger.setup()
        request = ledger.get_request("apr_1")
        assert request is not None
        assert (request.status, request.thread_id) == ("resolved", "thr_1")
        assert ledger.get_resolution("apr_1") is not None
        assert [g.grant_id for g in ledger.list_grants()] == ["grt_1"]
        assert ledger.last_sequence() == 3
        assert verify_audit(ledger.audit_entries(), ledger.audit_tip()).ok


def test_setup_is_idempotent(postgres_url: str) -> None:
    with PostgresLedger.from_conn_string(postgres_url) as ledger:
        ledger.setup()
        ledger.add_request(request_envelope("apr_1"))
        ledger.setup()

        assert ledger.last_sequence() == 1
        assert ledger.get_request("apr_1") is not None


def test_setup_refuses_a_schema_of_another_version(postgres_url: str) -> None:
    with PostgresLedger.from_conn_string(postgres_url) as ledger:
        ledger.setup()
        with _raw(postgres_url) as conn:
            conn.execute("UPDATE aais_meta SET schema_version = 99")

        with pytest.raises(RuntimeError, match="schema version 99"):
            ledger.setup()


def test_writes_before_setup_fail_without_creating_anything(postgres_url: str) -> None:
    with PostgresLedger.from_conn_string(postgres_url) as ledger:
        with pytest.raises(psycopg.errors.UndefinedTable):
            ledger.add_request(request_envelope("apr_1"))
        ledger.setup()
        assert ledger.get_request("apr_1") is None


def test_ledger_works_on_a_connection_the_caller_owns_in_transaction_mode(
    postgres_url: str,
) -> None:
    """The connection LangGraph's PostgresSaver is handed (dict rows) works too, and the
    ledger commits its own work and leaves the connection idle."""
    with psycopg.connect(postgres_url, row_factory=dict_row) as conn:
        ledger = PostgresLedger(conn)
        ledger.setup()
        requested = request_envelope("apr_1")
        ledger.add_request(requested)
        assert conn.info.transaction_status == TransactionStatus.IDLE
        assert [r.request_id for r in ledger.list_pending()] == ["apr_1"]
        assert ledger.acquire_lease("thr_1", "a", ttl=10, now=0.0) is not None
        assert conn.info.transaction_status == TransactionStatus.IDLE
        assert ledger.record_resolution(approval(requested))[1]
        claim = claim_change("apr_1", "a", thread_id="thr_1", ttl=10, now=0.0, retry=False)
        assert ledger.update_execution("apr_1", claim, durable=False) is not None
        assert ledger.update_execution("apr_1", finish_change(1.0)) is not None
        assert ledger.release_lease("thr_1", "a", done=["apr_1"])
        assert conn.info.transaction_status == TransactionStatus.IDLE

    with PostgresLedger.from_conn_string(postgres_url) as other:
        assert other.get_request("apr_1") is not None
        assert other.acquire_lease("thr_1", "b", ttl=10, now=1.0) is not None
        record, _ = other.execution_with_entry("apr_1")
        assert record is not None and record.state == "executed"
        contents = other.contents()
        assert verify_audit(contents.audit, contents.audit_tip).ok


def test_a_connection_inside_a_transaction_is_refused(postgres_url: str) -> None:
    with psycopg.connect(postgres_url) as conn:
        PostgresLedger(conn).setup()
        conn.execute("SELECT 1")  # opens a transaction the caller has not ended

        with pytest.raises(RuntimeError, match="INTRANS"):
            PostgresLedger(conn).add_request(request_envelope("apr_1"))


def test_ledger_refuses_what_is_neither_connection_nor_pool() -> None:
    with pytest.raises(TypeError):
        PostgresLedger("postgresql://localhost/db")  # type: ignore[arg-type]


def test_from_conn_string_closes_its_connection(postgres_url: str) -> None:
    with PostgresLedger.from_conn_string(postgres_url) as ledger:
        ledger.setup()

    with pytest.raises(psycopg.OperationalError):
        ledger.last_sequence()


def test_pool_shared_by_threads_records_one_resolution(postgres_url: str) -> None:
    with PostgresLedger.from_conn_string(postgres_url, pool_size=8) as ledger:
        ledger.setup()
        requested = request_envelope("apr_1")
        ledger.add_request(requested)
        barrier = threading.Barrier(8)
        results: list[bool] = []

        def resolve(n: int) -> None:
            barrier.wait()
            write = approval(requested, resolution_id=f"res_{n}", decision_id=f"dec_{n}")
            results.append(ledger.record_resolution(write)[1])

        threads = [threading.Thread(target=resolve, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

        assert sorted(results) == [False] * 7 + [True]
        assert ledger.last_sequence() == 3


def test_racing_holders_take_a_free_lease_once(postgres_url: str) -> None:
    with PostgresLedger.from_conn_string(postgres_url, pool_size=8) as ledger:
        ledger.setup()
        barrier = threading.Barrier(8)
        holders: list[str] = []

        def acquire(n: int) -> None:
            barrier.wait()
            lease = ledger.acquire_lease("thr_1", f"worker_{n}", ttl=30, now=1000.0)
            if lease is not None:
                holders.append(lease.holder)

        threads = [threading.Thread(target=acquire, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

        assert len(holders) == 1
        assert ledger.renew_lease("thr_1", holders[0], ttl=30, now=1010.0) is not None


def test_pool_size_must_be_positive(postgres_url: str) -> None:
    with pytest.raises(ValueError), PostgresLedger.from_conn_string(postgres_url, pool_size=0):
        pass


def test_values_round_trip_exactly(ledger: PostgresLedger) -> None:
    """JSON is stored as text, so numbers keep their type and the digest its value
    (jsonb would return the float 1e20 as an integer beyond I-JSON's range)."""
    arguments = {"big": 1e20, "tenth": 0.1, "neg": -0.0, "nul": "a\u0000b", "z": 1, "a": "é😀"}
    envelope = request_envelope("apr_1", arguments=arguments)

    stored, _ = ledger.add_request(envelope, context={"interrupt": "i\u0000"})

    again = ledger.get_request("apr_1")
    assert again == stored
    stored_arguments = again.envelope["request"]["action"]["arguments"]
    assert stored_arguments == arguments
    assert [type(v) for v in stored_arguments.values()] == [type(v) for v in arguments.values()]
    assert sha256_digest(again.envelope) == sha256_digest({**envelope, "sequence": 1})


def test_list_pending_can_use_the_partial_index(ledger: PostgresLedger, postgres_url: str) -> None:
    ledger.add_request(request_envelope("apr_1"))
    with _raw(postgres_url) as conn:
        conn.execute("SET enable_seqscan = off")
        plan = conn.execute(
            "EXPLAIN SELECT request_id FROM aais_requests WHERE status = 'pending' "
            "AND session_id = 's1' ORDER BY sequence LIMIT 10"
        ).fetchall()

    assert "aais_requests_pending" in " ".join(row[0] for row in plan)


def test_ledger_shares_a_database_and_connection_with_the_langgraph_checkpointer(
    postgres_url: str,
) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver

    with psycopg.connect(
        postgres_url, autocommit=True, prepare_threshold=0, row_factory=dict_row
    ) as conn:
        saver = PostgresSaver(conn)
        saver.setup()
        ledger = PostgresLedger(conn)
        ledger.setup()
        ledger.add_request(request_envelope("apr_1"))

        assert list(saver.list(None)) == []
        assert ledger.last_sequence() == 1


def test_edited_row_is_named(postgres_url: str) -> None:
    _populate(postgres_url)
    with _raw(postgres_url) as conn:
        conn.execute(
            "UPDATE aais_audit SET payload = jsonb_set(payload::jsonb, '{outcome}', "
            "'\"denied\"')::text WHERE idx = 2"
        )

    assert _verify(postgres_url) == (False, 2)


def test_deleted_row_is_named(postgres_url: str) -> None:
    _populate(postgres_url)
    with _raw(postgres_url) as conn:
        conn.execute("DELETE FROM aais_audit WHERE idx = 1")

    assert _verify(postgres_url) == (False, 1)


def test_reordered_rows_are_named(postgres_url: str) -> None:
    _populate(postgres_url)
    with _raw(postgres_url) as conn:
        conn.execute("UPDATE aais_audit SET idx = -1 WHERE idx = 2")
        conn.execute("UPDATE aais_audit SET idx = 2 WHERE idx = 3")
        conn.execute("UPDATE aais_audit SET idx = 3 WHERE idx = -1")

    assert _verify(postgres_url) == (False, 2)


def test_truncated_rows_are_detected_against_the_recorded_tip(postgres_url: str) -> None:
    _populate(postgres_url)
    with _raw(postgres_url) as conn:
        conn.execute("DELETE FROM aais_audit WHERE idx >= 3")

    assert _verify(postgres_url) == (False, 3)

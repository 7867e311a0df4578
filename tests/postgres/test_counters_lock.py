"""A request and a resolution are one statement each; the counters' lock never waits on
the client; a failed write leaves nothing.

Read from libpq's own protocol trace of a real connection: the write function
takes the counters' row (``aais_stamp``) inside the one statement; on a database
without the function (set up by an older version) the lock waits for one client
turn, not one per statement. Leases and execution marks: ``test_write_functions``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg.pq import TransactionStatus

from aais_langgraph.ledger import verify_audit
from aais_langgraph.ledger.postgres import PostgresLedger
from ledger.envelopes import approval, grant_for, request_envelope
from support.pg_trace import statements_sent, traced


def _client_turns_under_the_lock(trace: list[str]) -> int:
    """How often the client waits for the server between taking the counters and COMMIT."""
    locking = next(
        i
        for i, line in enumerate(trace)
        if "FROM aais_meta FOR UPDATE" in line or "SELECT aais_stamp(" in line
    )
    commit = next(i for i, line in enumerate(trace) if i > locking and '"COMMIT"' in line)
    turns, sending = 0, True
    for line in trace[locking + 1 : commit + 1]:
        if line.startswith("B") and sending:
            sending = False  # the client now reads a reply
        elif line.startswith("F") and not sending:
            turns, sending = turns + 1, True
    return turns


@pytest.fixture
def conn(postgres_url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        PostgresLedger(connection).setup()
        yield connection


@pytest.mark.parametrize("with_grant", [False, True], ids=["once", "grant"])
def test_a_resolution_is_one_statement(conn: psycopg.Connection[Any], with_grant: bool) -> None:
    ledger = PostgresLedger(conn)
    requested = request_envelope("apr_1")
    ledger.add_request(requested)
    grant = grant_for(requested, grant_id="grt_1") if with_grant else None
    with traced(conn) as trace:
        assert ledger.record_resolution(approval(requested, grant=grant))[1]
    [statement] = statements_sent(trace)
    assert "aais_resolve(" in statement
    contents = ledger.contents()
    assert verify_audit(contents.audit, contents.audit_tip).ok
    assert [r.request_id for r in contents.resolutions] == ["apr_1"]
    assert len(contents.grants) == (1 if with_grant else 0)


def test_adding_a_request_is_one_statement(conn: psycopg.Connection[Any]) -> None:
    ledger = PostgresLedger(conn)
    ledger.add_request(request_envelope("apr_0"))  # the tombstones are read once a process
    with traced(conn) as trace:
        assert ledger.add_request(request_envelope("apr_1"))[1]
    [statement] = statements_sent(trace)
    assert "aais_add_request(" in statement


@pytest.mark.parametrize("with_grant", [False, True], ids=["once", "grant"])
def test_on_an_older_schema_a_resolution_holds_the_counters_for_one_client_turn(
    conn: psycopg.Connection[Any], with_grant: bool
) -> None:
    conn.execute("DROP FUNCTION aais_stamp(jsonb)")
    ledger = PostgresLedger(conn)
    requested = request_envelope("apr_1")
    ledger.add_request(requested)
    grant = grant_for(requested, grant_id="grt_1") if with_grant else None
    with traced(conn) as trace:
        ledger.record_resolution(approval(requested, grant=grant))
    assert _client_turns_under_the_lock(trace) == 1
    contents = ledger.contents()
    assert verify_audit(contents.audit, contents.audit_tip).ok


def test_on_an_older_schema_adding_a_request_holds_the_counters_for_one_client_turn(
    conn: psycopg.Connection[Any],
) -> None:
    conn.execute("DROP FUNCTION aais_stamp(jsonb)")
    ledger = PostgresLedger(conn)
    with traced(conn) as trace:
        ledger.add_request(request_envelope("apr_1"))
    assert _client_turns_under_the_lock(trace) == 1


def test_a_statement_failing_inside_the_batch_leaves_nothing_and_the_connection_idle(
    conn: psycopg.Connection[Any],
) -> None:
    ledger = PostgresLedger(conn)
    requested = request_envelope("apr_1")
    ledger.add_request(requested)
    before = ledger.contents()
    conn.execute(
        "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN RAISE EXCEPTION 'refused'; END $$"
    )
    conn.execute(
        "CREATE TRIGGER refuse BEFORE INSERT ON aais_resolutions "
        "FOR EACH ROW EXECUTE FUNCTION refuse()"
    )
    with pytest.raises(psycopg.errors.RaiseException):
        ledger.record_resolution(approval(requested))
    assert conn.info.transaction_status == TransactionStatus.IDLE
    assert ledger.contents() == before
    conn.execute("DROP TRIGGER refuse ON aais_resolutions")
    assert ledger.record_resolution(approval(requested))[1]
    contents = ledger.contents()
    assert verify_audit(contents.audit, contents.audit_tip).ok
    assert contents.last_sequence == before.last_sequence + 2


def test_a_refused_grant_leaves_nothing_and_the_connection_idle(
    conn: psycopg.Connection[Any],
) -> None:
    ledger = PostgresLedger(conn)
    first, second = request_envelope("apr_1"), request_envelope("apr_2")
    ledger.add_request(first)
    ledger.add_request(second)
    ledger.record_resolution(approval(first, grant=grant_for(first, grant_id="grt_1")))
    before = ledger.contents()
    with pytest.raises(ValueError, match="grant"):
        ledger.record_resolution(approval(second, grant=grant_for(second, grant_id="grt_1")))
    assert conn.info.transaction_status == TransactionStatus.IDLE
    assert ledger.contents() == before

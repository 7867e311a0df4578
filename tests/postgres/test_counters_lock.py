"""The counters' lock never waits on the client, and a failed pipelined write leaves nothing.

Read from libpq's own protocol trace of a real connection: the statement that
takes the counters' row (``aais_stamp``) goes out with the ``COMMIT``, nothing
read in between; on a database without the function (set up by an older
version) the lock waits for one client turn, not one per statement.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.pq import Trace, TransactionStatus

from aais_langgraph.ledger import verify_audit
from aais_langgraph.ledger.postgres import PostgresLedger
from ledger.envelopes import approval, grant_for, request_envelope


@contextmanager
def _traced(conn: psycopg.Connection[Any]) -> Iterator[list[str]]:
    """The protocol messages (``F``rontend and ``B``ackend lines) sent on ``conn``."""
    lines: list[str] = []
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "trace"
        with path.open("w") as sink:
            conn.pgconn.trace(sink.fileno())
            conn.pgconn.set_trace_flags(Trace.SUPPRESS_TIMESTAMPS | Trace.REGRESS_MODE)
            try:
                yield lines
            finally:
                conn.pgconn.untrace()
        lines.extend(path.read_text().splitlines())


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


@pytest.mark.parametrize("stamped", [True, False], ids=["stamped", "older-schema"])
@pytest.mark.parametrize("with_grant", [False, True], ids=["once", "grant"])
def test_a_resolution_holds_the_counters_for_no_client_turn(
    conn: psycopg.Connection[Any], with_grant: bool, stamped: bool
) -> None:
    if not stamped:
        conn.execute("DROP FUNCTION aais_stamp(jsonb)")
    ledger = PostgresLedger(conn)
    requested = request_envelope("apr_1")
    ledger.add_request(requested)
    grant = grant_for(requested, grant_id="grt_1") if with_grant else None
    with _traced(conn) as trace:
        ledger.record_resolution(approval(requested, grant=grant))
    assert _client_turns_under_the_lock(trace) == (0 if stamped else 1)
    contents = ledger.contents()
    assert verify_audit(contents.audit, contents.audit_tip).ok


@pytest.mark.parametrize("stamped", [True, False], ids=["stamped", "older-schema"])
def test_adding_a_request_holds_the_counters_for_no_client_turn(
    conn: psycopg.Connection[Any], stamped: bool
) -> None:
    if not stamped:
        conn.execute("DROP FUNCTION aais_stamp(jsonb)")
    ledger = PostgresLedger(conn)
    with _traced(conn) as trace:
        ledger.add_request(request_envelope("apr_1"))
    assert _client_turns_under_the_lock(trace) == (0 if stamped else 1)


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


def test_leases_and_execution_marks_commit_without_waiting_for_the_wal_flush(
    conn: psycopg.Connection[Any],
) -> None:
    from aais_langgraph.ledger.executions import claim_change

    ledger = PostgresLedger(conn)
    requested = request_envelope("apr_1")
    with _traced(conn) as synced:
        ledger.add_request(requested)
        ledger.record_resolution(approval(requested))
    with _traced(conn) as relaxed:
        assert ledger.acquire_lease("t1", "h1", ttl=30, now=1000.0) is not None
        claim = claim_change("apr_1", "h1", thread_id="t1", ttl=30, now=1000.0, retry=False)
        assert ledger.update_execution("apr_1", claim, durable=False) is not None
        assert ledger.release_lease("t1", "h1")
    off = "SET LOCAL synchronous_commit TO OFF"
    assert not any(off in line for line in synced)
    assert sum(off in line for line in relaxed) == 3
    assert ledger.execution_with_entry("apr_1")[0] is not None

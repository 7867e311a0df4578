"""Leases and execution marks are one statement each; made on stale knowledge, a mark
writes nothing and the shared write decides; only durable writes wait for the WAL flush.

An execution mark is sent as ``aais_execute`` on the record this ledger wrote last
for the request and the audit row that vouched for it. Another writer's change, an
edited row or an edited audit entry makes the server refuse it; the shared write
then reads, checks and changes the stored record (and refuses what the chain does
not vouch for). Whether a commit waited for the WAL flush is read at the commit
itself, by deferred constraint triggers that note ``synchronous_commit``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from aais_langgraph.ledger import CompactedRequestError, LedgerIntegrityError, verify_audit
from aais_langgraph.ledger.executions import claim_change, finish_change
from aais_langgraph.ledger.postgres import PostgresLedger
from aais_langgraph.protocol import AAISValidationError
from ledger.envelopes import approval, request_envelope
from support.pg_trace import statements_sent, traced


@pytest.fixture
def conn(postgres_url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        ledger = PostgresLedger(connection)
        ledger.setup()
        requested = request_envelope("apr_1")
        ledger.add_request(requested)
        ledger.record_resolution(approval(requested))
        yield connection


def _claim(holder: str, now: float, *, retry: bool = False) -> Any:
    return claim_change("apr_1", holder, thread_id="t1", ttl=30, now=now, retry=retry)


def _execution_entries(ledger: PostgresLedger) -> list[Any]:
    return [entry for entry in ledger.contents().audit if entry.kind == "execution"]


def test_a_lease_and_an_execution_claim_and_outcome_are_one_statement_each(
    conn: psycopg.Connection[Any],
) -> None:
    ledger = PostgresLedger(conn)
    ledger.add_request(request_envelope("apr_0"))  # the schema's server side is asked once
    with traced(conn) as trace:
        assert ledger.acquire_lease("t1", "h1", ttl=30, now=1000.0) is not None
        assert ledger.renew_lease("t1", "h1", ttl=30, now=1001.0) is not None
        claimed = ledger.update_execution("apr_1", _claim("h1", 1000.0), durable=False)
        finished = ledger.update_execution("apr_1", finish_change(1002.0), durable=False)
        assert ledger.release_lease("t1", "h1", done=["apr_1"])
    sent = statements_sent(trace)
    functions = ["acquire_lease", "renew_lease", "execute", "execute", "release_lease"]
    assert len(sent) == len(functions)
    assert all(f"aais_{name}(" in line for name, line in zip(functions, sent, strict=True))
    assert claimed is not None and claimed.state == "executing"
    assert finished is not None and finished.state == "executed"
    record, entry = ledger.execution_with_entry("apr_1")
    assert record == finished and entry is not None and entry.payload["state"] == "executed"
    assert ledger.get_lease("t1") is None
    contents = ledger.contents()
    assert verify_audit(contents.audit, contents.audit_tip).ok


def test_a_lease_held_by_another_is_not_taken_and_an_expired_one_is(
    conn: psycopg.Connection[Any],
) -> None:
    ledger = PostgresLedger(conn)
    assert ledger.acquire_lease("t1", "h1", ttl=30, now=1000.0) is not None
    assert ledger.acquire_lease("t1", "h2", ttl=30, now=1010.0) is None
    assert ledger.renew_lease("t1", "h2", ttl=30, now=1010.0) is None
    assert not ledger.release_lease("t1", "h2")
    assert ledger.acquire_lease("t1", "h2", ttl=30, now=1030.0) is not None
    assert ledger.renew_lease("t1", "h1", ttl=30, now=1031.0) is None
    lease = ledger.get_lease("t1")
    assert lease is not None and lease.holder == "h2"


def test_a_mark_on_a_record_another_ledger_changed_is_made_on_the_stored_one(
    conn: psycopg.Connection[Any], postgres_url: str
) -> None:
    ledger = PostgresLedger(conn)
    with psycopg.connect(postgres_url, autocommit=True) as other_conn:
        other = PostgresLedger(other_conn)
        assert ledger.update_execution("apr_1", _claim("h1", 1000.0)) is not None
        # The other ledger has written nothing for it: it reads the live claim, keeps it.
        kept = other.update_execution("apr_1", _claim("h2", 1001.0))
        assert kept is not None and kept.holder == "h1" and kept.state == "executing"
        finished = other.update_execution("apr_1", finish_change(1002.0))
        assert finished is not None and finished.state == "executed"
    # This ledger last wrote the claim; the stored record is the other's outcome.
    again = ledger.update_execution("apr_1", finish_change(1003.0))
    assert again == finished
    assert [entry.payload["state"] for entry in _execution_entries(ledger)] == [
        "executing",
        "executed",
    ]
    contents = ledger.contents()
    assert verify_audit(contents.audit, contents.audit_tip).ok


@pytest.mark.parametrize(
    "edit",
    [
        "UPDATE aais_executions SET state = 'done', reconciled_by = 'mallory'",
        "UPDATE aais_audit SET payload = replace(payload, '\"h1\"', '\"h9\"') "
        "WHERE kind = 'execution'",
        "DELETE FROM aais_executions",
    ],
    ids=["row-edited", "entry-edited", "row-deleted"],
)
def test_a_mark_on_an_edited_record_or_entry_is_refused_and_writes_nothing(
    conn: psycopg.Connection[Any], edit: str
) -> None:
    ledger = PostgresLedger(conn)
    assert ledger.update_execution("apr_1", _claim("h1", 1000.0)) is not None
    conn.execute(edit)
    before = ledger.contents()
    with pytest.raises(LedgerIntegrityError) as raised:
        ledger.update_execution("apr_1", _claim("h1", 2000.0, retry=True))
    assert raised.value.table == "aais_executions"
    assert ledger.contents() == before


def test_a_first_claim_over_a_planted_record_is_refused(conn: psycopg.Connection[Any]) -> None:
    ledger = PostgresLedger(conn)
    conn.execute(
        "INSERT INTO aais_executions (request_id, thread_id, state, holder, attempt, "
        "started_at, live_until, updated_at) VALUES ('apr_1', NULL, 'executed', 'x', 1, 1, 1, 1)"
    )
    before = ledger.contents()
    with pytest.raises(LedgerIntegrityError):
        ledger.update_execution("apr_1", _claim("h1", 1000.0))
    assert ledger.contents() == before


_NOTE_COMMITS = (
    "CREATE TABLE commits_seen (seen SERIAL, tbl TEXT, op TEXT, sync TEXT)",
    "CREATE FUNCTION note_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "INSERT INTO commits_seen (tbl, op, sync) "
    "VALUES (TG_TABLE_NAME, TG_OP, current_setting('synchronous_commit')); "
    "RETURN NULL; END $$",
    *(
        f"CREATE CONSTRAINT TRIGGER note_commit AFTER INSERT OR UPDATE OR DELETE ON {table} "
        "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION note_commit()"
        for table in ("aais_requests", "aais_resolutions", "aais_leases", "aais_executions")
    ),
)


def test_only_leases_and_marks_asked_not_to_commit_without_the_wal_flush(
    conn: psycopg.Connection[Any],
) -> None:
    for statement in _NOTE_COMMITS:
        conn.execute(statement)
    conn.execute("SET synchronous_commit TO on")  # the test server's default is off
    ledger = PostgresLedger(conn)
    requested = request_envelope("apr_2")
    ledger.add_request(requested)
    ledger.record_resolution(approval(requested))
    assert ledger.acquire_lease("t2", "h1", ttl=30, now=1000.0) is not None
    claim = claim_change("apr_2", "h1", thread_id="t2", ttl=30, now=1000.0, retry=False)
    assert ledger.update_execution("apr_2", claim, durable=False) is not None
    assert ledger.update_execution("apr_2", finish_change(1001.0), durable=True) is not None
    assert ledger.release_lease("t2", "h1")
    seen = conn.execute("SELECT tbl, op, sync FROM commits_seen ORDER BY seen").fetchall()
    assert seen == [
        ("aais_requests", "INSERT", "on"),
        ("aais_requests", "UPDATE", "on"),
        ("aais_resolutions", "INSERT", "on"),
        ("aais_leases", "INSERT", "off"),
        ("aais_executions", "INSERT", "off"),
        ("aais_executions", "UPDATE", "on"),
        ("aais_leases", "DELETE", "off"),
    ]
    assert conn.execute("SHOW synchronous_commit").fetchone() == ("on",)


def test_a_request_whose_id_another_process_compacted_is_refused_by_the_server(
    conn: psycopg.Connection[Any],
) -> None:
    ledger = PostgresLedger(conn)
    ledger.add_request(request_envelope("apr_2"))  # this process has read the tombstones
    conn.execute("INSERT INTO aais_compacted_requests (request_id) VALUES ('apr_3')")
    before = ledger.contents()
    with traced(conn) as trace, pytest.raises(CompactedRequestError):
        ledger.add_request(request_envelope("apr_3"))
    [statement] = statements_sent(trace)
    assert "aais_add_request(" in statement
    assert ledger.contents() == before


def test_a_replayed_request_and_resolution_answer_what_was_recorded(
    conn: psycopg.Connection[Any],
) -> None:
    ledger = PostgresLedger(conn)
    requested = request_envelope("apr_1")
    before = ledger.contents()
    stored, created = ledger.add_request(requested)
    assert not created and stored == ledger.get_request("apr_1")
    resolution, created = ledger.record_resolution(approval(requested))
    assert not created and resolution == ledger.get_resolution("apr_1")
    with pytest.raises(KeyError):
        ledger.record_resolution(approval(request_envelope("apr_404")))
    assert ledger.contents() == before


def test_a_mark_with_a_time_that_is_not_finite_is_refused_naming_the_field(
    conn: psycopg.Connection[Any],
) -> None:
    ledger = PostgresLedger(conn)
    before = ledger.contents()
    with pytest.raises(AAISValidationError) as raised:
        ledger.update_execution("apr_1", _claim("h1", float("inf")))
    assert raised.value.pointer == "/payload/started_at"
    assert ledger.contents() == before


def _claim_of(request_id: str, holder: str, now: float) -> Any:
    return claim_change(request_id, holder, thread_id="t2", ttl=30, now=now, retry=False)


def test_an_approval_carrying_its_claim_is_one_statement_and_the_next_mark_one_more(
    conn: psycopg.Connection[Any],
) -> None:
    ledger = PostgresLedger(conn)
    requested = request_envelope("apr_2")
    ledger.add_request(requested, thread_id="t2")
    with traced(conn) as trace:
        recorded, created, claimed = ledger.record_resolution_claiming(
            approval(requested), _claim_of("apr_2", "h1", 1000.0)
        )
        finished = ledger.update_execution("apr_2", finish_change(1002.0))
    sent = statements_sent(trace)
    assert len(sent) == 2
    assert "aais_resolve_claiming(" in sent[0] and "aais_execute(" in sent[1]
    assert created and recorded == ledger.get_resolution("apr_2")
    assert claimed is not None and claimed.state == "executing" and claimed.holder == "h1"
    assert finished is not None and finished.state == "executed"
    assert ledger.execution_with_entry("apr_2")[0] == finished
    # The resume work committed with the answer, its thread read from the request's row.
    [work] = ledger.list_work("resume", request_id="apr_2")
    assert work.thread_id == "t2"
    # The claim's entry follows the resolution's, and the chain holds.
    contents = ledger.contents()
    kinds = [entry.kind for entry in contents.audit if entry.index > recorded.audit_index]
    assert kinds == ["execution", "execution"]
    assert verify_audit(contents.audit, contents.audit_tip).ok


def test_a_replayed_or_unknown_approval_carrying_a_claim_writes_nothing(
    conn: psycopg.Connection[Any],
) -> None:
    ledger = PostgresLedger(conn)
    before = ledger.contents()
    with traced(conn) as trace:
        replayed = ledger.record_resolution_claiming(
            approval(request_envelope("apr_1")), _claim_of("apr_1", "h1", 1000.0)
        )
    # The probe of the schema's server side, the one write, the read of the winner.
    *_, statement, read = statements_sent(trace)
    assert "aais_resolve_claiming(" in statement and "FROM aais_resolutions" in read
    assert replayed == (ledger.get_resolution("apr_1"), False, None)
    with pytest.raises(KeyError):
        ledger.record_resolution_claiming(
            approval(request_envelope("apr_404")), _claim_of("apr_404", "h1", 1000.0)
        )
    assert ledger.contents() == before


def test_a_denial_carrying_a_claim_claims_nothing(conn: psycopg.Connection[Any]) -> None:
    ledger = PostgresLedger(conn)
    requested = request_envelope("apr_2")
    ledger.add_request(requested)
    with traced(conn) as trace:
        _, created, claimed = ledger.record_resolution_claiming(
            approval(requested, outcome="denied"), _claim_of("apr_2", "h1", 1000.0)
        )
    [statement] = statements_sent(trace)
    assert "aais_resolve(" in statement
    assert created and claimed is None
    assert ledger.execution_with_entry("apr_2") == (None, None)


def test_an_approval_claiming_over_a_planted_record_is_refused_and_stays_pending(
    conn: psycopg.Connection[Any],
) -> None:
    ledger = PostgresLedger(conn)
    requested = request_envelope("apr_2")
    ledger.add_request(requested, thread_id="t2")
    conn.execute(
        "INSERT INTO aais_executions (request_id, thread_id, state, holder, attempt, "
        "started_at, live_until, updated_at) VALUES ('apr_2', 't2', 'executed', 'x', 1, 1, 1, 1)"
    )
    before = ledger.contents()
    with traced(conn) as trace, pytest.raises(LedgerIntegrityError) as raised:
        ledger.record_resolution_claiming(approval(requested), _claim_of("apr_2", "h1", 1000.0))
    # The server refused the one statement; the shared transaction then refused the same.
    assert "aais_resolve_claiming(" in statements_sent(trace)[0]
    assert raised.value.table == "aais_executions"
    assert ledger.contents() == before
    assert ledger.get_resolution("apr_2") is None
    assert ledger.list_work("resume", request_id="apr_2") == []


def test_an_approval_claiming_with_a_time_that_is_not_finite_is_refused_naming_the_field(
    conn: psycopg.Connection[Any],
) -> None:
    ledger = PostgresLedger(conn)
    requested = request_envelope("apr_2")
    ledger.add_request(requested)
    before = ledger.contents()
    with pytest.raises(AAISValidationError) as raised:
        ledger.record_resolution_claiming(
            approval(requested), _claim_of("apr_2", "h1", float("inf"))
        )
    assert raised.value.pointer == "/payload/started_at"
    assert ledger.contents() == before

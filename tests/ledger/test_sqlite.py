"""SQLite specifics: durable reopen, schema setup, raw-row tampering and flat per-call cost."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing, contextmanager
from pathlib import Path

import pytest

from aais_langgraph.ledger import (
    NotALedgerError,
    ResolutionWrite,
    SqliteLedger,
    open_ledger,
    verify_audit,
)

from .envelopes import approval, grant_for, request_envelope


def _populate(path: Path) -> None:
    """Five audit entries: requested, decided, resolved, granted and a manual conflict."""
    with SqliteLedger.from_conn_string(path) as ledger:
        requested = request_envelope("apr_1")
        ledger.add_request(requested, thread_id="thr_1")
        grant = grant_for(requested, grant_id="grt_1")
        ledger.record_resolution(approval(requested, grant=grant))
        ledger.append_audit("conflict", {"request_id": "apr_1"})


@contextmanager
def _raw(path: Path) -> Iterator[sqlite3.Connection]:
    """A plain sqlite3 connection, as an attacker with file access would use."""
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        yield conn


def _verify(path: Path) -> tuple[bool, int | None]:
    with SqliteLedger.from_path(path) as ledger:
        result = verify_audit(ledger.audit_entries(), ledger.audit_tip())
    return result.ok, result.first_bad_index


def test_state_survives_reopening_the_file(sqlite_path: Path) -> None:
    _populate(sqlite_path)

    with SqliteLedger.from_path(sqlite_path) as ledger:
        ledger.setup()
        request = ledger.get_request("apr_1")
        assert request is not None
        assert (request.status, request.thread_id) == ("resolved", "thr_1")
        assert ledger.get_resolution("apr_1") is not None
        assert [g.grant_id for g in ledger.list_grants()] == ["grt_1"]
        assert ledger.last_sequence() == 3
        assert verify_audit(ledger.audit_entries(), ledger.audit_tip()).ok


def test_setup_is_idempotent_and_uses_wal(sqlite_path: Path) -> None:
    with SqliteLedger.from_path(sqlite_path) as ledger:
        ledger.setup()
        ledger.add_request(request_envelope("apr_1"))
        ledger.setup()
        assert ledger.last_sequence() == 1

    with _raw(sqlite_path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_ledger_works_on_a_connection_the_caller_owns(sqlite_path: Path) -> None:
    conn = sqlite3.connect(sqlite_path, check_same_thread=False)  # legacy transaction mode
    ledger = SqliteLedger(conn)
    ledger.setup()

    ledger.add_request(request_envelope("apr_1"))
    ledger.close()

    assert conn.in_transaction is False
    assert conn.execute("SELECT COUNT(*) FROM aais_requests").fetchone()[0] == 1
    conn.close()


def test_a_fresh_file_is_set_up_on_first_use(sqlite_path: Path) -> None:
    with SqliteLedger.from_conn_string(sqlite_path) as ledger:
        assert ledger.is_set_up() is False  # asking does not create anything
        stored, created = ledger.add_request(request_envelope("apr_1"))
        assert (created, stored.envelope["sequence"]) == (True, 1)
        assert ledger.is_set_up() is True
        ledger.setup()  # still allowed, and changes nothing
        assert ledger.last_sequence() == 1

    with _raw(sqlite_path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_threads_racing_on_a_fresh_file_set_it_up_once(sqlite_path: Path) -> None:
    with SqliteLedger.from_conn_string(sqlite_path) as ledger, ThreadPoolExecutor(8) as pool:
        stored = list(
            pool.map(lambda n: ledger.add_request(request_envelope(f"apr_{n}")), range(8))
        )

        assert sorted(s.envelope["sequence"] for s, _ in stored) == list(range(1, 9))
        assert verify_audit(ledger.audit_entries(), ledger.audit_tip()).checked == 8


def test_reading_a_fresh_file_sets_it_up_too(sqlite_path: Path) -> None:
    with SqliteLedger.from_conn_string(sqlite_path) as ledger:
        assert ledger.list_pending() == []
        assert ledger.is_set_up() is True


def test_auto_setup_off_expects_the_tables(sqlite_path: Path) -> None:
    with SqliteLedger.from_conn_string(sqlite_path, auto_setup=False) as ledger:
        with pytest.raises(sqlite3.OperationalError, match="no such table"):
            ledger.add_request(request_envelope("apr_1"))
        assert ledger.is_set_up() is False


def test_open_ledger_refuses_an_empty_file_before_anything_writes(sqlite_path: Path) -> None:
    sqlite_path.touch()

    with pytest.raises(NotALedgerError), open_ledger(str(sqlite_path), create=False):
        pass

    assert sqlite_path.stat().st_size == 0


def test_from_conn_string_closes_its_connection(sqlite_path: Path) -> None:
    with SqliteLedger.from_conn_string(sqlite_path) as ledger:
        ledger.last_sequence()

    with pytest.raises(sqlite3.ProgrammingError):
        ledger.last_sequence()


def test_from_path_closes_its_connection(sqlite_path: Path) -> None:
    with SqliteLedger.from_path(sqlite_path) as ledger:
        ledger.setup()

    with pytest.raises(sqlite3.ProgrammingError):
        ledger.last_sequence()


def test_edited_row_is_named(sqlite_path: Path) -> None:
    _populate(sqlite_path)
    with _raw(sqlite_path) as conn:
        conn.execute(
            "UPDATE aais_audit SET payload = json_set(payload, '$.outcome', 'denied') WHERE idx = 2"
        )

    assert _verify(sqlite_path) == (False, 2)


def test_deleted_row_is_named(sqlite_path: Path) -> None:
    _populate(sqlite_path)
    with _raw(sqlite_path) as conn:
        conn.execute("DELETE FROM aais_audit WHERE idx = 1")

    assert _verify(sqlite_path) == (False, 1)


def test_reordered_rows_are_named(sqlite_path: Path) -> None:
    _populate(sqlite_path)
    with _raw(sqlite_path) as conn:
        conn.execute("UPDATE aais_audit SET idx = -1 WHERE idx = 2")
        conn.execute("UPDATE aais_audit SET idx = 2 WHERE idx = 3")
        conn.execute("UPDATE aais_audit SET idx = 3 WHERE idx = -1")

    assert _verify(sqlite_path) == (False, 2)


def test_truncated_rows_are_detected_against_the_recorded_tip(sqlite_path: Path) -> None:
    _populate(sqlite_path)
    with _raw(sqlite_path) as conn:
        conn.execute("DELETE FROM aais_audit WHERE idx >= 3")

    assert _verify(sqlite_path) == (False, 3)


def _count_vm_steps(conn: sqlite3.Connection, call: Callable[[], object]) -> int:
    """SQLite virtual-machine steps one call takes: a deterministic measure of its cost."""
    steps = 0

    def tick() -> int:
        nonlocal steps
        steps += 1
        return 0

    conn.set_progress_handler(tick, 1)
    try:
        call()
    finally:
        conn.set_progress_handler(None, 1)
    return steps


def _decide_costs(conn: sqlite3.Connection, ledger: SqliteLedger, tag: str) -> dict[str, int]:
    """Steps of one decide round trip (lookup, record, pending view) at the current size."""
    requested = request_envelope(f"apr_probe_{tag}")
    ledger.add_request(requested)
    return {
        "get_request": _count_vm_steps(conn, lambda: ledger.get_request(f"apr_probe_{tag}")),
        "record_resolution": _count_vm_steps(
            conn, lambda: ledger.record_resolution(approval(requested, resolution_id=f"r_{tag}"))
        ),
        "list_pending": _count_vm_steps(conn, lambda: ledger.list_pending(session_id="sess_1")),
    }


def test_decide_cost_stays_flat_as_resolutions_accumulate(sqlite_path: Path) -> None:
    conn = sqlite3.connect(sqlite_path, isolation_level=None, check_same_thread=False)
    ledger = SqliteLedger(conn, synchronous="OFF")
    ledger.setup()
    template = request_envelope("apr_template")
    write_template = approval(template, decision_id=None)

    def add_resolved(start: int, stop: int) -> None:
        for n in range(start, stop):
            requested = {**template, "request": {**template["request"], "id": f"apr_{n}"}}
            resolved = write_template.resolved
            resolution = {**resolved["resolution"], "request_id": f"apr_{n}", "id": f"res_{n}"}
            ledger.add_request(requested)
            ledger.record_resolution(
                ResolutionWrite(f"apr_{n}", {**resolved, "resolution": resolution})
            )

    for n in range(3):  # a few requests stay pending throughout
        ledger.add_request(request_envelope(f"apr_open_{n}"))

    add_resolved(0, 500)
    small = _decide_costs(conn, ledger, "small")
    add_resolved(500, 4000)
    large = _decide_costs(conn, ledger, "large")
    conn.close()

    for name, cost in small.items():
        assert large[name] < cost * 1.25, (name, small, large)


def test_open_ledger_without_setup_creates_no_tables(sqlite_path: Path) -> None:
    with open_ledger(str(sqlite_path), setup=False) as ledger:
        with pytest.raises(sqlite3.OperationalError, match="no such table"):
            ledger.last_sequence()
        assert ledger.is_set_up() is False


def test_a_set_up_file_is_read_without_writing(sqlite_path: Path) -> None:
    _populate(sqlite_path)
    read_only = sqlite3.connect(
        f"file:{sqlite_path}?mode=ro", uri=True, isolation_level=None, check_same_thread=False
    )
    with closing(read_only):
        ledger = SqliteLedger(read_only, synchronous=None)
        assert ledger.last_sequence() == 3
        assert verify_audit(ledger.audit_entries(), ledger.audit_tip()).ok


def _plans_of_request_reads(path: Path, read: Callable[[SqliteLedger], object]) -> list[str]:
    """The query plan of every statement ``read`` sends that reads ``aais_requests``."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    sent: list[str] = []
    with closing(conn):
        ledger = SqliteLedger(conn)
        conn.set_trace_callback(sent.append)
        read(ledger)
        conn.set_trace_callback(None)
        reads = [sql for sql in sent if sql.lstrip().upper().startswith("SELECT")]
        return [
            " ".join(str(step[-1]) for step in conn.execute(f"EXPLAIN QUERY PLAN {sql}"))
            for sql in reads
            if re.search(r"\bFROM aais_requests\b", sql)
        ]


COVERING = "USING COVERING INDEX aais_requests_pending_rows"


@pytest.mark.parametrize(
    ("read", "index"),
    [
        (lambda ledger: ledger.list_pending_rows(), COVERING),
        # One session's rows come from its own partial index: O(its pending), in order.
        (
            lambda ledger: ledger.list_pending_rows(session_id="sess_1"),
            "USING INDEX aais_requests_pending_sessions (session_id=?)",
        ),
        # One thread's rows: its index, in sequence order (O(the thread's requests)).
        (
            lambda ledger: ledger.list_pending(thread_id="thr_1", limit=5),
            "USING INDEX aais_requests_thread (thread_id=?)",
        ),
        (lambda ledger: ledger.list_pending(expires_before=2e9), COVERING),
    ],
    ids=["all", "one session", "one thread", "expiring"],
)
def test_pending_requests_are_read_from_an_index_in_order(
    sqlite_path: Path, read: Callable[[SqliteLedger], object], index: str
) -> None:
    """A listing never searches the whole history row by row: its rows come from the
    covering partial index (or one session's or one thread's own), in sequence order,
    with no sort step."""
    _populate(sqlite_path)
    with SqliteLedger.from_path(sqlite_path) as ledger:
        for n in range(3):
            ledger.add_request(request_envelope(f"apr_open_{n}"), thread_id="thr_1")

    plans = _plans_of_request_reads(sqlite_path, read)

    assert plans, "the listing read no aais_requests rows"
    for plan in plans:
        assert index in plan, plan
        assert "TEMP B-TREE" not in plan, plan

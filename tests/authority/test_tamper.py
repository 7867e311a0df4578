"""Tampering with the stored rows is detected: ``verify_audit`` names the table and id.

Every tamper is raw SQL on a real SQLite file (and, for the ones marked so, on
PostgreSQL), exactly what someone with write access to the database can do.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from aais_langgraph.authority import ApprovalAuthority
from aais_langgraph.ledger import Ledger, LedgerIntegrityError, SqliteLedger
from aais_langgraph.ledger.executions import claim_change, finish_change
from hostile.report import record

from .support import START, FakeClock, decision, new_request


@dataclass
class Tampered:
    """A set-up ledger with a denied, an approved-with-grant, a revoked and a pending request."""

    authority: ApprovalAuthority
    raw: Callable[..., list[tuple[Any, ...]]]
    backend: str
    denied: str
    approved: str
    pending: str
    grant_id: str
    revoked_grant_id: str

    def set_tip(self, index: int | None, entry_hash: str | None) -> None:
        if self.backend == "sqlite":
            if index is None:
                self.raw("DELETE FROM aais_meta WHERE key = 'audit_tip'")
            else:
                self.raw(
                    "UPDATE aais_meta SET value = ? WHERE key = 'audit_tip'",
                    json.dumps([index, entry_hash]),
                )
        else:
            self.raw(
                "UPDATE aais_meta SET audit_tip_index = ?, audit_tip_hash = ?", index, entry_hash
            )


def _history(authority: ApprovalAuthority) -> dict[str, str]:
    denied = new_request(authority, command="node --check denied.js")
    authority.decide(decision(denied, "deny"))
    approved = new_request(authority, command="node --check approved.js")
    authority.decide(decision(approved, scope="session"))
    revoked = new_request(authority, command="node --check revoked.js")
    authority.decide(decision(revoked, scope="session"))
    grants = {g.request_id: g.grant_id for g in authority.list_grants(include_revoked=True)}
    authority.revoke_grant(grants[revoked.request.id])
    pending = new_request(authority, command="node --check script.js")
    return {
        "denied": denied.request.id,
        "approved": approved.request.id,
        "pending": pending.request.id,
        "grant_id": grants[approved.request.id],
        "revoked_grant_id": grants[revoked.request.id],
    }


@contextmanager
def _sqlite(path: Path) -> Iterator[tuple[Ledger, Callable[..., list[tuple[Any, ...]]]]]:
    with SqliteLedger.from_path(path) as ledger:
        ledger.setup()

        def raw(sql: str, *params: Any) -> list[tuple[Any, ...]]:
            with sqlite3.connect(path) as conn:
                return conn.execute(sql, params).fetchall()

        yield ledger, raw


@contextmanager
def _postgres(url: str) -> Iterator[tuple[Ledger, Callable[..., list[tuple[Any, ...]]]]]:
    import psycopg

    from aais_langgraph.ledger.postgres import PostgresLedger

    with PostgresLedger.from_conn_string(url) as ledger:
        ledger.setup()

        def raw(sql: str, *params: Any) -> list[tuple[Any, ...]]:
            with psycopg.connect(url, autocommit=True) as conn:
                cur = conn.execute(sql.replace("?", "%s"), params)
                return cur.fetchall() if cur.description else []

        yield ledger, raw


@pytest.fixture(params=["sqlite", "postgres"])
def tampered(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Tampered]:
    if request.param == "sqlite":
        opened = _sqlite(tmp_path / "tamper.db")
    else:
        opened = _postgres(request.getfixturevalue("postgres_url"))
    with opened as (ledger, raw):
        authority = ApprovalAuthority(ledger, clock=FakeClock(START))
        ids = _history(authority)
        assert authority.verify_audit().ok
        yield Tampered(authority, raw, request.param, **ids)


def sqlite_only(tampered: Tampered) -> None:
    if tampered.backend != "sqlite":
        pytest.skip("covered on SQLite; Postgres runs the main three")


def tally(*passed: bool) -> None:
    """One tamper in the hostile-input table; failed open if a verification passed."""
    record("tampering", 1, failed_open=int(any(passed)))


def assert_reported(tampered: Tampered, table: str, row_id: str) -> None:
    result = tampered.authority.verify_audit()
    tally(result.ok)
    assert not result.ok
    assert (result.table, result.row_id) == (table, row_id), result.reason


def test_a_resolution_flipped_from_denied_to_approved_is_reported(tampered: Tampered) -> None:
    tampered.raw(
        "UPDATE aais_resolutions SET envelope = replace(envelope, '\"denied\"', '\"approved\"') "
        "WHERE request_id = ?",
        tampered.denied,
    )
    assert_reported(tampered, "aais_resolutions", tampered.denied)


def test_a_forged_approved_resolution_row_is_reported(tampered: Tampered) -> None:
    [(envelope,)] = tampered.raw(
        "SELECT envelope FROM aais_resolutions WHERE request_id = ?", tampered.approved
    )
    forged = envelope.replace(tampered.approved, tampered.pending)
    tampered.raw(
        "INSERT INTO aais_resolutions (request_id, envelope, decision_fingerprint) "
        "VALUES (?, ?, NULL)",
        tampered.pending,
        forged,
    )
    tampered.raw(
        "UPDATE aais_requests SET status = 'resolved' WHERE request_id = ?", tampered.pending
    )
    assert_reported(tampered, "aais_resolutions", tampered.pending)


def test_a_widened_grant_is_reported(tampered: Tampered) -> None:
    tampered.raw("UPDATE aais_grants SET constraints = '{}' WHERE grant_id = ?", tampered.grant_id)
    assert_reported(tampered, "aais_grants", tampered.grant_id)


def test_an_unrevoked_grant_is_reported(tampered: Tampered) -> None:
    sqlite_only(tampered)
    tampered.raw(
        "UPDATE aais_grants SET revoked_at = NULL WHERE grant_id = ?", tampered.revoked_grant_id
    )
    assert_reported(tampered, "aais_grants", tampered.revoked_grant_id)


def test_a_grant_moved_to_persistent_scope_is_reported(tampered: Tampered) -> None:
    sqlite_only(tampered)
    tampered.raw(
        "UPDATE aais_grants SET scope = 'persistent' WHERE grant_id = ?", tampered.grant_id
    )
    assert_reported(tampered, "aais_grants", tampered.grant_id)


def test_a_pending_requests_arguments_edited_are_reported(tampered: Tampered) -> None:
    sqlite_only(tampered)
    tampered.raw(
        "UPDATE aais_requests SET envelope = replace(envelope, 'script.js', 'evil.js') "
        "WHERE request_id = ?",
        tampered.pending,
    )
    assert_reported(tampered, "aais_requests", tampered.pending)


def test_a_requests_context_edited_is_reported(tampered: Tampered) -> None:
    sqlite_only(tampered)
    tampered.raw(
        'UPDATE aais_requests SET context = \'{"checkpoint_ns":"x"}\' WHERE request_id = ?',
        tampered.pending,
    )
    assert_reported(tampered, "aais_requests", tampered.pending)


def test_a_deleted_request_row_is_reported(tampered: Tampered) -> None:
    sqlite_only(tampered)
    tampered.raw("DELETE FROM aais_requests WHERE request_id = ?", tampered.pending)
    assert_reported(tampered, "aais_requests", tampered.pending)


def test_a_rewritten_event_is_reported(tampered: Tampered) -> None:
    sqlite_only(tampered)
    [(sequence,)] = tampered.raw(
        "SELECT sequence FROM aais_requests WHERE request_id = ?", tampered.pending
    )
    tampered.raw(
        "UPDATE aais_events SET envelope = replace(envelope, 'script.js', 'evil.js') "
        "WHERE sequence = ?",
        sequence,
    )
    assert_reported(tampered, "aais_events", str(sequence))


def test_an_inserted_event_is_reported(tampered: Tampered) -> None:
    sqlite_only(tampered)
    [(envelope,)] = tampered.raw("SELECT envelope FROM aais_events ORDER BY sequence LIMIT 1")
    tampered.raw("INSERT INTO aais_events (sequence, envelope) VALUES (?, ?)", 999, envelope)
    assert_reported(tampered, "aais_events", "999")


def test_the_last_entries_deleted_with_the_tip_moved_back_are_reported(tampered: Tampered) -> None:
    sqlite_only(tampered)
    tip = tampered.authority.ledger.audit_tip()
    assert tip is not None
    entries = tampered.authority.ledger.audit_entries()
    keep = entries[-2]
    tampered.raw("DELETE FROM aais_audit WHERE idx > ?", keep.index)
    tampered.set_tip(keep.index, keep.entry_hash)
    result = tampered.authority.verify_audit()
    kept = tampered.authority.verify_audit(expected_tip=tip)
    tally(result.ok, kept.ok)
    # The rows the deleted entries vouched for are now unvouched ...
    assert not result.ok and result.table == "aais_requests"
    assert result.row_id == tampered.pending
    # ... and a tip kept elsewhere names the truncation itself.
    assert not kept.ok and "truncated" in (kept.reason or "")


def test_every_audit_entry_and_the_tip_deleted_is_reported(tampered: Tampered) -> None:
    sqlite_only(tampered)
    tampered.raw("DELETE FROM aais_audit")
    tampered.set_tip(None, None)
    result = tampered.authority.verify_audit()
    tally(result.ok)
    assert not result.ok
    assert result.table == "aais_requests"


def test_an_emptied_ledger_fails_only_against_a_tip_kept_elsewhere(tampered: Tampered) -> None:
    sqlite_only(tampered)
    tip = tampered.authority.ledger.audit_tip()
    for table in ("aais_audit", "aais_requests", "aais_resolutions", "aais_grants", "aais_events"):
        tampered.raw(f"DELETE FROM {table}")
    tampered.set_tip(None, None)
    # Counted by the check that can see it: a tip kept elsewhere (the documented limit).
    kept = tampered.authority.verify_audit(expected_tip=tip)
    tally(kept.ok)
    assert tampered.authority.verify_audit().ok  # nothing left to contradict anything
    assert not kept.ok and kept.table == "aais_audit"


def test_a_request_flipped_back_to_pending_is_reported(tampered: Tampered) -> None:
    sqlite_only(tampered)
    tampered.raw(
        "UPDATE aais_requests SET status = 'pending' WHERE request_id = ?", tampered.denied
    )
    assert_reported(tampered, "aais_requests", tampered.denied)


@pytest.mark.parametrize(
    ("table", "column", "key"),
    [
        ("aais_requests", "envelope", "request_id"),
        ("aais_resolutions", "envelope", "request_id"),
        ("aais_grants", "constraints", "grant_id"),
        ("aais_requests", "audit_index", "request_id"),
    ],
)
def test_a_row_that_cannot_be_read_is_reported_not_a_crash(
    tampered: Tampered, table: str, column: str, key: str
) -> None:
    sqlite_only(tampered)
    row_id = tampered.grant_id if key == "grant_id" else tampered.approved
    tampered.raw(f"UPDATE {table} SET {column} = 'not json' WHERE {key} = ?", row_id)
    assert_reported(tampered, table, row_id)


def test_an_unreadable_event_is_reported(tampered: Tampered) -> None:
    sqlite_only(tampered)
    tampered.raw("UPDATE aais_events SET envelope = '[1' WHERE sequence = 1")
    assert_reported(tampered, "aais_events", "1")


def _claimed(tampered: Tampered) -> str:
    """The approved request's execution claimed, then finished, through the authority."""
    request_id = tampered.approved
    change = claim_change(request_id, "run_a", thread_id=None, ttl=30, now=1000.0, retry=False)
    tampered.authority.change_execution(request_id, change)
    tampered.authority.change_execution(request_id, finish_change(1001.0))
    assert tampered.authority.verify_audit().ok
    return request_id


def assert_execution_refused(tampered: Tampered, request_id: str) -> None:
    """The gate's two reads refuse the record, and verify names it."""
    with pytest.raises(LedgerIntegrityError) as raised:
        tampered.authority.execution(request_id)
    assert raised.value.table == "aais_executions"
    retry = claim_change(request_id, "run_b", thread_id=None, ttl=30, now=2000.0, retry=True)
    with pytest.raises(LedgerIntegrityError):
        tampered.authority.change_execution(request_id, retry)
    assert_reported(tampered, "aais_executions", request_id)


def test_a_deleted_execution_record_is_refused_and_reported(tampered: Tampered) -> None:
    request_id = _claimed(tampered)
    tampered.raw("DELETE FROM aais_executions WHERE request_id = ?", request_id)
    assert_execution_refused(tampered, request_id)


def test_an_edited_execution_record_is_refused_and_reported(tampered: Tampered) -> None:
    request_id = _claimed(tampered)
    tampered.raw(
        "UPDATE aais_executions SET state = 'done', reconciled_by = 'mallory' WHERE request_id = ?",
        request_id,
    )
    assert_execution_refused(tampered, request_id)


def test_a_planted_execution_record_is_refused_and_reported(tampered: Tampered) -> None:
    request_id = tampered.approved
    tampered.raw(
        "INSERT INTO aais_executions (request_id, thread_id, state, holder, attempt, "
        "started_at, live_until, updated_at) VALUES (?, NULL, 'executed', 'x', 1, 1, 1, 1)",
        request_id,
    )
    assert_execution_refused(tampered, request_id)


def test_an_execution_record_of_a_denied_request_is_reported(tampered: Tampered) -> None:
    request_id = _claimed(tampered)
    tampered.raw(
        "INSERT INTO aais_executions SELECT ?, thread_id, state, holder, attempt, started_at, "
        "live_until, updated_at, reconciled_by, mac FROM aais_executions WHERE request_id = ?",
        tampered.denied,
        request_id,
    )
    assert_reported(tampered, "aais_executions", tampered.denied)

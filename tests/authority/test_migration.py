"""``setup()`` migrates a schema-version-1 ledger (no ``audit_index``/``mac`` columns, requested
entries without ``context_digest``) in place, idempotently, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aais_langgraph.authority import ApprovalAuthority
from aais_langgraph.ledger import GENESIS_HASH, chain_hash

from .test_tamper import Tampered, tampered  # noqa: F401 - the fixture

TABLES = ("aais_requests", "aais_resolutions", "aais_grants")


def make_version_1(state: Tampered) -> None:
    """Rewrite the ledger into what version 1 wrote, chain and tip included."""
    if state.backend == "sqlite":  # version 1 indexed pending requests by sequence only
        state.raw("DROP INDEX aais_requests_pending_rows")
        state.raw(
            "CREATE INDEX aais_requests_pending ON aais_requests (sequence) "
            "WHERE status = 'pending'"
        )
        for index in ("kinds", "names", "owners"):  # nor by what a viewer's listing selects
            state.raw(f"DROP INDEX aais_requests_pending_{index}")
    for table in TABLES:
        state.raw(f"ALTER TABLE {table} DROP COLUMN audit_index")
        state.raw(f"ALTER TABLE {table} DROP COLUMN mac")
    if state.backend == "sqlite":
        state.raw("UPDATE aais_meta SET value = '1' WHERE key = 'schema_version'")
    else:
        state.raw("UPDATE aais_meta SET schema_version = 1")
    rows = state.raw("SELECT idx, kind, occurred_at, payload FROM aais_audit ORDER BY idx")
    prev_hash = GENESIS_HASH
    for index, kind, occurred_at, text in rows:
        payload = json.loads(text)
        payload.pop("context_digest", None)
        entry_hash = chain_hash(index, kind, occurred_at, payload, prev_hash)
        state.raw(
            "UPDATE aais_audit SET payload = ?, prev_hash = ?, entry_hash = ? WHERE idx = ?",
            json.dumps(payload, separators=(",", ":")),
            prev_hash,
            entry_hash,
            index,
        )
        prev_hash = entry_hash
    state.set_tip(len(rows) - 1, prev_hash)


def test_setup_migrates_a_version_1_ledger_in_place(tampered: Tampered, tmp_path: Path) -> None:  # noqa: F811
    make_version_1(tampered)
    ledger = tampered.authority.ledger
    ledger.setup()
    ledger.setup()  # idempotent

    fresh = ApprovalAuthority(ledger)
    result = fresh.verify_audit()
    assert result.ok, (result.table, result.row_id, result.reason)
    stored = ledger.get_resolution(tampered.approved)
    assert stored is not None and stored.audit_index is not None
    # Every reader vouches for the migrated rows, legacy entries included.
    resolved = fresh.get_resolution(tampered.approved)
    assert resolved is not None and resolved.approved
    assert fresh.get_request(tampered.pending) is not None
    assert [g.grant_id for g in fresh.list_grants()] == [tampered.grant_id]


def test_a_newer_schema_is_still_refused(tampered: Tampered) -> None:  # noqa: F811
    if tampered.backend == "sqlite":
        tampered.raw("UPDATE aais_meta SET value = '99' WHERE key = 'schema_version'")
    else:
        tampered.raw("UPDATE aais_meta SET schema_version = 99")
    with pytest.raises(RuntimeError, match="schema version 99"):
        tampered.authority.ledger.setup()


def test_setup_audits_the_execution_records_of_a_version_2_ledger(tampered: Tampered) -> None:  # noqa: F811
    """Version 2 kept execution records outside the audit: setup adopts each one once."""
    from aais_langgraph.ledger.executions import claim_change

    authority, request_id = tampered.authority, tampered.approved
    change = claim_change(request_id, "run_a", thread_id=None, ttl=30, now=1000.0, retry=False)
    authority.change_execution(request_id, change)
    [(tip_index,)] = tampered.raw("SELECT MAX(idx) FROM aais_audit WHERE kind <> 'execution'")
    [(tip_hash,)] = tampered.raw("SELECT entry_hash FROM aais_audit WHERE idx = ?", tip_index)
    tampered.raw("DELETE FROM aais_audit WHERE kind = 'execution'")
    tampered.set_tip(tip_index, tip_hash)
    tampered.raw("DROP INDEX aais_audit_executions")
    tampered.raw("ALTER TABLE aais_executions DROP COLUMN mac")
    if tampered.backend == "sqlite":
        tampered.raw("UPDATE aais_meta SET value = '2' WHERE key = 'schema_version'")
    else:
        tampered.raw("UPDATE aais_meta SET schema_version = 2")

    authority.ledger.setup()
    authority.ledger.setup()  # idempotent: adopted once

    fresh = ApprovalAuthority(authority.ledger)
    result = fresh.verify_audit()
    assert result.ok, (result.table, result.row_id, result.reason)
    record = fresh.execution(request_id)
    assert record is not None and record.state == "executing"
    adopted = [e for e in authority.ledger.audit_entries() if e.kind == "execution"]
    assert [entry.payload["request_id"] for entry in adopted] == [request_id]

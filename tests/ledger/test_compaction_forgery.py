"""Compaction forgery: a rewritten chain that claims a compaction ends at the witnessed tip.

Someone who can write the ledger deletes the chain, appends the entries of the rows
they keep (minus the ones to hide: a revocation, an execution record) after a
``compacted`` checkpoint naming the witnessed tip, and re-points every row. With the
authority key, the checkpoint's seal gives it away; with a witness, the missing
witnessed entry does (no witnessed compaction covers it). Tombstones are vouched for
by the checkpoint, so deleting one is detected.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from aais_langgraph.authority import ApprovalAuthority
from aais_langgraph.ledger import (
    FileWitness,
    InMemoryLedger,
    Ledger,
    LedgerIntegrityError,
    SqliteLedger,
    chain_hash,
    check_witness,
    publish_tip,
)
from aais_langgraph.ledger.executions import claim_change, finish_change
from aais_langgraph.ledger.retention import CompactedRequestError, RetentionPolicy
from aais_langgraph.protocol import build_decision
from hostile.report import record, refused
from support.pg_cluster import fresh_schema_url

from .forgery import forge_compaction, write

KEY = b"k" * 32
ACTION = {"kind": "tool_call", "name": "shell", "summary": "Run ls", "arguments": {"command": "ls"}}
CHOICES = [
    {"decision": "approve", "scope": "once", "label": "Approve once"},
    {
        "decision": "approve",
        "scope": "persistent",
        "label": "Always",
        "scope_constraints": {"command_prefix": "ls"},
    },
    {"decision": "deny", "scope": "once", "label": "Deny"},
]
CATEGORY = "compaction forgery"


@dataclasses.dataclass
class Opened:
    """A ledger and where its storage is: None (in memory), a SQLite path, a Postgres URL."""

    ledger: Ledger
    path: Path | str | None

    def sql(self, statement: str, params: Sequence[Any] = ()) -> None:
        """Run one statement (``?`` marks) on the storage, as its owner could."""
        if isinstance(self.path, str):
            import psycopg

            with psycopg.connect(self.path) as conn:
                conn.execute(statement.replace("?", "%s"), params)
        else:
            assert self.path is not None
            with sqlite3.connect(self.path) as conn:
                conn.execute(statement, params)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def opened(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opened]:
    if request.param == "memory":
        yield Opened(InMemoryLedger(), None)
        return
    if request.param == "postgres":
        from aais_langgraph.ledger.postgres import PostgresLedger

        url = fresh_schema_url(request.getfixturevalue("postgres_cluster"))
        with PostgresLedger.from_conn_string(url) as postgres:
            postgres.setup()
            yield Opened(postgres, url)
        return
    path = tmp_path / "ledger.db"
    with SqliteLedger.from_conn_string(path) as ledger:
        yield Opened(ledger, path)


def _approve(authority: ApprovalAuthority, request_id: str, scope: str = "once") -> Any:
    requested = authority.request(
        ACTION,
        origin={"harness": "tests", "session_id": "sess_1"},
        request_id=request_id,
        choices=CHOICES,
    )
    decided = build_decision(
        requested, decision="approve", scope=scope, actor={"id": "user_alex", "type": "human"}
    )
    authority.decide(decided)
    return decided


def _witnessed(ledger: Ledger, path: Path, key: bytes | None) -> tuple[int, str]:
    published = publish_tip(ledger, [FileWitness(path)], key=key)
    assert published is not None
    return published.index, published.entry_hash


def _tally(*caught: bool) -> None:
    """Record each forgery; one that no check caught failed open."""
    record(CATEGORY, len(caught), failed_open=sum(1 for found in caught if not found))


def _revoked_grant_revived(opened: Opened, key: bytes | None, witness: Path) -> ApprovalAuthority:
    authority = ApprovalAuthority(opened.ledger, key=key)
    _approve(authority, "apr_always", scope="persistent")
    tip = _witnessed(opened.ledger, witness, key)
    (grant,) = opened.ledger.list_grants()
    assert authority.revoke_grant(grant.grant_id)
    forgery = forge_compaction(
        opened.ledger.contents(), tip, hide=lambda entry: entry.kind == "revoked"
    )
    write(opened.ledger, opened.path, forgery)
    (revived,) = opened.ledger.list_grants(include_revoked=True)
    assert revived.revoked_at is None  # the forgery took: the grant reads as live
    return authority


@pytest.mark.parametrize("key", [None, KEY], ids=["no-key", "key"])
def test_a_forged_compaction_that_revives_a_grant_fails_the_witness(
    opened: Opened, key: bytes | None, tmp_path: Path
) -> None:
    witness = tmp_path / "witness.jsonl"
    authority = _revoked_grant_revived(opened, key, witness)

    check = check_witness(opened.ledger, FileWitness(witness).publications(), key=key)

    _tally(not check.ok)
    assert not check.ok and check.verdict == "compacted", check
    assert "no witnessed compaction" in check.message
    if key is not None:
        verified = authority.verify_audit()
        _tally(not verified.ok)
        assert not verified.ok and verified.table == "aais_audit", verified
        assert verified.reason is not None and "seal" in verified.reason


def test_a_forged_compaction_that_hides_an_execution_fails_verify_with_a_key(
    opened: Opened, tmp_path: Path
) -> None:
    witness = tmp_path / "witness.jsonl"
    authority = ApprovalAuthority(opened.ledger, key=KEY)
    _approve(authority, "apr_ran")
    now = time.time()
    authority.change_execution(
        "apr_ran", claim_change("apr_ran", "h1", thread_id=None, ttl=60, now=now, retry=False)
    )
    authority.change_execution("apr_ran", finish_change(now))
    tip = _witnessed(opened.ledger, witness, KEY)
    forgery = forge_compaction(
        opened.ledger.contents(), tip, hide=lambda entry: entry.kind == "execution"
    )
    write(opened.ledger, opened.path, forgery)
    assert opened.ledger.execution_with_entry("apr_ran")[0] is None  # the action would run again

    verified = authority.verify_audit()
    check = check_witness(opened.ledger, FileWitness(witness).publications(), key=KEY)

    _tally(not verified.ok, not check.ok)
    assert not verified.ok and verified.reason is not None and "seal" in verified.reason
    assert not check.ok


def test_a_legitimate_compaction_passes_with_the_key_and_the_witness(
    opened: Opened, tmp_path: Path
) -> None:
    witness = tmp_path / "witness.jsonl"
    authority = ApprovalAuthority(opened.ledger, key=KEY)
    for number in range(3):
        _approve(authority, f"apr_{number}")
    _witnessed(opened.ledger, witness, KEY)
    opened.ledger.compact_history(RetentionPolicy(keep_last=1), now=time.time(), key=KEY)
    _witnessed(opened.ledger, witness, KEY)  # the compaction is witnessed
    _approve(authority, "apr_3")

    verified = authority.verify_audit()
    check = check_witness(opened.ledger, FileWitness(witness).publications(), key=KEY)

    assert verified.ok, verified
    assert check.ok, check


def test_an_unwitnessed_compaction_of_a_witnessed_entry_fails_the_witness(
    opened: Opened, tmp_path: Path
) -> None:
    witness = tmp_path / "witness.jsonl"
    authority = ApprovalAuthority(opened.ledger)
    for number in range(2):
        _approve(authority, f"apr_{number}")
    _witnessed(opened.ledger, witness, None)
    opened.ledger.compact_history(RetentionPolicy(keep_last=0), now=time.time())

    check = check_witness(opened.ledger, FileWitness(witness).publications())

    assert not check.ok and check.verdict == "compacted"


def _compacted_with_a_key(opened: Opened) -> ApprovalAuthority:
    authority = ApprovalAuthority(opened.ledger, key=KEY)
    for number in range(3):
        _approve(authority, f"apr_{number}")
    authority.request(
        ACTION, origin={"harness": "tests", "session_id": "sess_1"}, request_id="apr_pending"
    )
    report = opened.ledger.compact_history(RetentionPolicy(keep_last=0), now=time.time(), key=KEY)
    assert report.requests_removed == 3 and report.carried >= 1
    assert authority.verify_audit().ok
    return authority


def test_a_deleted_tombstone_is_detected(opened: Opened) -> None:
    authority = _compacted_with_a_key(opened)
    if isinstance(opened.ledger, InMemoryLedger):
        opened.ledger._compacted.discard("apr_0")
    else:
        opened.sql("DELETE FROM aais_compacted_requests WHERE request_id = ?", ("apr_0",))

    verified = authority.verify_audit()

    _tally(not verified.ok)
    assert not verified.ok and verified.table == "aais_compacted_requests", verified


def _drop_carried(opened: Opened, drop: Callable[[Any], bool]) -> None:
    """Remove the carried entries ``drop`` picks and re-chain what follows, keeping the
    sealed checkpoint's payload as it is."""
    contents = opened.ledger.contents()
    kept = [entry for entry in contents.audit if not drop(entry)]
    chain: list[Any] = []
    prev = contents.audit[0].prev_hash
    for position, old in enumerate(kept):
        index = contents.audit[0].index + position
        entry_hash = chain_hash(index, old.kind, old.occurred_at, old.payload, prev)
        chain.append(dataclasses.replace(old, index=index, prev_hash=prev, entry_hash=entry_hash))
        prev = entry_hash
    if isinstance(opened.ledger, InMemoryLedger):
        opened.ledger._audit = chain
        opened.ledger._requests.pop("apr_pending", None)
        opened.ledger._pending.pop("apr_pending", None)
        return
    opened.sql("DELETE FROM aais_audit")
    for e in chain:
        opened.sql(
            "INSERT INTO aais_audit (idx, kind, occurred_at, payload, prev_hash, entry_hash) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (e.index, e.kind, e.occurred_at, json.dumps(e.payload), e.prev_hash, e.entry_hash),
        )
    opened.sql("DELETE FROM aais_requests WHERE request_id = ?", ("apr_pending",))
    tip = (chain[-1].index, chain[-1].entry_hash)
    if isinstance(opened.path, str):
        opened.sql("UPDATE aais_meta SET audit_tip_index = ?, audit_tip_hash = ?", tip)
    else:
        opened.sql("UPDATE aais_meta SET value = json_array(?, ?) WHERE key = 'audit_tip'", tip)


def test_a_carried_entry_dropped_before_a_sealed_checkpoint_is_detected(opened: Opened) -> None:
    authority = _compacted_with_a_key(opened)
    _drop_carried(
        opened,
        lambda entry: entry.kind == "requested" and entry.payload["request_id"] == "apr_pending",
    )

    verified = authority.verify_audit()

    _tally(not verified.ok)
    assert not verified.ok and verified.table == "aais_audit", verified
    assert verified.reason is not None and "carried" in verified.reason


@contextlib.contextmanager
def _reopened(opened: Opened) -> Iterator[Ledger]:
    """Another process's view of the same storage (the in-memory ledger itself)."""
    if isinstance(opened.ledger, InMemoryLedger):
        yield opened.ledger
    elif isinstance(opened.path, str):
        from aais_langgraph.ledger.postgres import PostgresLedger

        with PostgresLedger.from_conn_string(opened.path) as postgres:
            yield postgres
    else:
        assert opened.path is not None
        with SqliteLedger.from_conn_string(opened.path) as ledger:
            yield ledger


def test_a_compacted_id_stays_refused_after_its_tombstone_is_deleted(opened: Opened) -> None:
    authority = _compacted_with_a_key(opened)
    if isinstance(opened.ledger, InMemoryLedger):
        opened.ledger._compacted.discard("apr_0")
    else:
        opened.sql("DELETE FROM aais_compacted_requests WHERE request_id = ?", ("apr_0",))
    origin = {"harness": "tests", "session_id": "sess_1"}

    with refused(CATEGORY, CompactedRequestError):  # this process vouched for it already
        authority.request(ACTION, origin=origin, request_id="apr_0", choices=CHOICES)
    with _reopened(opened) as other:  # a new process checks the tombstones first
        with refused(CATEGORY, (CompactedRequestError, LedgerIntegrityError)):
            ApprovalAuthority(other, key=KEY).request(
                ACTION, origin=origin, request_id="apr_0", choices=CHOICES
            )
        assert other.get_request("apr_0") is None


ORIGIN = {"harness": "tests", "session_id": "sess_1"}


def test_a_grant_a_forged_compaction_revives_covers_nothing_with_a_key(
    opened: Opened, tmp_path: Path
) -> None:
    authority = _revoked_grant_revived(opened, KEY, tmp_path / "witness.jsonl")

    with refused(CATEGORY, LedgerIntegrityError):  # this process
        authority.match_grant(ACTION, ORIGIN)
    with _reopened(opened) as other, refused(CATEGORY, LedgerIntegrityError):  # another one
        ApprovalAuthority(other, key=KEY).match_grant(ACTION, ORIGIN)


def test_an_execution_a_forged_compaction_hides_is_refused_at_the_gate_with_a_key(
    opened: Opened, tmp_path: Path
) -> None:
    authority = ApprovalAuthority(opened.ledger, key=KEY)
    _approve(authority, "apr_ran")
    now = time.time()
    authority.change_execution(
        "apr_ran", claim_change("apr_ran", "h1", thread_id=None, ttl=60, now=now, retry=False)
    )
    authority.change_execution("apr_ran", finish_change(now))
    tip = (opened.ledger.audit_tip() or (0, ""))[:2]
    forgery = forge_compaction(
        opened.ledger.contents(), tip, hide=lambda entry: entry.kind == "execution"
    )
    write(opened.ledger, opened.path, forgery)

    with refused(CATEGORY, LedgerIntegrityError):  # the gate asks before it runs anything
        authority.execution("apr_ran")
    with _reopened(opened) as other, refused(CATEGORY, LedgerIntegrityError):
        ApprovalAuthority(other, key=KEY).execution("apr_ran")


def test_a_claim_after_a_forged_compaction_hid_an_execution_is_refused_with_a_key(
    opened: Opened,
) -> None:
    authority = ApprovalAuthority(opened.ledger, key=KEY)
    _approve(authority, "apr_ran")
    now = time.time()
    authority.change_execution(
        "apr_ran", claim_change("apr_ran", "h1", thread_id=None, ttl=60, now=now, retry=False)
    )
    authority.change_execution("apr_ran", finish_change(now))
    tip = (opened.ledger.audit_tip() or (0, ""))[:2]
    forgery = forge_compaction(
        opened.ledger.contents(), tip, hide=lambda entry: entry.kind == "execution"
    )
    write(opened.ledger, opened.path, forgery)
    again = claim_change("apr_ran", "h2", thread_id=None, ttl=60, now=now, retry=False)

    with refused(CATEGORY, LedgerIntegrityError, opened=lambda: _claimed(opened, "apr_ran")):
        authority.change_execution("apr_ran", again)


def _claimed(opened: Opened, request_id: str) -> bool:
    record, _ = opened.ledger.execution_with_entry(request_id)
    return record is not None

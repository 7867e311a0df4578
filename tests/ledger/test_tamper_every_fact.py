"""Every cell of every table a decision reads, tampered one at a time, on SQLite and Postgres.

The tables come from the schema itself and are checked against the ledger's registry
(:data:`~aais_langgraph.ledger.integrity.VOUCHED_TABLES`, ``NOT_FACTS``,
``UNVOUCHED_FACTS``): a table added without a place there fails here. For each vouched
table, every column of every row is changed (and every row deleted) as someone who can
write the storage but holds no key would, then put back. Each time, ``audit verify``
must fail; with the key, a fresh process's reads (the request, its resolution, its
execution record, the grants, the escalation, a compacted id) must each refuse or give
exactly what they gave before: the runtime never acts on a tampered value.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from aais_langgraph import build_decision
from aais_langgraph.authority import AccessPolicy, ApprovalAuthority
from aais_langgraph.ledger import Ledger, LedgerIntegrityError, SqliteLedger
from aais_langgraph.ledger.executions import claim_change, finish_change
from aais_langgraph.ledger.integrity import (
    LISTING_COLUMNS,
    NOT_FACTS,
    UNVOUCHED_FACTS,
    VOUCHED_TABLES,
)
from aais_langgraph.ledger.retention import CompactedRequestError, RetentionPolicy
from aais_langgraph.protocol import AAISValidationError
from aais_langgraph.webhooks import FollowUpRunner, SubscriptionPlan
from hostile.report import record
from support.attacker import Storage
from support.pg_cluster import fresh_schema_url

pytestmark = pytest.mark.slow

KEY = b"every-fact-key-".ljust(32, b"k")
CATEGORY = "tampering"
POLICY = AccessPolicy.from_mapping(
    {
        "approvers": [
            {
                "names": ["shell*"],
                "groups": ["ops"],
                "escalate_after": 60,
                "escalate_to": ["managers"],
            }
        ]
    }
)
PLAN = SubscriptionPlan([], policy=POLICY)
CHOICES = [
    {"decision": "approve", "scope": "once", "label": "Once"},
    {
        "decision": "approve",
        "scope": "session",
        "label": "Session",
        "scope_constraints": {"command_prefix": "ls"},
    },
    {"decision": "deny", "scope": "once", "label": "Deny"},
]
ORIGIN = {"harness": "tests", "session_id": "s-1"}
REQUESTS = ("apr_denied", "apr_session", "apr_revoked", "apr_ran", "apr_pending")
GONE = "apr_gone"
REFUSED = "refused"
ALTERNATIVES = {
    "status": ("pending", "resolved"),
    "scope": ("session", "persistent"),
    "state": ("executing", "executed", "unknown", "done", "retry"),
}
START = datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc)


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


# -- the ledger under attack ----------------------------------------------------------


@contextmanager
def _ledger(storage: Storage) -> Iterator[Ledger]:
    if isinstance(storage.where, str):
        from aais_langgraph.ledger.postgres import PostgresLedger

        with PostgresLedger.from_conn_string(storage.where, delivery_plan=PLAN) as postgres:
            postgres.setup()
            yield postgres
    else:
        with SqliteLedger.from_conn_string(storage.where, delivery_plan=PLAN) as sqlite:
            yield sqlite


def _action(name: str) -> dict[str, Any]:
    return {
        "kind": "tool_call",
        "name": "read" if name == GONE else "shell",  # no follow-up keeps it from retention
        "summary": name,
        "arguments": {"command": f"ls {name}"},
    }


def _history(storage: Storage, key: bytes | None) -> None:
    """Every kind of fact: a compacted request (its tombstone and checkpoint), a denial,
    a session grant, a revoked grant, an execution record, a thread with two posters, a
    pending request with its thread and context whose escalation ran."""
    clock = Clock()
    with _ledger(storage) as ledger:
        authority = ApprovalAuthority(ledger, key=key, clock=clock, authorizer=POLICY)

        def decided(request_id: str, kind: str = "approve", scope: str = "once") -> None:
            requested = authority.request(
                _action(request_id), origin=ORIGIN, request_id=request_id, choices=CHOICES
            )
            envelope = build_decision(
                requested, decision=kind, scope=scope, actor={"id": "ana", "type": "human"}
            )
            authority.decide(envelope)

        decided(GONE)
        ledger.compact_history(RetentionPolicy(keep_last=0), now=clock().timestamp())
        decided("apr_denied", "deny")
        decided("apr_session", scope="session")
        decided("apr_revoked", scope="session")
        revoked = next(g for g in ledger.list_grants() if g.request_id == "apr_revoked")
        assert authority.revoke_grant(revoked.grant_id)
        decided("apr_ran")
        moment = clock().timestamp()
        claim = claim_change("apr_ran", "h1", thread_id=None, ttl=60, now=moment, retry=False)
        authority.change_execution("apr_ran", claim)
        authority.change_execution("apr_ran", finish_change(moment))
        authority.request(
            _action("apr_pending"),
            origin=ORIGIN,
            request_id="apr_pending",
            thread_id="t-1",
            context={"node": "act", "call_index": 0},
            expires_in=timedelta(hours=2),
        )
        ledger.post_to_thread("t-1", "ana", now=clock().timestamp(), start=True)
        ledger.post_to_thread("t-1", "bob", now=clock().timestamp() + 1)
        clock.now += timedelta(seconds=61)
        ran = [w for w in FollowUpRunner(authority, PLAN).run_due() if w.state == "done"]
        assert [work.request_id for work in ran] == ["apr_pending"]
        assert authority.verify_audit().ok


def _observe(storage: Storage, key: bytes | None) -> dict[str, Any]:
    """What a fresh process reads of every fact (``REFUSED`` where a read refuses)."""
    clock = Clock()
    clock.now = START + timedelta(minutes=30)
    found: dict[str, Any] = {}

    def attempt(name: str, read: Callable[[], Any]) -> None:
        try:
            found[name] = read()
        except (LedgerIntegrityError, CompactedRequestError, AAISValidationError, ValueError):
            found[name] = REFUSED

    with _ledger(storage) as ledger:
        authority = ApprovalAuthority(ledger, key=key, clock=clock, authorizer=POLICY)
        for request_id in REQUESTS:

            def request(request_id: str = request_id) -> Any:
                stored = ledger.get_request(request_id)
                return None if stored is None else authority.vouched_request(stored).to_json()

            def resolution(request_id: str = request_id) -> Any:
                resolved = authority.get_resolution(request_id)
                return None if resolved is None else resolved.to_json()

            def execution(request_id: str = request_id) -> Any:
                record = authority.execution(request_id)
                return None if record is None else asdict(record)

            attempt(f"request {request_id}", request)
            attempt(f"resolution {request_id}", resolution)
            attempt(f"execution {request_id}", execution)
        attempt(
            "grants",
            lambda: {g.grant_id: g.to_json() for g in authority.list_grants(include_revoked=True)},
        )

        def escalated() -> bool:
            stored = ledger.get_request("apr_pending")
            if stored is None:
                return False
            return authority.access.escalated(authority.vouched_request(stored).request)

        attempt("escalated", escalated)

        def thread() -> Any:
            record = authority.access.thread_record("t-1")
            return None if record is None else (record.owner, sorted(record.posters))

        attempt("thread", thread)

        def compacted_id() -> str:
            authority.request(_action(GONE), origin=ORIGIN, request_id=GONE, choices=CHOICES)
            return "stored again"

        attempt("compacted id", compacted_id)
    return found


def _unchanged_or_refused(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """The reads that gave something other than before or a refusal (fail-closed
    differences aside: a grant gone, an escalation that no longer counts)."""
    opened = []
    for name, was in before.items():
        now = after.get(name)
        if now in (was, REFUSED):
            continue
        if name == "escalated" and now is False:
            continue
        if (
            name == "grants"
            and isinstance(now, dict)
            and all(was.get(grant_id) == grant for grant_id, grant in now.items())
        ):
            continue  # fewer grants: asks again
        if name.startswith("request ") and now is None:
            continue  # a request gone: nothing to decide
        opened.append(name)
    return opened


# -- the storage's own description of itself --------------------------------------------


def _tables(storage: Storage) -> list[str]:
    if storage.postgres:
        rows = storage.sql(
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
        )
    else:
        rows = storage.sql("SELECT name FROM sqlite_master WHERE type = 'table'")
    return sorted(str(row[0]) for row in rows)


def _columns(storage: Storage, table: str) -> dict[str, str]:
    """Each column's name and declared type, in order."""
    if storage.postgres:
        rows = storage.sql(
            "SELECT column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND table_name = ? ORDER BY ordinal_position",
            (table,),
        )
        return {str(row[0]): str(row[1]).lower() for row in rows}
    return {str(row[1]): str(row[2]).lower() for row in storage.sql(f"PRAGMA table_info({table})")}


def _changed(column: str, declared: str, value: Any) -> list[Any]:
    """Values to try instead of ``value`` (the first the schema accepts is written)."""
    if column in ALTERNATIVES:
        return [other for other in ALTERNATIVES[column] if other != value]
    if value is None:
        if "int" in declared:
            return [1]
        if any(name in declared for name in ("double", "real", "float", "numeric")):
            return [1.5]
        return ["x"]
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        return [value + 1]
    if isinstance(value, float):
        return [value + 1.5]
    text = str(value)
    try:
        document = json.loads(text)
    except ValueError:
        return [text + "x"]
    if isinstance(document, (dict, list)):
        return [_json_changed(document), text + "x"]
    return [text + "x"]


def _json_changed(document: Any) -> str:
    """``document`` with its last leaf changed (or a member added to an empty one)."""
    target, step = document, None
    while isinstance(target, (dict, list)) and target:
        step = list(target)[-1] if isinstance(target, dict) else len(target) - 1
        if not isinstance(target[step], (dict, list)) or not target[step]:
            break
        target = target[step]
    if step is None or not isinstance(target, (dict, list)):
        return json.dumps({"x": 1})
    leaf = target[step]
    target[step] = (
        not leaf
        if isinstance(leaf, bool)
        else leaf + 1
        if isinstance(leaf, (int, float))
        else f"{leaf}x"
        if isinstance(leaf, str)
        else "x"
    )
    return json.dumps(document, separators=(",", ":"))


def _where(columns: list[str], row: tuple[Any, ...], postgres: bool) -> tuple[str, list[Any]]:
    same = "IS NOT DISTINCT FROM" if postgres else "IS"
    return " AND ".join(f"{c} {same} ?" for c in columns), list(row)


# -- the tests -------------------------------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Storage:
    if request.param == "postgres":
        return Storage(fresh_schema_url(request.getfixturevalue("postgres_cluster")))
    return Storage(tmp_path / "ledger.db")


def test_every_table_of_the_schema_is_a_vouched_fact_or_says_why_not(storage: Storage) -> None:
    _history(storage, None)

    classified = {*VOUCHED_TABLES, *NOT_FACTS, *UNVOUCHED_FACTS}

    assert set(_tables(storage)) == classified
    assert not UNVOUCHED_FACTS, "a fact a decision reads is not chained and sealed"


@pytest.mark.parametrize("key", [None, KEY], ids=["no-key", "key"])
@pytest.mark.parametrize("table", sorted(VOUCHED_TABLES))
def test_every_cell_of_a_vouched_table_tampered_is_refused(
    storage: Storage, table: str, key: bytes | None
) -> None:
    _history(storage, key)
    before = _observe(storage, key)
    assert before["escalated"] is True and before["compacted id"] == REFUSED
    assert before["thread"] == ("ana", ["ana", "bob"])
    declared = _columns(storage, table)
    columns = list(declared)
    rows = storage.sql(f"SELECT {', '.join(columns)} FROM {table}")
    assert rows, f"{table}: the history holds no row to tamper with"
    tried, missed = 0, []

    def judged(what: str) -> None:
        nonlocal tried
        tried += 1
        with _ledger(storage) as ledger:
            verified = ApprovalAuthority(ledger, key=key).verify_audit()
        opened = [] if key is None else _unchanged_or_refused(before, _observe(storage, key))
        if verified.ok:
            missed.append(f"{what}: audit verify passed")
        missed.extend(f"{what}: {name} read the tampered value" for name in opened)

    for row in rows:
        where, params = _where(columns, row, storage.postgres)
        for position, column in enumerate(columns):
            if (table, column) in LISTING_COLUMNS or (column == "mac" and key is None):
                continue  # orders a listing / a seal nobody checks without the key
            for value in _changed(column, declared[column], row[position]):
                try:
                    storage.sql(f"UPDATE {table} SET {column} = ? WHERE {where}", [value, *params])
                except Exception:  # the schema refuses it (a type, a CHECK): try another
                    continue
                tampered = list(row)
                tampered[position] = value
                judged(f"{table}.{column}")
                again, again_params = _where(columns, tuple(tampered), storage.postgres)
                storage.sql(
                    f"UPDATE {table} SET {column} = ? WHERE {again}",
                    [row[position], *again_params],
                )
                break
        storage.sql(f"DELETE FROM {table} WHERE {where}", params)
        judged(f"{table} row deleted")
        marks = ", ".join("?" for _ in columns)
        overriding = " OVERRIDING SYSTEM VALUE" if storage.postgres else ""  # an identity
        storage.sql(
            f"INSERT INTO {table} ({', '.join(columns)}){overriding} VALUES ({marks})", list(row)
        )

    record(CATEGORY, tried, failed_open=len(missed))
    assert not missed, missed
    assert _observe(storage, key) == before  # every change was put back

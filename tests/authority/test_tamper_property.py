"""Property: any one meaningful change to any stored cell is reported by ``audit verify``.

The mechanism, not a list of inputs: hypothesis picks a table, a row, a column and
a change of value (a leaf inside JSON columns), applied with raw SQL to a copy of a
real SQLite ledger sealed under a key. Only the requests' ``sequence`` and the
grants' ``ordinal`` columns are left out: they order listings and carry no approval.
"""

from __future__ import annotations

import itertools
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aais_langgraph.authority import ApprovalAuthority
from aais_langgraph.ledger import SqliteLedger
from hostile.report import record

from .support import START, FakeClock
from .test_tamper import _history

KEY = b"property-test-key-".ljust(32, b"k")
JSON_COLUMNS = {"envelope", "context", "constraints"}
COLUMNS = {
    "aais_requests": [
        "request_id",
        "session_id",
        "thread_id",
        "expires_at",
        "status",
        "envelope",
        "context",
        "audit_index",
        "mac",
    ],
    "aais_resolutions": ["request_id", "envelope", "decision_fingerprint", "audit_index", "mac"],
    "aais_grants": [
        "grant_id",
        "request_id",
        "scope",
        "session_id",
        "action_name",
        "constraints",
        "created_at",
        "expires_at",
        "revoked_at",
        "audit_index",
        "mac",
    ],
    "aais_events": ["sequence", "envelope"],
}
KEYS = {
    "aais_requests": "request_id",
    "aais_resolutions": "request_id",
    "aais_grants": "grant_id",
    "aais_events": "sequence",
}
_copies = itertools.count()


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("property") / "template.db"
    with SqliteLedger.from_path(path) as ledger:
        ledger.setup()
        authority = ApprovalAuthority(ledger, clock=FakeClock(START), key=KEY)
        _history(authority)
        # A request recorded with thread and context, so those columns hold values.
        authority.request(
            {"kind": "process.exec", "name": "shell.exec", "summary": "s", "arguments": {}},
            origin={"harness": "tests", "session_id": "s-2"},
            thread_id="thr-1",
            context={"node": "act", "call_index": 0},
        )
        assert authority.verify_audit().ok
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path


def _changed(value: Any, choice: int) -> Any:
    """A different value of a similar kind."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1 + choice
    if isinstance(value, str):
        return value + "x"
    return "x" if choice % 2 else 1.5


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(value, dict) and value:
        return [leaf for key, item in value.items() for leaf in _leaves(item, (*path, key))]
    if isinstance(value, list) and value:
        return [leaf for i, item in enumerate(value) for leaf in _leaves(item, (*path, i))]
    return [path]


def _mutate_json(text: str, choice: int) -> str:
    document = json.loads(text)
    leaves = _leaves(document)
    path = leaves[choice % len(leaves)]
    if not path:
        return json.dumps({"x": 1})
    target = document
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = _changed(target[path[-1]], choice)
    return json.dumps(document)


def _mutated(column: str, value: Any, choice: int) -> Any:
    if column in JSON_COLUMNS:
        return _mutate_json(value, choice)
    if column == "status":
        return "resolved" if value == "pending" else "pending"
    if column == "scope":
        return "persistent" if value == "session" else "session"
    if value is None:
        return 1.5 if column.endswith("_at") else "x"
    if column == "sequence":
        return value + 10_000 + choice  # sequences are unique
    return _changed(value, choice)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    table=st.sampled_from(sorted(COLUMNS)),
    row=st.integers(min_value=0, max_value=50),
    column_choice=st.integers(min_value=0, max_value=50),
    choice=st.integers(min_value=0, max_value=1000),
)
def test_any_single_cell_change_is_reported(
    template: Path, tmp_path: Path, table: str, row: int, column_choice: int, choice: int
) -> None:
    path = tmp_path / f"copy-{next(_copies)}.db"
    shutil.copy(template, path)
    column = COLUMNS[table][column_choice % len(COLUMNS[table])]
    with sqlite3.connect(path) as conn:
        key = KEYS[table]
        keys = [r[0] for r in conn.execute(f"SELECT {key} FROM {table} ORDER BY {key}")]
        chosen = keys[row % len(keys)]
        [(value,)] = conn.execute(f"SELECT {column} FROM {table} WHERE {key} = ?", (chosen,))
        conn.execute(
            f"UPDATE {table} SET {column} = ? WHERE {key} = ?",
            (_mutated(column, value, choice), chosen),
        )
    with SqliteLedger.from_path(path) as ledger:
        result = ApprovalAuthority(ledger, key=KEY).verify_audit()
    record("tampering", 1, failed_open=int(result.ok))
    assert not result.ok, (table, column)
    assert result.table is not None and result.reason is not None

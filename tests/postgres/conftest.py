"""Fixtures for the PostgresLedger tests.

The throwaway server (``postgres_cluster``) and ``postgres_url`` (a fresh schema per
test) come from tests/conftest.py; this adds a set-up ``ledger`` for the
Postgres-only tests here (the contract tests in tests/ledger run on Postgres too).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from support.pg_cluster import ALLOW_NO_POSTGRES

try:
    import psycopg  # noqa: F401
except ImportError:
    if not ALLOW_NO_POSTGRES:
        raise ImportError(
            "tests/postgres need the postgres extra: pip install -e '.[postgres,dev]' "
            "(or set AAIS_ALLOW_NO_POSTGRES=1 to skip them)"
        ) from None
    collect_ignore_glob = ["test_*.py"]
else:
    from aais_langgraph.ledger.postgres import PostgresLedger


@pytest.fixture
def ledger(postgres_url: str) -> Iterator[PostgresLedger]:
    """A set-up PostgresLedger on its own connection."""
    with PostgresLedger.from_conn_string(postgres_url) as backend:
        backend.setup()
        yield backend

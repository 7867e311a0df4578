"""Fixtures: one throwaway PostgreSQL server per session, a fresh schema per test.

Without the server binaries the ``postgres_cluster`` fixture fails with
instructions; ``AAIS_ALLOW_NO_POSTGRES=1`` turns that into a skip (never set in CI).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from urllib.parse import quote

import pytest

from .cluster import NO_SERVER_HELP, PostgresCluster, find_bindir

ALLOW_NO_POSTGRES = os.environ.get("AAIS_ALLOW_NO_POSTGRES") == "1"

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

_schema_numbers = itertools.count(1)


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[PostgresCluster]:
    """A server started for this test session and deleted afterwards."""
    bindir = find_bindir()
    if bindir is None:
        if ALLOW_NO_POSTGRES:
            pytest.skip(NO_SERVER_HELP)
        pytest.fail(NO_SERVER_HELP, pytrace=False)
    cluster = PostgresCluster(bindir)
    try:
        cluster.start()
        cluster.create_database("aais")
        yield cluster
    finally:
        cluster.stop()


def fresh_schema_url(cluster: PostgresCluster) -> str:
    """The URL of a new, empty schema (via ``search_path``) in the test database."""
    import psycopg
    from psycopg import sql

    schema = f"t_{os.getpid()}_{next(_schema_numbers)}"
    url = cluster.url("aais")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    return f"{url}?options={quote(f'-c search_path={schema}')}"


@pytest.fixture
def postgres_url(postgres_cluster: PostgresCluster) -> str:
    """A connection URL whose tables land in a schema of their own, empty at the start."""
    return fresh_schema_url(postgres_cluster)


@pytest.fixture
def ledger(postgres_url: str) -> Iterator[PostgresLedger]:
    """A set-up PostgresLedger on its own connection; the contract tests use this name."""
    with PostgresLedger.from_conn_string(postgres_url) as backend:
        backend.setup()
        yield backend

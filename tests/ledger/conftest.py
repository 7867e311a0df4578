"""One ``ledger`` fixture that runs every contract test against each backend.

``memory``, ``sqlite`` (a fresh file, set up lazily on first use) and ``postgres``
(a fresh schema on the session's throwaway server, ``postgres_cluster`` in
tests/conftest.py; set up explicitly, as Postgres needs). A test that needs a second
ledger of the same backend asks for ``make_ledger``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from aais_langgraph.ledger import DeliveryPlan, InMemoryLedger, Ledger, SqliteLedger
from support.pg_cluster import ALLOW_NO_POSTGRES, fresh_schema_url

if TYPE_CHECKING:
    from aais_langgraph.ledger.postgres import PostgresLedger

BACKENDS = ["memory", "sqlite", "postgres"]


@pytest.fixture
def sqlite_path(tmp_path: Path) -> Path:
    return tmp_path / "ledger.db"


@pytest.fixture(params=BACKENDS)
def make_ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[..., Ledger]]:
    """Opens new, empty ledgers of the backend under test; closed when the test ends."""
    backend: str = request.param
    numbers = itertools.count()

    with ExitStack() as opened:

        def make(delivery_plan: DeliveryPlan | None = None) -> Ledger:
            if backend == "memory":
                return InMemoryLedger(delivery_plan=delivery_plan)
            if backend == "sqlite":
                path = tmp_path / f"ledger-{next(numbers)}.db"
                return opened.enter_context(
                    SqliteLedger.from_conn_string(path, delivery_plan=delivery_plan)
                )
            url = fresh_schema_url(request.getfixturevalue("postgres_cluster"))
            postgres = opened.enter_context(
                _postgres_ledger_class().from_conn_string(url, delivery_plan=delivery_plan)
            )
            postgres.setup()
            return postgres

        yield make


@pytest.fixture
def ledger(make_ledger: Callable[..., Ledger]) -> Ledger:
    return make_ledger()


def _postgres_ledger_class() -> type[PostgresLedger]:
    try:
        from aais_langgraph.ledger.postgres import PostgresLedger
    except ImportError:
        if ALLOW_NO_POSTGRES:
            pytest.skip("tests of the postgres backend need the postgres extra")
        raise
    return PostgresLedger

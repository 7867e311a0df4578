"""The stateful model test of tests/ledger (random call sequences against a plain-Python
model of the contract), run against PostgresLedger with a fresh schema per example."""

from __future__ import annotations

from contextlib import ExitStack

import pytest

from aais_langgraph.ledger import Ledger
from aais_langgraph.ledger.postgres import PostgresLedger
from support.pg_cluster import PostgresCluster, fresh_schema_url

from ._contract import contract_module

model = contract_module("test_model")


class PostgresLedgerModel(model.LedgerModel):  # type: ignore[misc,name-defined]
    """The same model against a PostgresLedger in a new schema per example."""

    cluster: PostgresCluster | None = None

    def open_ledger(self) -> Ledger:
        assert self.cluster is not None, "the postgres_cluster fixture did not run"
        self.connections = ExitStack()
        url = fresh_schema_url(self.cluster)
        ledger = self.connections.enter_context(PostgresLedger.from_conn_string(url))
        ledger.setup()
        return ledger

    def teardown(self) -> None:
        self.connections.close()


@pytest.fixture(autouse=True)
def _cluster_for_the_model(postgres_cluster: PostgresCluster) -> None:
    PostgresLedgerModel.cluster = postgres_cluster


TestPostgresLedgerModel = PostgresLedgerModel.TestCase
TestPostgresLedgerModel.settings = model.MODEL_SETTINGS

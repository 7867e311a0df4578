"""One AG-UI server replica (``create_app``) on Postgres, for the two-replica tests.

    python -m tests.distributed.agui_replica --db URL --port PORT --effects PATH

Run from the repository root. The graph is the AG-UI tests' demo graph
(tests/agui/demo_graph.py: ``delete <path>`` pauses on a ``requires_approval``
gate); checkpoints go to LangGraph's ``AsyncPostgresSaver`` and approvals to a
``PostgresLedger``, both on ``--db``, so every replica started with the same URL
shares them. Executed side effects go to the SQLite ``EffectLog`` at
``--effects``. Callers authenticate with ``Authorization: Bearer presenter``.
The server listens on 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import asyncio

import uvicorn
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from aais_agui import ServiceSettings, bearer_token_authenticator, create_app
from aais_langgraph import ApprovalAuthority
from aais_langgraph.ledger.postgres import PostgresLedger
from tests.agui.demo_graph import EffectLog, build_demo_graph

TOKEN = "presenter"
PRESENTER = {"id": "presenter", "type": "human"}


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True)
    parser.add_argument("--port", required=True, type=int)
    parser.add_argument("--effects", required=True)
    args = parser.parse_args()

    ledger_pool: ConnectionPool = ConnectionPool(
        args.db, min_size=1, max_size=16, kwargs={"autocommit": True}, open=True
    )
    authority = ApprovalAuthority(PostgresLedger(ledger_pool))
    async with AsyncConnectionPool(
        args.db,
        min_size=1,
        max_size=16,
        kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
        open=False,
    ) as checkpoint_pool:
        saver = AsyncPostgresSaver(checkpoint_pool)  # type: ignore[arg-type]
        graph = build_demo_graph(EffectLog(args.effects), saver)
        app = create_app(
            graph,
            authority=authority,
            authenticate=bearer_token_authenticator({TOKEN: PRESENTER}),
            settings=ServiceSettings(lease_wait=30.0, stream_poll=0.05),
        )
        config = uvicorn.Config(app, host="127.0.0.1", port=args.port, log_level="warning")
        await uvicorn.Server(config).serve()
    ledger_pool.close()


if __name__ == "__main__":
    asyncio.run(main())

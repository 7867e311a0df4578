"""Serve the demo graph on loopback with the SQLite defaults (the Node client tests, bench_agui.py).

    python tests/agui/demo_server.py --dir DIR --port PORT [--auth local|token [--requesters K]]
        [--plain [--schema-keys-once]]

Checkpoints go to DIR/checkpoints.db (LangGraph ``AsyncSqliteSaver``), the
approval ledger to DIR/ledger.db, executed side effects to DIR/effects.db.
``--plain`` serves the same graph without approvals through the stock
ag-ui-langgraph endpoint (the benchmark's baseline); ``--schema-keys-once`` makes
that agent work out the graph's schema keys once, as ``aais_agui`` does, so the
comparison isolates the approval layer. ``--auth token`` takes ``AAIS_AGUI_TOKEN`` as the
bearer token of the actor ``node-client``; ``--requesters K`` adds ``TOKEN.1`` ..
``TOKEN.{K-1}`` for the actors ``node-client-1`` .. (many people's threads, each held
to the request limits on their own).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import uvicorn
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

sys.path.insert(0, str(Path(__file__).resolve().parent))

from demo_graph import EffectLog, build_demo_graph

from aais_agui import bearer_token_authenticator, create_app, local_development_authenticator
from aais_langgraph import ApprovalAuthority
from aais_langgraph.ledger import SqliteLedger


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", required=True, type=Path)
    parser.add_argument("--port", required=True, type=int)
    parser.add_argument("--auth", choices=["local", "token"], default="local")
    parser.add_argument("--requesters", type=int, default=1)
    parser.add_argument("--plain", action="store_true")
    parser.add_argument("--schema-keys-once", action="store_true")
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    if args.plain:
        await serve_plain(args.dir, args.port, schema_keys_once=args.schema_keys_once)
        return
    ledger = SqliteLedger(args.dir / "ledger.db", synchronous="NORMAL")
    ledger.setup()
    authority = ApprovalAuthority(ledger)
    if args.auth == "local":
        authenticate = local_development_authenticator()
    else:
        token = os.environ["AAIS_AGUI_TOKEN"]
        actors: dict[str, Any] = {token: {"id": "node-client", "type": "human"}}
        for i in range(1, args.requesters):
            actors[f"{token}.{i}"] = {"id": f"node-client-{i}", "type": "human"}
        authenticate = bearer_token_authenticator(actors)
    async with AsyncSqliteSaver.from_conn_string(str(args.dir / "checkpoints.db")) as saver:
        graph = build_demo_graph(EffectLog(args.dir / "effects.db"), saver)
        app = create_app(graph, authority=authority, authenticate=authenticate)
        config = uvicorn.Config(app, host="127.0.0.1", port=args.port, log_level="warning")
        await uvicorn.Server(config).serve()


async def serve_plain(folder: Path, port: int, *, schema_keys_once: bool = False) -> None:
    """The baseline: stock ag-ui-langgraph endpoint, same graph without approvals."""
    from ag_ui_langgraph import LangGraphAgent, add_langgraph_fastapi_endpoint
    from fastapi import FastAPI

    class SchemaKeysOnce(LangGraphAgent):  # type: ignore[misc]
        keys: Any = None

        def get_schema_keys(self, config: Any) -> Any:
            if SchemaKeysOnce.keys is None:
                SchemaKeysOnce.keys = super().get_schema_keys(config)
            return {name: list(found) for name, found in SchemaKeysOnce.keys.items()}

    async with AsyncSqliteSaver.from_conn_string(str(folder / "checkpoints.db")) as saver:
        graph = build_demo_graph(EffectLog(folder / "effects.db"), saver, gated=False)
        app = FastAPI()
        kind = SchemaKeysOnce if schema_keys_once else LangGraphAgent
        agent = kind(name="plain", graph=graph)  # the stock event flags, as create_app
        add_langgraph_fastapi_endpoint(app, agent, path="/agent")
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
        await uvicorn.Server(config).serve()


if __name__ == "__main__":
    asyncio.run(main())

"""Serve the AG-UI test graph with bearer-token authentication and the built direct page.

    python tests/copilotkit/server.py --dir DIR --port PORT --pages examples/copilotkit/dist/direct

The token comes from ``AAIS_AGUI_TOKEN`` and names the actor ``carol``. The graph is
tests/agui/demo_graph.py (a gated delete node and gated send_email tool calls); every
executed side effect goes to DIR/effects.db, the ledger to DIR/ledger.db. The page is
served at ``/copilotkit/``, the same origin as ``/agent``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

import uvicorn
from fastapi.staticfiles import StaticFiles
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agui"))

from demo_graph import EffectLog, build_demo_graph

from aais_agui import bearer_token_authenticator, create_app
from aais_langgraph import ApprovalAuthority
from aais_langgraph.ledger import SqliteLedger

ACTOR = {"id": "carol", "type": "human", "display_name": "Carol"}


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", required=True, type=Path)
    parser.add_argument("--port", required=True, type=int)
    parser.add_argument("--pages", required=True, type=Path)
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    ledger = SqliteLedger(args.dir / "ledger.db", synchronous="NORMAL")
    ledger.setup()
    authority = ApprovalAuthority(ledger)
    authenticate = bearer_token_authenticator({os.environ["AAIS_AGUI_TOKEN"]: ACTOR})
    async with AsyncSqliteSaver.from_conn_string(str(args.dir / "checkpoints.db")) as saver:
        graph = build_demo_graph(EffectLog(args.dir / "effects.db"), saver)
        app = create_app(graph, authority=authority, authenticate=authenticate)
        app.mount("/copilotkit", StaticFiles(directory=args.pages, html=True), name="copilotkit")
        config = uvicorn.Config(app, host="127.0.0.1", port=args.port, log_level="warning")
        await uvicorn.Server(config).serve()


if __name__ == "__main__":
    asyncio.run(main())

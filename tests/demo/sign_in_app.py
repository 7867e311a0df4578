"""tiny_graph's inbox behind OpenID Connect sign-in, served for tests/demo/test_browser_sign_in.py.

    python sign_in_app.py PORT ISSUER CLIENT_ID DB ACCESS_POLICY

The client secret comes from ``$AAIS_TEST_OIDC_CLIENT_SECRET``; the redirect URL is
``http://127.0.0.1:PORT/login/callback``. Sessions are kept in ``DB.sessions`` (SQLite),
streams re-authenticate every second. Prints ``serving on <url>`` once it listens.
"""

from __future__ import annotations

import asyncio
import os
import sys

import uvicorn
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from tiny_graph import builder

from aais_agui import ServiceSettings, create_app
from aais_agui.http.sessions import SqliteSessionStore
from aais_agui.http.sign_in import BrowserSignIn, SignInSettings
from aais_langgraph import ApprovalAuthority
from aais_langgraph.authority import load_access_policy
from aais_langgraph.ledger import SqliteLedger


async def main(port: int, issuer: str, client_id: str, db: str, policy: str) -> None:
    ledger = SqliteLedger(db)
    ledger.setup()
    authority = ApprovalAuthority(ledger, authorizer=load_access_policy(policy))
    sign_in = BrowserSignIn(
        SignInSettings(
            issuer=issuer,
            client_id=client_id,
            client_secret=os.environ["AAIS_TEST_OIDC_CLIENT_SECRET"],
            redirect_url=f"http://127.0.0.1:{port}/login/callback",
            scopes=("openid", "profile", "groups"),
        ),
        store=SqliteSessionStore(f"{db}.sessions"),
    )
    app = create_app(
        builder,
        authority=authority,
        authenticate=sign_in.authenticator,
        checkpointer=AsyncSqliteSaver.from_conn_string(f"{db}.checkpoints"),
        settings=ServiceSettings(reauth_every=1.0),
    )
    app.include_router(sign_in.router)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    serving = asyncio.create_task(server.serve())
    while not server.started and not serving.done():
        await asyncio.sleep(0.05)
    if server.started:
        print(f"sign-in app: serving on http://127.0.0.1:{port}/", flush=True)
    await serving


if __name__ == "__main__":
    port, issuer, client_id, db, policy = sys.argv[1:6]
    asyncio.run(main(int(port), issuer, client_id, db, policy))

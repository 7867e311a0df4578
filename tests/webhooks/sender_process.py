"""A webhook sender in its own process, to be killed with SIGKILL mid-delivery.

``python sender_process.py LEDGER URL HOLDER`` runs a
:class:`~aais_langgraph.webhooks.WebhookWorker` for one subscription ("ops") over the
SQLite ledger until it is killed, printing ``ready`` once it runs.
"""

from __future__ import annotations

import asyncio
import sys

from aais_langgraph.authority import ApprovalAuthority
from aais_langgraph.ledger import SqliteLedger
from aais_langgraph.webhooks import WebhookSubscription, WebhookWorker

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


async def main(db: str, url: str, holder: str) -> None:
    with SqliteLedger.from_conn_string(db) as ledger:
        subscription = WebhookSubscription(
            name="ops", url=url, secret=SECRET, notices=frozenset({"approval.requested"})
        )
        worker = WebhookWorker(
            ApprovalAuthority(ledger),
            [subscription],
            holder=holder,
            claim_ttl=3.0,
            timeout=2.0,
            retry_base=0.05,
            retry_max=0.2,
            poll_interval=0.05,
            concurrency=8,
        )
        async with worker.running():
            print("ready", flush=True)
            await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))

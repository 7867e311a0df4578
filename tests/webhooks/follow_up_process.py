"""A follow-up runner and webhook sender in its own process, to be killed with SIGKILL.

``python follow_up_process.py LEDGER URL HOLDER MODE``: over the SQLite ledger, with
the policy of :data:`POLICY` and one subscription ("ops") at URL.

- ``claim``: claims every due follow-up (``claimed N`` once it holds some), then
  hangs before running any: a process to kill between a reminder's claim and its send;
- ``serve``: runs the follow-ups and sends the deliveries until killed (``ready``).
"""

from __future__ import annotations

import asyncio
import sys
import time

from aais_langgraph.authority import AccessPolicy, ApprovalAuthority
from aais_langgraph.ledger import SqliteLedger
from aais_langgraph.webhooks import (
    FollowUpRunner,
    SubscriptionPlan,
    WebhookSubscription,
    WebhookWorker,
)

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
POLICY = {
    "default_approvers": ["sre"],
    "approvers": [
        {"groups": ["sre"], "remind_after": 1, "remind_every": 1, "remind_times": 2},
    ],
}
CLAIM_TTL = 2.0


def plan(url: str) -> SubscriptionPlan:
    ops = WebhookSubscription(
        name="ops",
        url=url,
        secret=SECRET,
        notices=frozenset({"approval.reminder"}),
        as_groups=frozenset({"sre"}),
    )
    return SubscriptionPlan([ops], policy=AccessPolicy.from_mapping(POLICY))


async def main(db: str, url: str, holder: str, mode: str) -> None:
    subscriptions = plan(url)
    with SqliteLedger.from_conn_string(db, delivery_plan=subscriptions) as ledger:
        authority = ApprovalAuthority(ledger, authorizer=subscriptions.policy)
        runner = FollowUpRunner(authority, subscriptions, holder=holder, claim_ttl=CLAIM_TTL)
        if mode == "claim":
            while True:
                claimed = runner.claim()
                if claimed:
                    print(f"claimed {len(claimed)}", flush=True)
                    time.sleep(3600)  # killed here: claimed, nothing run or sent
                time.sleep(0.05)
        worker = WebhookWorker(
            authority,
            list(subscriptions.subscriptions.values()),
            holder=holder,
            claim_ttl=3.0,
            timeout=2.0,
            retry_base=0.05,
            retry_max=0.2,
            poll_interval=0.05,
        )
        async with worker.running():
            print("ready", flush=True)
            while True:
                await runner.arun_due()
                await asyncio.sleep(0.05)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))

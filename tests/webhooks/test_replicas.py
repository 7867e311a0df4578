"""Replicas sharing one Postgres ledger send each notice once, whoever wrote it."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from datetime import timedelta

from aais_langgraph.authority import ApprovalAuthority
from aais_langgraph.ledger import DELIVERY, shown_states
from aais_langgraph.ledger.postgres import PostgresLedger
from aais_langgraph.webhooks import SubscriptionPlan, WebhookSubscription, WebhookWorker

from .receivers import SECRET, Receiver


def test_three_replicas_on_postgres_send_each_notice_once(postgres_url: str) -> None:
    with Receiver() as receiver:
        sub = WebhookSubscription(
            name="ops", url=receiver.url, secret=SECRET, notices=frozenset({"approval.requested"})
        )
        with ExitStack() as stack:
            plan = SubscriptionPlan([sub])
            opened = [
                stack.enter_context(
                    PostgresLedger.from_conn_string(postgres_url, delivery_plan=plan)
                )
                for _ in range(3)
            ]
            opened[0].setup()
            workers = []
            for ledger in opened:
                authority = ApprovalAuthority(ledger)
                workers.append(WebhookWorker(authority, [sub], timeout=2.0, claim_ttl=10.0))

            def write(index: int) -> None:  # each replica writes some of the requests
                workers[index % 3].authority.request(
                    {"kind": "tool_call", "name": "deploy", "summary": "Deploy", "arguments": {}},
                    origin={"harness": "tests", "session_id": "s"},
                    request_id=f"apr_{index}",
                    thread_id=f"thr_{index}",
                    expires_in=timedelta(hours=1),
                )

            with ThreadPoolExecutor(6) as pool:
                list(pool.map(write, range(45)))

            def drain(worker: WebhookWorker) -> int:
                sent = 0
                for _ in range(100):
                    sent += len(worker.deliver_due())
                    if not worker.authority.ledger.list_work(
                        DELIVERY, states=shown_states(DELIVERY, ("pending",))
                    ):
                        break
                return sent

            with ThreadPoolExecutor(3) as pool:
                attempts = sum(pool.map(drain, workers))
            for worker in workers:
                worker.close()
    assert attempts == 45
    assert len(receiver.bodies) == 45 and receiver.duplicates == 0


def test_three_replicas_on_postgres_run_each_follow_up_once(postgres_url: str) -> None:
    from aais_langgraph.authority import AccessPolicy
    from aais_langgraph.ledger import FOLLOW_UP
    from aais_langgraph.webhooks import FollowUpRunner

    policy = AccessPolicy.from_mapping(
        {
            "approvers": [
                {"groups": ["sre"], "remind_after": 1, "remind_every": 1, "remind_times": 3}
            ]
        }
    )
    with Receiver() as receiver:
        sub = WebhookSubscription(
            name="ops",
            url=receiver.url,
            secret=SECRET,
            notices=frozenset({"approval.reminder"}),
            as_groups=frozenset({"sre"}),
        )
        plan = SubscriptionPlan([sub], policy=policy)
        with ExitStack() as stack:
            opened = [
                stack.enter_context(
                    PostgresLedger.from_conn_string(postgres_url, delivery_plan=plan)
                )
                for _ in range(3)
            ]
            opened[0].setup()
            authorities = [ApprovalAuthority(ledger, authorizer=policy) for ledger in opened]
            runners = [FollowUpRunner(authority, plan, claim_ttl=10.0) for authority in authorities]
            for index in range(10):
                authorities[index % 3].request(
                    {"kind": "tool_call", "name": "deploy", "summary": "Deploy", "arguments": {}},
                    origin={"harness": "tests", "session_id": "s"},
                    request_id=f"apr_follow_{index}",
                    thread_id=f"thr_follow_{index}",
                    expires_in=timedelta(hours=1),
                )
            rows = opened[0].list_work(FOLLOW_UP)
            last_due = max(row.next_at for row in rows)

            def run(runner: FollowUpRunner) -> None:
                import time

                while time.time() < last_due + 0.5:
                    runner.run_due()
                    time.sleep(0.01)

            with ThreadPoolExecutor(3) as pool:
                list(pool.map(run, runners))
            worker = WebhookWorker(authorities[0], [sub], timeout=2.0, claim_ttl=10.0)
            for _ in range(50):
                worker.deliver_due()
                if len(receiver.bodies) == 30:
                    break
            audits = [e for e in opened[0].audit_entries() if e.kind == "follow_up"]
            done = opened[0].list_work(FOLLOW_UP, states=("done",))
    assert len(done) == 30 and len(audits) == 30
    assert len(receiver.bodies) == 30 and receiver.duplicates == 0

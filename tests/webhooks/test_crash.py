"""Senders and follow-up runners killed with SIGKILL mid-work lose nothing and double nothing."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import pytest

from aais_langgraph.authority import ApprovalAuthority
from aais_langgraph.ledger import DELIVERY, SqliteLedger, shown_states
from aais_langgraph.webhooks import SubscriptionPlan, WebhookSubscription

from .receivers import SECRET, Receiver

SENDER = Path(__file__).with_name("sender_process.py")
FIRST_BATCH, SECOND_BATCH = 40, 20


@contextmanager
def sender(db: Path, url: str, holder: str) -> Iterator[subprocess.Popen[str]]:
    process = subprocess.Popen(
        [sys.executable, str(SENDER), str(db), url, holder],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)


def wait_for(condition: object, what: str, *, limit: float = 30.0) -> None:
    deadline = time.monotonic() + limit
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting: {what}")
        time.sleep(0.02)


def test_a_sender_killed_mid_delivery_loses_no_notification(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    hold = threading.Event()
    with Receiver(hold=hold, fail_first=3) as receiver:
        subscription = WebhookSubscription(
            name="ops", url=receiver.url, secret=SECRET, notices=frozenset({"approval.requested"})
        )
        plan = SubscriptionPlan([subscription])
        with SqliteLedger.from_conn_string(db, delivery_plan=plan) as ledger:
            authority = ApprovalAuthority(ledger)

            def ask(index: int) -> None:
                authority.request(
                    {"kind": "tool_call", "name": "shell", "summary": "Run it", "arguments": {}},
                    origin={"harness": "tests", "session_id": "sess_1"},
                    request_id=f"apr_{index}",
                    thread_id=f"thr_{index}",
                    expires_in=timedelta(hours=1),
                )

            for index in range(FIRST_BATCH):
                ask(index)
            with sender(db, receiver.url, "first") as first:
                # The receiver has recorded some POSTs whose answers it holds back: mid-delivery.
                wait_for(lambda: len(receiver.bodies) >= 8, "the first sender's POSTs")
                os.kill(first.pid, signal.SIGKILL)
                first.wait(timeout=10)
            hold.set()
            in_flight = ledger.list_work(DELIVERY, states=shown_states(DELIVERY, ("pending",)))
            assert any(item.claimed_by == "first" for item in in_flight)

            for index in range(FIRST_BATCH, FIRST_BATCH + SECOND_BATCH):
                ask(index)  # written while no sender runs
            with sender(db, receiver.url, "second"):
                wait_for(
                    lambda: (
                        not ledger.list_work(DELIVERY, states=shown_states(DELIVERY, ("pending",)))
                    ),
                    "every delivery",
                )

            every = ledger.list_work(
                DELIVERY, states=shown_states(DELIVERY, ("pending", "delivered", "dead"))
            )
            sent = len(every)
            delivered = sum(1 for item in every if item.shown_state == "delivered")
            received = set(receiver.bodies)
            lost = {item.work_id for item in every} - received
            print(
                f"\nwebhook crash figures: notifications {sent}, delivered {delivered}, "
                f"received (unique webhook-id) {len(received)}, duplicates {receiver.duplicates}, "
                f"refused with 500 {receiver.fail_first}, cut short by the kill "
                f"{receiver.cut_short}, lost {len(lost)}"
            )
            assert sent == FIRST_BATCH + SECOND_BATCH
            assert delivered == sent and not lost and len(received) == sent
            # Only the killed sender's POSTs in flight (its concurrency is 8) may be cut short.
            assert receiver.rejected == 0 and receiver.cut_short <= 8
            # What the killed sender had in flight was sent again, with the same webhook-id.
            assert receiver.duplicates >= 1


def test_a_post_cut_short_by_its_senders_death_is_not_taken_for_a_bad_signature() -> None:
    # A sender killed between a POST's headers and the end of its body leaves the
    # receiver a short body: nothing was delivered, so nothing failed to verify.
    with Receiver() as receiver:
        with socket.create_connection(("127.0.0.1", receiver.port)) as connection:
            connection.sendall(
                b"POST /hook HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: 100\r\n"
                b"webhook-id: msg_1\r\nwebhook-timestamp: 1\r\nwebhook-signature: v1,x\r\n"
                b'\r\n{"type":'
            )
        wait_for(lambda: receiver.cut_short == 1, "the cut-short POST")
        assert (receiver.rejected, receiver.posts, receiver.bodies) == (0, 0, {})


FOLLOW_UPS = Path(__file__).with_name("follow_up_process.py")
REQUESTS = 6


@pytest.mark.slow
def test_a_runner_killed_between_a_reminders_claim_and_its_send_loses_and_doubles_nothing(
    tmp_path: Path,
) -> None:
    from aais_langgraph.ledger import FOLLOW_UP

    from .follow_up_process import CLAIM_TTL, plan

    db = tmp_path / "ledger.db"
    with Receiver() as receiver:
        subscriptions = plan(receiver.url)
        with SqliteLedger.from_conn_string(db, delivery_plan=subscriptions) as ledger:
            authority = ApprovalAuthority(ledger, authorizer=subscriptions.policy)
            for index in range(REQUESTS):
                authority.request(
                    {"kind": "tool_call", "name": "shell", "summary": "Run it", "arguments": {}},
                    origin={"harness": "tests", "session_id": "sess_1"},
                    request_id=f"apr_{index}",
                    thread_id=f"thr_{index}",
                    expires_in=timedelta(hours=1),
                )
            first = subprocess.Popen(
                [sys.executable, str(FOLLOW_UPS), str(db), receiver.url, "first", "claim"],
                stdout=subprocess.PIPE,
                text=True,
            )
            try:
                assert first.stdout is not None
                assert first.stdout.readline().startswith("claimed ")
                os.kill(first.pid, signal.SIGKILL)
            finally:
                first.wait(timeout=10)
            held = ledger.list_work(FOLLOW_UP, states=("claimed",))
            assert held and all(item.claimed_by == "first" for item in held)
            killed_at = time.monotonic()

            second = subprocess.Popen(
                [sys.executable, str(FOLLOW_UPS), str(db), receiver.url, "second", "serve"],
                stdout=subprocess.PIPE,
                text=True,
            )
            try:
                assert second.stdout is not None and second.stdout.readline().strip() == "ready"
                wait_for(
                    lambda: len(receiver.bodies) == REQUESTS * 2,
                    "every reminder",
                    limit=60.0,
                )
                # Once a claim lapsed it is run once; give a doubled send time to show.
                time.sleep(max(0.0, killed_at + CLAIM_TTL + 1.0 - time.monotonic()))
                time.sleep(0.5)
            finally:
                second.kill()
                second.wait(timeout=10)
            follow_ups = ledger.list_work(FOLLOW_UP, states=("due", "claimed", "done"))
            audits = [e for e in ledger.audit_entries() if e.kind == "follow_up"]
            print(
                f"\nfollow-up crash figures: reminders {REQUESTS * 2}, claimed by the killed "
                f"runner {len(held)}, received {len(receiver.bodies)}, "
                f"duplicates {receiver.duplicates}, audited {len(audits)}"
            )
            assert all(item.state == "done" for item in follow_ups)
            assert len(follow_ups) == REQUESTS * 2
            assert len(receiver.bodies) == REQUESTS * 2 and receiver.duplicates == 0
            assert len(audits) == REQUESTS * 2
            assert {item.claimed_by for item in held} == {"first"}

"""A writer without the subscriptions still notifies: the sender catches up from the events."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from aais_langgraph.authority import ApprovalAuthority
from aais_langgraph.ledger import DELIVERY, SqliteLedger, shown_states
from aais_langgraph.ledger.deliveries import delivery_id_for
from aais_langgraph.webhooks import SubscriptionPlan, WebhookWorker

from .receivers import Receiver
from .test_delivery import FAST, approve, ask, drain, subscription

NOTICES = frozenset({"approval.requested", "approval.resolved"})
EVERY = ("pending", "delivered", "dead", "coalesced", "skipped")


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as running:
        yield running


@pytest.fixture(autouse=True)
def _close_ledgers() -> Iterator[None]:
    yield
    while OPENED:
        OPENED.pop().close()


OPENED: list[SqliteLedger] = []


def opened(path: Path, plan: SubscriptionPlan | None = None) -> SqliteLedger:
    """A ledger on its own connection to the file (as another process has), closed after."""
    ledger = SqliteLedger(path, delivery_plan=plan)
    OPENED.append(ledger)
    return ledger


def writer(path: Path) -> ApprovalAuthority:
    """Another process's authority on the ledger file: it knows no subscriptions."""
    return ApprovalAuthority(opened(path))


def sender(path: Path, url: str, *, plan: bool = False) -> WebhookWorker:
    """A server's webhook sender on the same file (``plan``: its writes record deliveries)."""
    subs = [subscription(url, notices=NOTICES)]
    ledger = opened(path, SubscriptionPlan(subs) if plan else None)
    return WebhookWorker(ApprovalAuthority(ledger), subs, **FAST)


def test_a_request_and_resolution_without_a_plan_are_delivered_once(
    tmp_path: Path, receiver: Receiver
) -> None:
    path = tmp_path / "ledger.db"
    worker = sender(path, receiver.url)
    assert worker.deliver_due() == []  # the subscription's cursor starts here
    other = writer(path)
    approve(other, ask(other, "apr_1"))
    assert other.ledger.list_work(DELIVERY, states=shown_states(DELIVERY, EVERY)) == []

    drain(worker)
    drain(worker)

    bodies = sorted(receiver.bodies.values(), key=lambda body: body["data"]["sequence"])
    assert [body["type"] for body in bodies] == ["approval.requested", "approval.resolved"]
    assert bodies[0]["data"]["request"]["id"] == "apr_1"
    assert receiver.rejected == receiver.cut_short == receiver.duplicates == 0
    assert set(receiver.bodies) == {
        delivery_id_for("ops", notice, "apr_1") for notice in sorted(NOTICES)
    }
    assert worker.authority.ledger.delivery_cursor("ops") == other.ledger.last_sequence()


def test_a_writer_with_the_plan_gets_no_second_delivery(tmp_path: Path, receiver: Receiver) -> None:
    worker = sender(tmp_path / "ledger.db", receiver.url, plan=True)
    worker.deliver_due()
    authority = worker.authority
    approve(authority, ask(authority, "apr_1"))
    assert worker.catch_up() == 2  # the same ids: the rows the writer recorded stay
    drain(worker)

    rows = authority.ledger.list_work(DELIVERY, states=shown_states(DELIVERY, EVERY))
    assert sorted(d.topic for d in rows) == ["approval.requested", "approval.resolved"]
    assert all(d.shown_state == "delivered" and d.attempts == 1 for d in rows)
    assert len(receiver.bodies) == 2 and receiver.duplicates == 0


def test_a_new_subscription_is_not_told_the_history(tmp_path: Path, receiver: Receiver) -> None:
    path = tmp_path / "ledger.db"
    other = writer(path)
    approve(other, ask(other, "apr_1"))
    worker = sender(path, receiver.url)
    assert worker.deliver_due() == []
    assert worker.catch_up() == 0
    assert worker.authority.ledger.list_work(DELIVERY, states=shown_states(DELIVERY, EVERY)) == []
    assert worker.authority.ledger.delivery_cursor("ops") == other.ledger.last_sequence()


def test_the_cursor_survives_a_restart(tmp_path: Path, receiver: Receiver) -> None:
    path = tmp_path / "ledger.db"
    other = writer(path)
    first = sender(path, receiver.url)
    first.catch_up()
    ask(other, "apr_1")
    drain(first)
    first.close()
    stopped = first.authority.ledger
    assert isinstance(stopped, SqliteLedger)
    OPENED.remove(stopped)
    stopped.close()
    ask(other, "apr_2")

    again = sender(path, receiver.url)
    assert again.catch_up() == 1
    drain(again)
    requested = sorted(body["data"]["request"]["id"] for body in receiver.bodies.values())
    assert requested == ["apr_1", "apr_2"] and receiver.duplicates == 0


def test_replicas_on_one_file_record_each_delivery_once(tmp_path: Path, receiver: Receiver) -> None:
    path = tmp_path / "ledger.db"
    replicas = [sender(path, receiver.url) for _ in range(2)]
    replicas[0].catch_up()
    other = writer(path)
    for number in range(20):
        approve(other, ask(other, f"apr_{number}", thread_id=f"thr_{number}"))

    with ThreadPoolExecutor(max_workers=2) as pool:
        recorded = sum(pool.map(lambda worker: worker.catch_up(), replicas))
        recorded += sum(pool.map(lambda worker: worker.catch_up(), replicas))

    assert recorded == 40
    assert len(other.ledger.list_work(DELIVERY, states=shown_states(DELIVERY, EVERY))) == 40
    ledger = replicas[1].authority.ledger
    assert ledger.delivery_cursor("ops") == ledger.last_sequence()
    # A sender that read the cursor before another moved it writes nothing.
    stale = ledger.advance_delivery_cursor("ops", start=0, to=1, now=0.0)
    assert stale is False


def test_events_compacted_before_the_cursor_reached_them_are_passed_over(
    tmp_path: Path, receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "ledger.db"
    worker = sender(path, receiver.url)
    worker.catch_up()
    other = writer(path)
    approve(other, ask(other, "apr_1"))
    last = other.ledger.last_sequence()
    assert other.ledger.compact_events(last + 1) == 3  # requested, decided, resolved

    with caplog.at_level(logging.WARNING, logger="aais_langgraph.webhooks.catch_up"):
        assert worker.catch_up() == 0
    assert "3 event(s) were compacted" in caplog.text
    assert worker.authority.ledger.delivery_cursor("ops") == last
    assert worker.authority.ledger.list_work(DELIVERY, states=shown_states(DELIVERY, EVERY)) == []

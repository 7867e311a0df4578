"""Webhook deliveries are ledger state: written with the event, claimed once, retried, dead."""

from __future__ import annotations

from dataclasses import replace

import pytest

from aais_langgraph.ledger import Ledger
from aais_langgraph.ledger.deliveries import (
    delivered_change,
    delivery_id_for,
    failed_change,
    retry_change,
)
from aais_langgraph.webhooks import SubscriptionPlan, WebhookSubscription

from .envelopes import approval, grant_for, request_envelope

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def plan(*, coalesce: bool = False, names: tuple[str, ...] = ()) -> SubscriptionPlan:
    from aais_langgraph.ledger.selection import ActionPattern

    return SubscriptionPlan(
        [
            WebhookSubscription(
                name="ops",
                url="http://127.0.0.1:9/hook",
                secret=SECRET,
                coalesce=coalesce,
                actions=ActionPattern(names=names),
            )
        ]
    )


def test_a_request_records_its_notices_in_its_own_write(ledger: Ledger) -> None:
    ledger.delivery_plan = plan()
    ledger.add_request(request_envelope("apr_1"), thread_id="thr_1")

    found = {d.notice: d for d in ledger.list_deliveries()}
    assert set(found) == {"approval.requested", "approval.expiring"}
    requested = found["approval.requested"]
    assert requested.delivery_id == delivery_id_for("ops", "approval.requested", "apr_1")
    assert (requested.state, requested.thread_id, requested.attempts) == ("pending", "thr_1", 0)


def test_a_replayed_request_records_nothing_more(ledger: Ledger) -> None:
    ledger.delivery_plan = plan()
    ledger.add_request(request_envelope("apr_1"), thread_id="thr_1")
    ledger.add_request(request_envelope("apr_1"), thread_id="thr_1")
    assert len(ledger.list_deliveries()) == 2


def test_a_ledger_without_a_plan_records_no_delivery(ledger: Ledger) -> None:
    requested = request_envelope("apr_1")
    ledger.add_request(requested, thread_id="thr_1")
    ledger.record_resolution(approval(requested))
    assert ledger.list_deliveries(states=("pending", "dead", "delivered")) == []


def test_a_resolution_records_its_notice_in_its_own_write(ledger: Ledger) -> None:
    requested = request_envelope("apr_1")
    ledger.delivery_plan = plan()
    ledger.add_request(requested, thread_id="thr_1")
    ledger.record_resolution(approval(requested))
    notices = sorted(d.notice for d in ledger.list_deliveries(request_id="apr_1"))
    assert notices == ["approval.expiring", "approval.requested", "approval.resolved"]


def test_a_resolution_that_fails_records_no_notice(ledger: Ledger) -> None:
    first, second = request_envelope("apr_1"), request_envelope("apr_2")
    ledger.delivery_plan = plan(names=("nothing",))
    ledger.add_request(first, thread_id="thr_1")
    ledger.add_request(second, thread_id="thr_2")
    ledger.record_resolution(approval(first, grant=grant_for(first, grant_id="grt_1")))
    ledger.delivery_plan = plan()
    clash = approval(second, resolution_id="res_2", grant=grant_for(second, grant_id="grt_1"))
    with pytest.raises(ValueError, match="grant"):
        ledger.record_resolution(clash)
    assert ledger.list_deliveries(request_id="apr_2") == []


def test_filters_choose_what_is_recorded(ledger: Ledger) -> None:
    ledger.delivery_plan = plan(names=("deploy*",))
    ledger.add_request(request_envelope("apr_1", action_name="shell"), thread_id="thr_1")
    ledger.add_request(request_envelope("apr_2", action_name="deploy_prod"), thread_id="thr_2")
    assert {d.request_id for d in ledger.list_deliveries()} == {"apr_2"}


def test_a_coalescing_subscription_keeps_one_pending_notice_per_thread(ledger: Ledger) -> None:
    first, second = request_envelope("apr_1"), request_envelope("apr_2")
    ledger.delivery_plan = plan(coalesce=True)
    ledger.add_request(first, thread_id="thr_1")
    ledger.add_request(second, thread_id="thr_1")
    ledger.record_resolution(approval(second))

    pending = [d for d in ledger.list_deliveries(states=("pending",)) if d.coalesce_key]
    assert [(d.notice, d.request_id) for d in pending] == [("approval.resolved", "apr_2")]
    replaced = ledger.list_deliveries(states=("coalesced",))
    assert sorted(d.request_id for d in replaced) == ["apr_1", "apr_2"]


def test_a_claimed_delivery_is_not_coalesced_away(ledger: Ledger) -> None:
    ledger.delivery_plan = plan(coalesce=True)
    ledger.add_request(request_envelope("apr_1"), thread_id="thr_1")
    claimed = ledger.claim_deliveries("a", subscriptions=("ops",), ttl=60, now=_later())
    ledger.add_request(request_envelope("apr_2"), thread_id="thr_1")
    first = delivery_id_for("ops", "approval.requested", "apr_1")
    assert first in {d.delivery_id for d in claimed}
    stored = ledger.get_delivery(first)
    assert stored is not None and stored.state == "pending"


def test_one_sender_claims_a_delivery_until_its_claim_expires(ledger: Ledger) -> None:
    ledger.delivery_plan = plan()
    ledger.add_request(request_envelope("apr_1"), thread_id="thr_1")
    now = _later()

    first = ledger.claim_deliveries("a", subscriptions=("ops",), ttl=30, now=now)
    assert len(first) == 2 and {d.claimed_by for d in first} == {"a"}
    assert ledger.claim_deliveries("b", subscriptions=("ops",), ttl=30, now=now + 1) == []
    again = ledger.claim_deliveries("b", subscriptions=("ops",), ttl=30, now=now + 31)
    assert {d.delivery_id for d in again} == {d.delivery_id for d in first}


def test_claims_name_the_subscriptions_a_sender_knows(ledger: Ledger) -> None:
    ledger.delivery_plan = plan()
    ledger.add_request(request_envelope("apr_1"), thread_id="thr_1")
    assert ledger.claim_deliveries("a", subscriptions=("other",), ttl=30, now=_later()) == []


def test_failures_back_off_then_the_delivery_is_dead_until_retried(ledger: Ledger) -> None:
    ledger.delivery_plan = plan()
    ledger.add_request(request_envelope("apr_1"), thread_id="thr_1")
    target = delivery_id_for("ops", "approval.requested", "apr_1")
    now = _later()
    for attempt in range(2):
        ledger.claim_deliveries("a", subscriptions=("ops",), ttl=30, now=now)
        failed = failed_change("a", "HTTP 500", now, retry_at=now + 5, max_attempts=2)
        after = ledger.update_delivery(target, failed)
        assert after is not None and after.attempts == attempt + 1
        now += 10
    dead = ledger.get_delivery(target)
    assert dead is not None and (dead.state, dead.last_error) == ("dead", "HTTP 500")
    assert target in {d.delivery_id for d in ledger.list_deliveries(states=("dead",))}

    ledger.update_delivery(target, retry_change(now))
    claimed = ledger.claim_deliveries("a", subscriptions=("ops",), ttl=30, now=now)
    assert target in {d.delivery_id for d in claimed}
    delivered = ledger.update_delivery(target, delivered_change(now))
    assert delivered is not None and delivered.state == "delivered"


def test_a_failure_reported_by_a_sender_that_lost_its_claim_changes_nothing(
    ledger: Ledger,
) -> None:
    ledger.delivery_plan = plan()
    ledger.add_request(request_envelope("apr_1"), thread_id="thr_1")
    target = delivery_id_for("ops", "approval.requested", "apr_1")
    now = _later()
    ledger.claim_deliveries("a", subscriptions=("ops",), ttl=30, now=now)
    ledger.claim_deliveries("b", subscriptions=("ops",), ttl=30, now=now + 31)
    ledger.update_delivery(
        target, failed_change("a", "HTTP 500", now, retry_at=now, max_attempts=1)
    )
    stored = ledger.get_delivery(target)
    assert stored is not None and (stored.state, stored.claimed_by) == ("pending", "b")


async def test_the_async_twins_claim_and_settle(ledger: Ledger) -> None:
    ledger.delivery_plan = plan()
    await ledger.aadd_request(request_envelope("apr_1"), thread_id="thr_1")
    claimed = await ledger.aclaim_deliveries("a", subscriptions=("ops",), ttl=30, now=_later())
    for delivery in claimed:
        await ledger.aupdate_delivery(delivery.delivery_id, delivered_change(_later()))
    assert await ledger.alist_deliveries() == []
    assert await ledger.aget_delivery(claimed[0].delivery_id) is not None


def _later() -> float:
    """A moment after every row these tests record is due."""
    import time

    return time.time() + 1.0


def test_a_delivery_cursor_moves_only_from_where_it_was_read(ledger: Ledger) -> None:
    requested = request_envelope("apr_1")
    ledger.add_request(requested, thread_id="thr_1")
    [stored] = ledger.list_pending()
    [notice, _] = plan().deliveries("approval.requested", stored, 1.0)
    assert ledger.delivery_cursor("ops") is None
    assert ledger.advance_delivery_cursor("ops", start=None, to=0, now=1.0)
    assert not ledger.advance_delivery_cursor("ops", start=None, to=5, now=1.0)

    assert ledger.advance_delivery_cursor("ops", start=0, to=1, deliveries=[notice], now=2.0)
    again = replace(notice, delivery_id=delivery_id_for("ops", "approval.resolved", "apr_1"))
    assert not ledger.advance_delivery_cursor("ops", start=0, to=1, deliveries=[again], now=3.0)
    assert ledger.delivery_cursor("ops") == 1
    assert [d.delivery_id for d in ledger.list_deliveries()] == [notice.delivery_id]


def test_a_delivery_already_recorded_stays_as_it_is(ledger: Ledger) -> None:
    ledger.delivery_plan = plan()
    ledger.add_request(request_envelope("apr_1"), thread_id="thr_1")
    [stored] = ledger.list_pending()
    before = sorted(ledger.list_deliveries(), key=lambda d: d.delivery_id)
    later = plan().deliveries("approval.requested", stored, before[0].created_at + 60)
    ledger.advance_delivery_cursor("ops", start=None, to=0, now=1.0)
    assert ledger.advance_delivery_cursor("ops", start=0, to=1, deliveries=later, now=2.0)
    assert sorted(ledger.list_deliveries(), key=lambda d: d.delivery_id) == before

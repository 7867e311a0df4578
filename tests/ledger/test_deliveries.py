"""Webhook deliveries are ledger state: written with the event, claimed once, retried, dead."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from aais_langgraph.ledger import DELIVERY, Ledger, shown_states
from aais_langgraph.ledger.deliveries import delivery_id_for
from aais_langgraph.ledger.outbox import Backoff, reopened_change, retried_change, settled_change
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


class _Switched:
    """A plan that records nothing until switched on (so a test's setup stays quiet)."""

    def __init__(self, plan: SubscriptionPlan) -> None:
        self.plan, self.on = plan, False

    def deliveries(self, notice: Any, request: Any, now: float) -> list[Any]:
        return self.plan.deliveries(notice, request, now) if self.on else []


def test_a_request_records_its_notices_in_its_own_write(make_ledger: Callable[..., Ledger]) -> None:
    ledger = make_ledger(delivery_plan=plan())
    ledger.add_request(request_envelope("apr_1"), thread_id="thr_1")

    found = {d.topic: d for d in ledger.list_work(DELIVERY)}
    assert set(found) == {"approval.requested", "approval.expiring"}
    requested = found["approval.requested"]
    assert requested.work_id == delivery_id_for("ops", "approval.requested", "apr_1")
    assert (requested.shown_state, requested.thread_id, requested.attempts) == (
        "pending",
        "thr_1",
        0,
    )


def test_a_replayed_request_records_nothing_more(make_ledger: Callable[..., Ledger]) -> None:
    ledger = make_ledger(delivery_plan=plan())
    ledger.add_request(request_envelope("apr_1"), thread_id="thr_1")
    ledger.add_request(request_envelope("apr_1"), thread_id="thr_1")
    assert len(ledger.list_work(DELIVERY)) == 2


def test_a_ledger_without_a_plan_records_no_delivery(ledger: Ledger) -> None:
    requested = request_envelope("apr_1")
    ledger.add_request(requested, thread_id="thr_1")
    ledger.record_resolution(approval(requested))
    assert (
        ledger.list_work(DELIVERY, states=shown_states(DELIVERY, ("pending", "dead", "delivered")))
        == []
    )


def test_a_resolution_records_its_notice_in_its_own_write(
    make_ledger: Callable[..., Ledger],
) -> None:
    requested = request_envelope("apr_1")
    ledger = make_ledger(delivery_plan=plan())
    ledger.add_request(requested, thread_id="thr_1")
    ledger.record_resolution(approval(requested))
    notices = sorted(d.topic for d in ledger.list_work(DELIVERY, request_id="apr_1"))
    assert notices == ["approval.expiring", "approval.requested", "approval.resolved"]


def test_a_resolution_that_fails_records_no_notice(make_ledger: Callable[..., Ledger]) -> None:
    first, second = request_envelope("apr_1"), request_envelope("apr_2")
    switched = _Switched(plan())
    ledger = make_ledger(delivery_plan=switched)
    ledger.add_request(first, thread_id="thr_1")
    ledger.add_request(second, thread_id="thr_2")
    ledger.record_resolution(approval(first, grant=grant_for(first, grant_id="grt_1")))
    switched.on = True
    clash = approval(second, resolution_id="res_2", grant=grant_for(second, grant_id="grt_1"))
    with pytest.raises(ValueError, match="grant"):
        ledger.record_resolution(clash)
    assert ledger.list_work(DELIVERY, request_id="apr_2") == []


def test_filters_choose_what_is_recorded(make_ledger: Callable[..., Ledger]) -> None:
    ledger = make_ledger(delivery_plan=plan(names=("deploy*",)))
    ledger.add_request(request_envelope("apr_1", action_name="shell"), thread_id="thr_1")
    ledger.add_request(request_envelope("apr_2", action_name="deploy_prod"), thread_id="thr_2")
    assert {d.request_id for d in ledger.list_work(DELIVERY)} == {"apr_2"}


def test_a_coalescing_subscription_keeps_one_pending_notice_per_thread(
    make_ledger: Callable[..., Ledger],
) -> None:
    first, second = request_envelope("apr_1"), request_envelope("apr_2")
    ledger = make_ledger(delivery_plan=plan(coalesce=True))
    ledger.add_request(first, thread_id="thr_1")
    ledger.add_request(second, thread_id="thr_1")
    ledger.record_resolution(approval(second))

    pending = [
        d
        for d in ledger.list_work(DELIVERY, states=shown_states(DELIVERY, ("pending",)))
        if d.coalesce_key
    ]
    assert [(d.topic, d.request_id) for d in pending] == [("approval.resolved", "apr_2")]
    replaced = ledger.list_work(DELIVERY, states=shown_states(DELIVERY, ("coalesced",)))
    assert sorted(d.request_id for d in replaced) == ["apr_1", "apr_2"]


def test_a_claimed_delivery_is_not_coalesced_away(make_ledger: Callable[..., Ledger]) -> None:
    ledger = make_ledger(delivery_plan=plan(coalesce=True))
    ledger.add_request(request_envelope("apr_1"), thread_id="thr_1")
    claimed = ledger.claim_work(DELIVERY, "a", targets=("ops",), ttl=60, now=_later())
    ledger.add_request(request_envelope("apr_2"), thread_id="thr_1")
    first = delivery_id_for("ops", "approval.requested", "apr_1")
    assert first in {d.work_id for d in claimed}
    stored = ledger.get_work(DELIVERY, first)
    assert stored is not None and stored.shown_state == "pending"


def test_one_sender_claims_a_delivery_until_its_claim_expires(
    make_ledger: Callable[..., Ledger],
) -> None:
    ledger = make_ledger(delivery_plan=plan())
    ledger.add_request(request_envelope("apr_1"), thread_id="thr_1")
    now = _later()

    first = ledger.claim_work(DELIVERY, "a", targets=("ops",), ttl=30, now=now)
    assert len(first) == 2 and {d.claimed_by for d in first} == {"a"}
    assert ledger.claim_work(DELIVERY, "b", targets=("ops",), ttl=30, now=now + 1) == []
    again = ledger.claim_work(DELIVERY, "b", targets=("ops",), ttl=30, now=now + 31)
    assert {d.work_id for d in again} == {d.work_id for d in first}


def test_claims_name_the_subscriptions_a_sender_knows(make_ledger: Callable[..., Ledger]) -> None:
    ledger = make_ledger(delivery_plan=plan())
    ledger.add_request(request_envelope("apr_1"), thread_id="thr_1")
    assert ledger.claim_work(DELIVERY, "a", targets=("other",), ttl=30, now=_later()) == []


def test_failures_back_off_then_the_delivery_is_dead_until_retried(
    make_ledger: Callable[..., Ledger],
) -> None:
    ledger = make_ledger(delivery_plan=plan())
    ledger.add_request(request_envelope("apr_1"), thread_id="thr_1")
    target = delivery_id_for("ops", "approval.requested", "apr_1")
    now = _later()
    for attempt in range(2):
        ledger.claim_work(DELIVERY, "a", targets=("ops",), ttl=30, now=now)
        failed = retried_change(
            "HTTP 500", now, backoff=Backoff(5.0, 5.0), holder="a", max_attempts=2
        )
        after = ledger.update_work(DELIVERY, target, failed)
        assert after is not None and after.attempts == attempt + 1
        now += 10
    dead = ledger.get_work(DELIVERY, target)
    assert dead is not None and (dead.state, dead.last_error) == ("dead", "HTTP 500")
    assert target in {
        d.work_id for d in ledger.list_work(DELIVERY, states=shown_states(DELIVERY, ("dead",)))
    }

    ledger.update_work(DELIVERY, target, reopened_change(now))
    claimed = ledger.claim_work(DELIVERY, "a", targets=("ops",), ttl=30, now=now)
    assert target in {d.work_id for d in claimed}
    delivered = ledger.update_work(DELIVERY, target, settled_change("done", now, counted=True))
    assert delivered is not None and delivered.shown_state == "delivered"


def test_a_failure_reported_by_a_sender_that_lost_its_claim_changes_nothing(
    make_ledger: Callable[..., Ledger],
) -> None:
    ledger = make_ledger(delivery_plan=plan())
    ledger.add_request(request_envelope("apr_1"), thread_id="thr_1")
    target = delivery_id_for("ops", "approval.requested", "apr_1")
    now = _later()
    ledger.claim_work(DELIVERY, "a", targets=("ops",), ttl=30, now=now)
    ledger.claim_work(DELIVERY, "b", targets=("ops",), ttl=30, now=now + 31)
    ledger.update_work(
        DELIVERY,
        target,
        retried_change("HTTP 500", now, backoff=Backoff(0.0, 0.0), holder="a", max_attempts=1),
    )
    stored = ledger.get_work(DELIVERY, target)
    assert stored is not None and (stored.shown_state, stored.claimed_by) == ("pending", "b")


async def test_the_async_twins_claim_and_settle(make_ledger: Callable[..., Ledger]) -> None:
    ledger = make_ledger(delivery_plan=plan())
    await ledger.aadd_request(request_envelope("apr_1"), thread_id="thr_1")
    claimed = await ledger.aclaim_work(DELIVERY, "a", targets=("ops",), ttl=30, now=_later())
    for delivery in claimed:
        await ledger.aupdate_work(
            DELIVERY, delivery.work_id, settled_change("done", _later(), counted=True)
        )
    assert await ledger.alist_work(DELIVERY) == []
    assert await ledger.aget_work(DELIVERY, claimed[0].work_id) is not None


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
    again = replace(notice, work_id=delivery_id_for("ops", "approval.resolved", "apr_1"))
    assert not ledger.advance_delivery_cursor("ops", start=0, to=1, deliveries=[again], now=3.0)
    assert ledger.delivery_cursor("ops") == 1
    assert [d.work_id for d in ledger.list_work(DELIVERY)] == [notice.work_id]


def test_a_delivery_already_recorded_stays_as_it_is(make_ledger: Callable[..., Ledger]) -> None:
    ledger = make_ledger(delivery_plan=plan())
    ledger.add_request(request_envelope("apr_1"), thread_id="thr_1")
    [stored] = ledger.list_pending()
    before = sorted(ledger.list_work(DELIVERY), key=lambda d: d.work_id)
    later = plan().deliveries("approval.requested", stored, before[0].created_at + 60)
    ledger.advance_delivery_cursor("ops", start=None, to=0, now=1.0)
    assert ledger.advance_delivery_cursor("ops", start=0, to=1, deliveries=later, now=2.0)
    assert sorted(ledger.list_work(DELIVERY), key=lambda d: d.work_id) == before

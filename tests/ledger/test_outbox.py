"""The outbox: one row type, one set of transitions and one listing for every kind of work."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Literal

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aais_langgraph.ledger import Ledger, StoredRequest
from aais_langgraph.ledger.outbox import (
    RESUME,
    WORK_STATES,
    Backoff,
    Work,
    WorkState,
    new_work,
    reopened_change,
    retried_change,
    settled_change,
    shown_states,
    skipped_change,
)

from .envelopes import approval, request_envelope

REMINDER = "reminder"


class ReminderPlan:
    """A plan of a kind the ledger does not know: a reminder to the requester's team."""

    def deliveries(
        self,
        notice: Literal["approval.requested", "approval.resolved"],
        request: StoredRequest,
        now: float,
    ) -> list[Work]:
        if notice != "approval.requested":
            return []
        return [
            new_work(
                REMINDER,
                f"remind_{request.request_id}",
                request.request_id,
                now,
                thread_id=request.thread_id,
                target="team",
                topic="nudge",
            )
        ]


def test_a_new_kind_is_recorded_with_its_cause_and_needs_nothing_new(
    make_ledger: Callable[..., Ledger],
) -> None:
    ledger = make_ledger(delivery_plan=ReminderPlan())
    ledger.add_request(request_envelope("apr_1"), thread_id="thr_1")

    [reminder] = ledger.list_work(REMINDER)
    assert (reminder.work_id, reminder.state, reminder.target) == ("remind_apr_1", "due", "team")
    assert reminder.to_json()["kind"] == REMINDER
    assert ledger.list_work(RESUME) == []

    later = reminder.next_at + 1
    [claimed] = ledger.claim_work(REMINDER, "w1", targets=("team",), ttl=30, now=later)
    assert (claimed.state, claimed.claimed_by) == ("claimed", "w1")
    assert ledger.claim_work(REMINDER, "w2", targets=("team",), ttl=30, now=later) == []

    failed = retried_change("HTTP 503", later, backoff=Backoff(2.0, 8.0), holder="w1")
    after = ledger.update_work(REMINDER, "remind_apr_1", failed)
    assert after is not None and (after.state, after.attempts) == ("due", 1)
    assert after.next_at == later + 2.0

    done = ledger.update_work(REMINDER, "remind_apr_1", settled_change("done", later + 3))
    assert done is not None and done.state == "done"
    assert ledger.list_work(REMINDER) == []


def test_a_resolution_leaves_resume_work_and_the_kinds_stay_apart(ledger: Ledger) -> None:
    requested = request_envelope("apr_1")
    ledger.add_request(requested, thread_id="thr_1")
    ledger.record_resolution(approval(requested))
    [work] = ledger.list_work(RESUME)
    assert (work.work_id, work.request_id, work.thread_id) == ("apr_1", "apr_1", "thr_1")
    assert ledger.get_work("delivery", "apr_1") is None
    assert list(work.to_json()) == [
        "request_id",
        "thread_id",
        "state",
        "since",
        "attempts",
        "next_at",
        "last_error",
        "updated_at",
    ]


def test_dead_work_is_reopened_with_its_attempts_counted_afresh() -> None:
    work = new_work(REMINDER, "w", "apr_1", 0.0)
    dead = retried_change("HTTP 500", 1.0, backoff=Backoff(1.0, 1.0), max_attempts=1)(work)
    assert dead is not None and (dead.state, dead.attempts) == ("dead", 1)
    again = reopened_change(5.0)(dead)
    assert again is not None and (again.state, again.attempts, again.next_at) == ("due", 0, 5.0)


def test_unknown_work_is_reopened_with_its_attempts_kept() -> None:
    work = retried_change("busy", 1.0, backoff=Backoff(0.5, 30.0))(new_work(RESUME, "a", "a", 0.0))
    unknown = settled_change("unknown", 2.0, reason="a human must look")(work)
    assert unknown is not None and unknown.last_error == "a human must look"
    again = reopened_change(3.0)(unknown)
    assert again is not None and (again.state, again.attempts) == ("due", 1)


def test_done_work_stays_done() -> None:
    done = settled_change("done", 1.0)(new_work(RESUME, "a", "a", 0.0))
    assert settled_change("unknown", 2.0)(done) is done
    assert skipped_change("late", 2.0)(done) is done
    assert reopened_change(2.0)(done) is done


def test_the_backoff_doubles_up_to_its_most() -> None:
    backoff = Backoff(first=0.5, most=30.0)
    assert [backoff.after(n) for n in range(8)] == [0.5, 1, 2, 4, 8, 16, 30, 30]


def test_listings_name_states_in_each_kinds_words() -> None:
    assert shown_states("delivery", ("pending",)) == ("due", "claimed")
    assert shown_states("delivery", ("delivered", "dead")) == ("done", "dead")
    assert shown_states(RESUME, ("due", "unknown")) == ("due", "unknown")
    delivered = settled_change("done", 1.0, counted=True)(new_work("delivery", "m", "r", 0.0))
    assert delivered is not None and (delivered.shown_state, delivered.attempts) == (
        "delivered",
        1,
    )


def test_a_change_that_moves_the_row_records_its_work_and_audit_in_one_write(
    make_ledger: Callable[..., Ledger],
) -> None:
    from aais_langgraph.ledger import DELIVERY, verify_audit
    from aais_langgraph.ledger.follow_ups import followed_change

    ledger = make_ledger(delivery_plan=ReminderPlan())
    ledger.add_request(request_envelope("apr_1"), thread_id="thr_1")
    [reminder] = ledger.list_work(REMINDER)
    later = reminder.next_at + 1
    [claimed] = ledger.claim_work(REMINDER, "w1", targets=("team",), ttl=30, now=later)
    caused = new_work(DELIVERY, "msg_1", "apr_1", later, target="ops", topic="approval.reminder")
    audit = {"request_id": "apr_1", "follow_up": "reminder", "by": "system"}

    # Another worker's claim: its change moves nothing, so nothing else is written.
    assert (
        ledger.update_work(
            REMINDER, claimed.work_id, followed_change("w2", later), records=[caused], audit=audit
        )
        == claimed
    )
    assert ledger.list_work(DELIVERY) == []
    assert [e for e in ledger.audit_entries() if e.kind == "follow_up"] == []

    after = ledger.update_work(
        REMINDER, claimed.work_id, followed_change("w1", later), records=[caused], audit=audit
    )
    assert after is not None and after.state == "done"
    [delivery] = ledger.list_work(DELIVERY)
    assert (delivery.work_id, delivery.topic) == ("msg_1", "approval.reminder")
    [entry] = [e for e in ledger.audit_entries() if e.kind == "follow_up"]
    assert entry.payload == audit
    assert ledger.follow_up_entries("apr_1") == [entry]  # the indexed read finds it
    assert ledger.follow_up_entries("apr_2") == []
    # Done stays done: running it again writes nothing more.
    ledger.update_work(
        REMINDER, claimed.work_id, followed_change("w1", later), records=[caused], audit=audit
    )
    assert len([e for e in ledger.audit_entries() if e.kind == "follow_up"]) == 1
    assert verify_audit(ledger.audit_entries(), ledger.audit_tip()).ok


def test_finished_work_keeps_its_result_for_later_work(
    make_ledger: Callable[..., Ledger],
) -> None:
    ledger = make_ledger(delivery_plan=ReminderPlan())
    ledger.add_request(request_envelope("apr_1"), thread_id="thr_1")
    [reminder] = ledger.list_work(REMINDER)
    assert reminder.result is None

    after = ledger.update_work(
        REMINDER, reminder.work_id, settled_change("done", 5.0, result="C1 171.5")
    )
    assert after is not None and after.result == "C1 171.5"
    stored = ledger.get_work(REMINDER, reminder.work_id)
    assert stored is not None and (stored.state, stored.result) == ("done", "C1 171.5")
    # A later change that gives no result keeps the one stored.
    again = ledger.update_work(REMINDER, reminder.work_id, settled_change("unknown", 6.0))
    assert again is not None and again.result == "C1 171.5"


_examples = itertools.count()
_STATE_SETS: list[tuple[WorkState, ...]] = [
    ("due",),
    ("due", "claimed"),
    ("done", "coalesced", "skipped"),
    ("unknown", "unknown"),
    ("due", "claimed", "dead", "unknown"),
    WORK_STATES,
]
_step = st.tuples(
    st.sampled_from(["record", "record coalescing", "claim", "done", "unknown", "skip", "reopen"]),
    st.integers(0, 3),
    st.sampled_from(["x", "y"]),
    st.integers(0, 20),
)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(_step, max_size=14))
def test_listed_work_is_the_stored_work_in_those_states(
    ledger: Ledger, steps: list[tuple[str, int, str, int]]
) -> None:
    """Whatever the rows went through (recorded, coalesced, claimed, settled, skipped,
    reopened), listing some states gives exactly the stored rows in those states."""
    prefix = f"e{next(_examples)}_"
    ledger.add_request(request_envelope("apr_1"), thread_id="thr_1")
    now = 1000.0
    recorded: set[str] = set()
    for number, (operation, index, target, pause) in enumerate(steps):
        now += pause
        work_id = f"{prefix}w{index}"
        if operation.startswith("record"):
            key = "k" if operation == "record coalescing" else None
            work = new_work(REMINDER, work_id, "apr_1", now, target=target, coalesce_key=key)
            anchor = f"{prefix}a{number}"
            ledger.update_work(
                RESUME,
                anchor,
                lambda current, a=anchor, t=now: current or new_work(RESUME, a, "apr_1", t),
                records=[work],
            )
            recorded.add(work_id)
        elif operation == "claim":
            ledger.claim_work(REMINDER, "h", targets=(target,), ttl=5, now=now)
        elif operation in ("done", "unknown"):
            ledger.update_work(REMINDER, work_id, settled_change(operation, now))  # type: ignore[arg-type]
        elif operation == "skip":
            ledger.update_work(REMINDER, work_id, skipped_change("not wanted", now))
        else:
            ledger.update_work(REMINDER, work_id, reopened_change(now))
        stored = [ledger.get_work(REMINDER, work_id) for work_id in sorted(recorded)]
        for states in _STATE_SETS:
            listed = [
                w for w in ledger.list_work(REMINDER, states=states) if w.work_id.startswith(prefix)
            ]
            expected = sorted(
                (work for work in stored if work is not None and work.state in states),
                key=lambda work: (work.next_at, work.work_id),
            )
            assert listed == expected, states

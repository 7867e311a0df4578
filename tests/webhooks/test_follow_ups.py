"""Reminders, escalation and requester notices: durable follow-ups run by the authority's clock."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aais_langgraph.authority import (
    AccessPolicy,
    ApprovalAuthority,
    ForbiddenError,
    Principal,
)
from aais_langgraph.authority.access_policy import ApproverRule
from aais_langgraph.ledger import FOLLOW_UP, InMemoryLedger, Ledger, SqliteLedger
from aais_langgraph.protocol import Actor, build_decision
from aais_langgraph.webhooks import (
    FollowUpRunner,
    SubscriptionPlan,
    WebhookSubscription,
    WebhookWorker,
)

from .mailbox import Mailbox
from .receivers import SECRET, Receiver

ORIGIN = {"harness": "tests", "session_id": "sess_1"}
START = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(hours=1)
"""The injected clock starts ahead of real time: what the ledger stamps by real time
(the deliveries a write records) is then due by it, as it is when both are real."""

POLICY = {
    "default_approvers": ["sre"],
    "approvers": [
        {
            "names": ["deploy*"],
            "groups": ["sre"],
            "remind_after": 600,
            "remind_every": 300,
            "remind_times": 2,
            "escalate_after": 1800,
            "escalate_to": ["managers"],
        }
    ],
    "requesters": {
        "notify": ["denied", "expired", "cancelled"],
        "notify_via": "mail",
        "addresses": {"alice": "alice@example.com"},
    },
}

WITHOUT_REQUESTERS = {key: value for key, value in POLICY.items() if key != "requesters"}
SRE = Principal(Actor(id="sam", type="human"), groups=frozenset({"sre"}))
MANAGER = Principal(Actor(id="mia", type="human"), groups=frozenset({"managers"}))


class Clock:
    """The authority's clock, moved by hand."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


class Site:
    """An authority on a ledger opened with the subscriptions' plan and the policy, a
    follow-up runner and a sender, all on one injected clock."""

    def __init__(
        self,
        ledger_for: Any,
        subscriptions: list[WebhookSubscription],
        clock: Clock,
        policy: dict[str, Any] | None = None,
    ) -> None:
        if policy is None:
            mails = any(item.format == "email" for item in subscriptions)
            policy = POLICY if mails else WITHOUT_REQUESTERS
        self.policy = AccessPolicy.from_mapping(policy)
        self.plan = SubscriptionPlan(subscriptions, policy=self.policy)
        self.ledger: Ledger = ledger_for(self.plan)
        self.clock = clock
        self.authority = ApprovalAuthority(self.ledger, authorizer=self.policy, clock=clock)
        epoch = lambda: clock().timestamp()  # noqa: E731
        self.runner = FollowUpRunner(self.authority, self.plan, claim_ttl=5.0)
        self.worker = WebhookWorker(
            self.authority,
            subscriptions,
            retry_base=0.01,
            retry_max=0.05,
            timeout=2.0,
            claim_ttl=5.0,
            clock=epoch,
        )

    def ask(self, request_id: str, *, name: str = "deploy-api", expires_in: float = 7200) -> Any:
        return self.authority.request(
            {
                "kind": "tool_call",
                "name": name,
                "arguments": {"token": "hunter2-secret"},
                "summary": f"Run {name}",
            },
            origin=ORIGIN,
            risk={"level": "high", "reasons": ["tests"]},
            request_id=request_id,
            thread_id=f"thr_{request_id}",
            expires_in=timedelta(seconds=expires_in),
            context={"requester": "alice"},
        )

    def at(self, seconds: float) -> None:
        """Move to ``seconds`` after the start, then run the follow-ups and send."""
        self.clock.now = START + timedelta(seconds=seconds)
        self.runner.run_due()
        self.worker.deliver_due()

    def follow_up_audits(self) -> list[dict[str, Any]]:
        return [e.payload for e in self.ledger.audit_entries() if e.kind == "follow_up"]


def hook(url: str, name: str = "ops", **settings: Any) -> WebhookSubscription:
    settings.setdefault("as_groups", frozenset({"sre"}))
    return WebhookSubscription(name=name, url=url, secret=SECRET, **settings)


def mail(port: int, **settings: Any) -> WebhookSubscription:
    from aais_langgraph.webhooks import MailSettings

    settings.setdefault("as_groups", frozenset({"sre"}))
    return WebhookSubscription(
        name=settings.pop("name", "mail"),
        url=f"smtp://127.0.0.1:{port}",
        format="email",
        mail=MailSettings(
            to=("oncall@example.com",),
            sender="approvals@example.com",
            host="127.0.0.1",
            port=port,
            starttls=False,
        ),
        inbox_url="https://approvals.example/inbox/",
        notices=frozenset({"approval.requested"}),
        **settings,
    )


LEDGERS = {
    "memory": lambda tmp: lambda plan: InMemoryLedger(delivery_plan=plan),
    "sqlite": lambda tmp: lambda plan: SqliteLedger(tmp / "ledger.db", delivery_plan=plan),
}


@pytest.fixture(params=sorted(LEDGERS))
def ledger_for(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    return LEDGERS[request.param](tmp_path)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as running:
        yield running


@pytest.fixture
def mailbox() -> Iterator[Mailbox]:
    with Mailbox() as running:
        yield running


def told(receiver: Receiver, notice: str) -> list[dict[str, Any]]:
    return [body for body in receiver.bodies.values() if body["type"] == notice]


def test_reminders_come_at_their_times_and_at_most_remind_times(
    ledger_for: Any, receiver: Receiver, mailbox: Mailbox
) -> None:
    site = Site(ledger_for, [hook(receiver.url), mail(mailbox.port)], Clock())
    site.ask("apr_remind")
    moments = [(599, 0), (600, 1), (899, 1), (900, 2), (1500, 2), (1799, 2)]
    for seconds, expected in moments:
        site.at(seconds)
        assert len(told(receiver, "approval.reminder")) == expected, seconds
    reminders = [a for a in site.follow_up_audits() if a["follow_up"] == "reminder"]
    assert [a["reminder"] for a in reminders] == [1, 2]
    assert all(a["by"] == "system" and "actor" not in a for a in reminders)
    # A reminder approves nothing: the request still waits.
    assert site.authority.get_resolution("apr_remind") is None


def test_reminders_stop_once_the_request_is_resolved(ledger_for: Any, receiver: Receiver) -> None:
    site = Site(ledger_for, [hook(receiver.url)], Clock())
    requested = site.ask("apr_stop")
    site.at(600)
    assert len(told(receiver, "approval.reminder")) == 1
    decided = build_decision(requested, decision="approve", scope="once", actor=SRE.actor)
    site.authority.decide(decided, actor=SRE)
    for seconds in (900, 1800, 3600):
        site.at(seconds)
    assert len(told(receiver, "approval.reminder")) == 1
    assert told(receiver, "approval.escalated") == []
    rows = site.ledger.list_work(FOLLOW_UP, states=("skipped",), request_id="apr_stop")
    assert {row.target for row in rows} == {"reminder", "escalation"}


def test_a_request_no_rule_reminds_gets_no_follow_up(ledger_for: Any, receiver: Receiver) -> None:
    site = Site(ledger_for, [hook(receiver.url)], Clock())
    site.ask("apr_plain", name="read-logs")
    site.at(5000)
    assert told(receiver, "approval.reminder") == []
    assert site.ledger.list_work(FOLLOW_UP, states=("due", "done")) == []


def test_the_escalated_group_decides_only_once_the_escalation_ran(
    ledger_for: Any, receiver: Receiver
) -> None:
    managers = Receiver()
    with managers:
        subscriptions = [
            hook(receiver.url, groups=frozenset({"sre"})),
            hook(
                managers.url,
                name="managers",
                groups=frozenset({"managers"}),
                as_groups=frozenset({"managers"}),
            ),
        ]
        site = Site(ledger_for, subscriptions, Clock())
        requested = site.ask("apr_esc")
        access = site.authority.access
        assert not access.may_view(MANAGER, "apr_esc")
        # Past the escalation's moment, but no worker ran it: no clock lets them in.
        site.clock.now = START + timedelta(seconds=1801)
        assert not access.may_view(MANAGER, "apr_esc")
        with pytest.raises(ForbiddenError):
            access.require(MANAGER, "decide", "apr_esc", decision="approve")

        site.at(1801)
        assert access.may_view(MANAGER, "apr_esc")
        assert [b["data"]["request"]["id"] for b in told(managers, "approval.escalated")] == [
            "apr_esc"
        ]
        assert told(receiver, "approval.escalated") == []  # for the sre groups only
        (escalation,) = [a for a in site.follow_up_audits() if a["follow_up"] == "escalation"]
        assert escalation["escalated_to"] == ["managers"]
        assert escalation["by"] == "system" and "actor" not in escalation

        decided = build_decision(requested, decision="approve", scope="once", actor=MANAGER.actor)
        resolved = site.authority.decide(decided, actor=MANAGER)
        assert resolved.resolution.outcome == "approved"


def test_an_escalation_never_decides_and_an_expiry_stays_an_expiry(
    ledger_for: Any, receiver: Receiver
) -> None:
    site = Site(ledger_for, [hook(receiver.url)], Clock())
    site.ask("apr_short", expires_in=1000)
    site.at(600)
    site.at(1000)  # the reminder due at 900 runs at the expiry: too late to remind
    site.at(2000)  # the escalation's moment is past the expiry
    assert len(told(receiver, "approval.reminder")) == 1
    assert told(receiver, "approval.escalated") == []
    assert site.authority.get_resolution("apr_short") is None
    (expired,) = site.authority.expire_due()
    assert expired.resolution.outcome == "expired"
    escalation = site.ledger.get_work(FOLLOW_UP, "apr_short#escalation")
    assert escalation is not None and escalation.state == "skipped"


@pytest.mark.parametrize("outcome", ["denied", "expired", "cancelled"])
def test_the_requester_is_told_by_email_when_denied_expired_or_cancelled(
    outcome: str, ledger_for: Any, mailbox: Mailbox
) -> None:
    site = Site(ledger_for, [mail(mailbox.port)], Clock())
    requested = site.ask(f"apr_{outcome}", expires_in=60)
    if outcome == "denied":
        decided = build_decision(requested, decision="deny", scope="once", actor=SRE.actor)
        site.authority.decide(decided, actor=SRE)
    elif outcome == "cancelled":
        site.authority.cancel(f"apr_{outcome}", actor=SRE)
    else:
        site.clock.advance(61)
        site.authority.expire_due()
    site.at((site.clock.now - START).total_seconds())
    to_alice = [m for rcpt, m in mailbox.messages if rcpt == ("alice@example.com",)]
    assert len(to_alice) == 1
    assert f"was {outcome}" in to_alice[0]["Subject"]
    body = to_alice[0].get_payload(decode=True).decode()
    assert f"#request=apr_{outcome}" in body and "hunter2" not in body
    (notice,) = [a for a in site.follow_up_audits() if a["follow_up"] == "requester"]
    assert notice["outcome"] == outcome and notice["by"] == "system"


def test_the_requester_is_not_told_of_an_approval(ledger_for: Any, mailbox: Mailbox) -> None:
    site = Site(ledger_for, [mail(mailbox.port)], Clock())
    requested = site.ask("apr_ok")
    decided = build_decision(requested, decision="approve", scope="once", actor=SRE.actor)
    site.authority.decide(decided, actor=SRE)
    site.at(1)
    assert [rcpt for rcpt, _ in mailbox.messages if rcpt == ("alice@example.com",)] == []
    row = site.ledger.get_work(FOLLOW_UP, "apr_ok#requester")
    assert row is not None and row.state == "skipped"


def test_two_runners_never_both_send_one_reminder(tmp_path: Path, receiver: Receiver) -> None:
    path = tmp_path / "ledger.db"
    clock = Clock()
    first = Site(lambda plan: SqliteLedger(path, delivery_plan=plan), [hook(receiver.url)], clock)
    second = Site(lambda plan: SqliteLedger(path, delivery_plan=plan), [hook(receiver.url)], clock)
    for index in range(8):
        first.ask(f"apr_race_{index}")
    clock.now = START + timedelta(seconds=600)
    barrier = threading.Barrier(2)

    def run(site: Site) -> None:
        barrier.wait()
        for _ in range(5):
            site.runner.run_due()

    threads = [threading.Thread(target=run, args=(site,)) for site in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    first.worker.deliver_due()
    second.worker.deliver_due()
    reminders = told(receiver, "approval.reminder")
    assert sorted(b["data"]["request"]["id"] for b in reminders) == sorted(
        f"apr_race_{index}" for index in range(8)
    )
    assert receiver.duplicates == 0
    audits = [a for a in first.follow_up_audits() if a["follow_up"] == "reminder"]
    assert len(audits) == 8


def test_a_claim_that_lapsed_is_run_by_the_next_worker_once(
    ledger_for: Any, receiver: Receiver
) -> None:
    site = Site(ledger_for, [hook(receiver.url)], Clock())
    site.ask("apr_lapse")
    site.clock.now = START + timedelta(seconds=600)
    (claimed,) = site.runner.claim()  # a worker that dies here, before running it
    assert claimed.target == "reminder"
    other = FollowUpRunner(site.authority, site.plan, claim_ttl=5.0)
    assert other.run_due() == []  # its claim still holds
    site.clock.advance(6)
    (after,) = other.run_due()
    assert after.state == "done"
    assert site.runner.run(claimed) is not None  # the first one comes back: nothing twice
    site.worker.deliver_due()
    assert len(told(receiver, "approval.reminder")) == 1
    assert len([a for a in site.follow_up_audits() if a["follow_up"] == "reminder"]) == 1


@given(
    after=st.floats(min_value=1, max_value=10_000),
    every=st.one_of(st.none(), st.floats(min_value=1, max_value=10_000)),
    times=st.integers(min_value=1, max_value=20),
)
def test_a_rule_schedules_at_most_remind_times_reminders_in_order(
    after: float, every: float | None, times: int
) -> None:
    rule = ApproverRule(
        frozenset({"sre"}), remind_after=after, remind_every=every, remind_times=times
    )
    moments = rule.reminders_at(1000.0)
    assert len(moments) == times
    assert moments[0] == pytest.approx(1000.0 + after)
    assert all(later > earlier for earlier, later in itertools.pairwise(moments))


@pytest.mark.parametrize(
    ("rule", "named"),
    [
        ({"groups": ["sre"], "remind_after": 0}, "remind_after"),
        ({"groups": ["sre"], "remind_after": True}, "remind_after"),
        ({"groups": ["sre"], "remind_every": 60}, "remind_after"),
        ({"groups": ["sre"], "remind_after": 60, "remind_times": 21}, "remind_times"),
        ({"groups": ["sre"], "escalate_after": 60}, "escalate_to"),
        ({"groups": ["sre"], "escalate_to": ["managers"]}, "escalate_to"),
        ({"groups": ["sre"], "escalate_after": 60, "escalate_to": "managers"}, "escalate_to"),
    ],
)
def test_a_bad_follow_up_setting_is_named(rule: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        AccessPolicy.from_mapping({"approvers": [rule]})


def test_requester_notices_need_an_email_subscription(receiver: Receiver) -> None:
    policy = AccessPolicy.from_mapping(POLICY)
    with pytest.raises(ValueError, match="notify_via"):
        SubscriptionPlan([hook(receiver.url, name="mail")], policy=policy)
    with pytest.raises(ValueError, match="notify_via"):
        AccessPolicy.from_mapping({"requesters": {"notify": ["denied"]}})
    with pytest.raises(ValueError, match=r"requesters\.notify:"):
        AccessPolicy.from_mapping({"requesters": {"notify": ["approved"], "notify_via": "m"}})


async def test_the_service_runs_follow_ups_as_a_named_job_by_the_authoritys_clock(
    tmp_path: Path, receiver: Receiver
) -> None:
    import asyncio

    from aais_agui.service import ApprovalService, ServiceSettings

    subscriptions = [hook(receiver.url)]
    site = Site(
        lambda plan: SqliteLedger(tmp_path / "ledger.db", delivery_plan=plan),
        subscriptions,
        Clock(),
    )
    settings = ServiceSettings(deliveries_every=3600, follow_ups_every=3600)
    service = ApprovalService(None, site.authority, settings=settings, webhooks=subscriptions)
    async with service.lifespan():
        assert service.scheduler is not None
        assert "follow_ups" in service.scheduler.names
        await asyncio.to_thread(site.ask, "apr_served")
        site.clock.now = START + timedelta(seconds=599)
        await service.scheduler.run_once("follow_ups")
        assert site.ledger.list_work(FOLLOW_UP, states=("done",)) == []
        site.clock.now = START + timedelta(seconds=600)
        await service.scheduler.run_once("follow_ups")
        for _ in range(200):  # the sends run in the background: bounded wait
            await service.scheduler.run_once("deliveries")
            if told(receiver, "approval.reminder"):
                break
            await asyncio.sleep(0.02)
    (reminder,) = told(receiver, "approval.reminder")
    assert reminder["data"]["request"]["id"] == "apr_served"


def test_the_cli_lists_the_follow_ups_that_wait_and_those_that_ran(
    tmp_path: Path, receiver: Receiver
) -> None:
    import io

    from aais_langgraph.cli import main as cli_main

    db = tmp_path / "ledger.db"
    site = Site(lambda plan: SqliteLedger(db, delivery_plan=plan), [hook(receiver.url)], Clock())
    site.ask("apr_cli")
    site.at(600)
    out = io.StringIO()
    assert cli_main(["--db", str(db), "webhooks", "follow-ups"], stdout=out) == 0
    lines = out.getvalue().splitlines()
    assert lines[-1] == "2 follow-ups"
    assert [line.split()[:2] for line in lines[:-1]] == [
        ["apr_cli#reminder-2", "reminder"],
        ["apr_cli#escalation", "escalation"],
    ]
    out = io.StringIO()
    assert cli_main(["--db", str(db), "webhooks", "follow-ups", "--state", "done"], stdout=out) == 0
    assert out.getvalue().splitlines()[0].split()[:4] == [
        "apr_cli#reminder-1",
        "reminder",
        "apr_cli",
        "done",
    ]
    site.at(1800)
    out = io.StringIO()
    assert cli_main(["--db", str(db), "show", "apr_cli"], stdout=out) == 0
    history = [line.split()[:3] for line in out.getvalue().splitlines() if "follow-up" in line]
    assert sorted(history) == [
        ["follow-up", "escalation", "done"],
        ["follow-up", "reminder", "done"],
        ["follow-up", "reminder", "done"],
    ]
    # The follow_up audit entries are links of the chain like any other.
    assert cli_main(["--db", str(db), "audit", "verify"], stdout=io.StringIO()) == 0


def test_a_listing_shows_the_escalated_group_the_request_once_it_escalated(
    ledger_for: Any, receiver: Receiver
) -> None:
    from aais_langgraph.threads import visible_snapshot

    site = Site(ledger_for, [hook(receiver.url)], Clock())
    site.ask("apr_listed")

    def listed() -> list[str]:
        snapshot = visible_snapshot(site.authority, site.authority.snapshot(), MANAGER)
        return [request.id for request in snapshot.snapshot.pending]

    assert listed() == []  # remembered per viewer by a deterministic policy...
    site.at(1800)
    assert listed() == ["apr_listed"]  # ...but not past the escalation


@pytest.mark.parametrize(
    ("options", "named"),
    [({"claim_ttl": 0}, "claim_ttl"), ({"batch": 0}, "batch"), ({"clock": 5}, "clock")],
)
def test_a_runner_names_a_bad_setting(options: dict[str, Any], named: str) -> None:
    policy = AccessPolicy.from_mapping(WITHOUT_REQUESTERS)
    plan = SubscriptionPlan([], policy=policy)
    authority = ApprovalAuthority(InMemoryLedger(delivery_plan=plan), authorizer=policy)
    with pytest.raises((ValueError, TypeError), match=named):
        FollowUpRunner(authority, plan, **options)
    with pytest.raises(ValueError, match="plan"):
        FollowUpRunner(authority, SubscriptionPlan([]))


def test_the_notices_carry_spec_shaped_envelopes_and_slack_headlines(
    receiver: Receiver, mailbox: Mailbox
) -> None:
    import aais

    from aais_langgraph.webhooks import slack_body

    site = Site(lambda plan: InMemoryLedger(delivery_plan=plan), [hook(receiver.url)], Clock())
    requested = site.ask("apr_shape")
    site.at(1800)
    for notice in ("approval.reminder", "approval.escalated"):
        (body,) = told(receiver, notice)[:1]
        aais.validate(body["data"])
        assert body["data"]["request"]["id"] == "apr_shape"
        headline = slack_body(notice, requested, None, inbox_url=None, include_arguments=False)[
            "text"
        ]
        assert headline.startswith(("Reminder:", "Escalated:")) and "hunter2" not in headline


def test_a_requester_without_an_address_is_not_mailed(ledger_for: Any, mailbox: Mailbox) -> None:
    site = Site(ledger_for, [mail(mailbox.port)], Clock())
    site.authority.request(
        {"kind": "tool_call", "name": "deploy-x", "summary": "Deploy", "arguments": {}},
        origin=ORIGIN,
        request_id="apr_bob",
        thread_id="thr_bob",
        expires_in=timedelta(hours=1),
        context={"requester": "bob"},
    )
    site.authority.cancel("apr_bob", actor=SRE)
    site.at(1)
    assert [rcpt for rcpt, _ in mailbox.messages if "oncall@example.com" not in rcpt] == []
    from aais_langgraph.ledger import DELIVERY

    (skipped,) = [
        row
        for row in site.ledger.list_work(DELIVERY, states=("skipped",))
        if row.topic == "approval.requester_notice"
    ]
    assert skipped.last_error == "the requester has no address ([requesters.addresses])"


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text("QZJ#", max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=6,
)


@given(
    key=st.sampled_from(
        ["remind_after", "remind_every", "remind_times", "escalate_after", "escalate_to"]
    ),
    value=JSONISH,
)
def test_any_follow_up_setting_loads_or_is_refused_by_its_name_without_its_value(
    key: str, value: Any
) -> None:
    rule: dict[str, Any] = {"groups": ["sre"], "remind_after": 60, key: value}
    if key == "escalate_to":
        rule["escalate_after"] = 60
    try:
        AccessPolicy.from_mapping({"approvers": [rule]})
    except ValueError as error:
        message = str(error)
        assert message.startswith("approvers[0].")
        if isinstance(value, str) and value:  # of letters no message uses
            assert value not in message


def test_an_escalation_row_planted_in_the_ledger_file_lets_nobody_in(
    tmp_path: Path, receiver: Receiver
) -> None:
    import sqlite3

    db = tmp_path / "ledger.db"
    site = Site(lambda plan: SqliteLedger(db, delivery_plan=plan), [hook(receiver.url)], Clock())
    site.ask("apr_planted")
    with sqlite3.connect(db) as raw:
        raw.execute(
            "UPDATE aais_outbox SET state = 'done' WHERE kind = 'follow_up' AND work_id = ?",
            ("apr_planted#escalation",),
        )
    assert not site.authority.access.may_view(MANAGER, "apr_planted")


def test_an_escalation_stays_vouched_for_after_retention_compacts_the_chain(
    ledger_for: Any, receiver: Receiver
) -> None:
    import time

    from aais_langgraph.ledger import RetentionPolicy, verify_audit

    only = frozenset({"approval.reminder", "approval.escalated"})  # no expiry notice waits
    site = Site(ledger_for, [hook(receiver.url, notices=only)], Clock())
    site.ask("apr_kept")
    for index in range(3):
        site.ask(f"apr_gone_{index}", name="read-logs")
        site.authority.cancel(f"apr_gone_{index}", actor=SRE)
    site.at(1800)
    assert site.authority.access.may_view(MANAGER, "apr_kept")
    for index in range(3):
        row = site.ledger.get_work("resume", f"apr_gone_{index}")
        if row is not None:  # nothing serves the threads here: their resume work is done by hand
            from aais_langgraph.ledger.outbox import settled_change

            site.ledger.update_work("resume", row.work_id, settled_change("done", time.time()))
    report = site.ledger.compact_history(
        RetentionPolicy(keep_days=0, keep_last=0), now=time.time() + 10**6
    )
    assert report.requests_removed == 3 and report.entries_removed > 0
    assert verify_audit(site.ledger.audit_entries(), site.ledger.audit_tip()).ok
    assert site.authority.access.may_view(MANAGER, "apr_kept")

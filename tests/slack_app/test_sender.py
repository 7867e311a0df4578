"""The sender's Slack app target: posts and rewrites are outbox deliveries, retried until
Slack takes them, the message's channel and ``ts`` kept for the rewrite."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from aais_agui import ApprovalService
from aais_langgraph import ApprovalAuthority, build_decision
from aais_langgraph.ledger import DELIVERY, InMemoryLedger
from aais_langgraph.ledger.deliveries import delivery_id_for
from aais_langgraph.webhooks import SlackApp, SlackChannel, SubscriptionPlan, WebhookWorker

from .fake_slack import TOKEN, FakeSlack, fake_slack

pytestmark = pytest.mark.slow  # a loopback server plays Slack

FAST = {"retry_base": 0.0, "retry_max": 0.0, "poll_interval": 0.01, "timeout": 2.0}
ORIGIN = {"harness": "tests", "session_id": "sess-1"}


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with fake_slack() as served:
        yield served


def channel(api_url: str, **settings: object) -> SlackChannel:
    return SlackChannel(
        name="ops",
        channel="C0OPS",
        token=settings.pop("token", TOKEN),  # type: ignore[arg-type]
        signing_secret="secret",
        api_url=api_url,
        **settings,  # type: ignore[arg-type]
    )


def sender(ops: SlackChannel) -> tuple[ApprovalAuthority, WebhookWorker]:
    ledger = InMemoryLedger(delivery_plan=SubscriptionPlan([ops.subscription]))
    authority = ApprovalAuthority(ledger)
    return authority, WebhookWorker(authority, [ops], **FAST)  # type: ignore[arg-type]


def ask(authority: ApprovalAuthority, request_id: str) -> None:
    authority.request(
        {"kind": "fs.delete", "name": "delete_file", "summary": "Delete it", "arguments": {}},
        origin=ORIGIN,
        request_id=request_id,
        thread_id=f"thr_{request_id}",
        expires_in=timedelta(hours=1),
    )


def deny(authority: ApprovalAuthority, request_id: str) -> None:
    requested = authority.get_request(request_id)
    assert requested is not None
    authority.decide(
        build_decision(requested, decision="deny", actor={"id": "bob", "type": "human"})
    )


def post_row(authority: ApprovalAuthority, request_id: str) -> object:
    return authority.ledger.get_work(
        DELIVERY, delivery_id_for("ops", "approval.requested", request_id)
    )


def test_a_post_slack_refuses_is_retried_with_slacks_error_code(slack: FakeSlack) -> None:
    authority, worker = sender(channel(slack.url))
    ask(authority, "apr_1")
    slack.failures = 2

    worker.deliver_due()
    row = post_row(authority, "apr_1")
    assert row.state == "due" and row.last_error == "slack ratelimited"  # type: ignore[attr-defined]
    worker.deliver_due()
    worker.deliver_due()

    [post] = slack.posted()
    row = post_row(authority, "apr_1")
    assert row.state == "done" and row.result == f"C0OPS {post.ts}"  # type: ignore[attr-defined]
    worker.close()


def test_a_token_slack_does_not_know_fails_without_echoing_it(slack: FakeSlack) -> None:
    authority, worker = sender(channel(slack.url, token="xoxb-wrong-token", max_attempts=1))
    ask(authority, "apr_1")
    worker.deliver_due()
    row = post_row(authority, "apr_1")
    assert row.state == "dead" and row.last_error == "slack invalid_auth"  # type: ignore[attr-defined]
    assert slack.posted() == []
    worker.close()


def test_the_rewrite_waits_for_the_post_and_uses_its_ts(slack: FakeSlack) -> None:
    authority, worker = sender(channel(slack.url))
    ask(authority, "apr_1")
    deny(authority, "apr_1")  # resolved before anything was sent
    update_id = delivery_id_for("ops", "approval.resolved", "apr_1")
    resolved = authority.ledger.get_work(DELIVERY, update_id)
    assert resolved is not None
    claimed = {item.work_id: item for item in worker.claim(limit=10)}
    worker.deliver(claimed[update_id])  # the rewrite comes first: nothing to rewrite yet
    waiting = authority.ledger.get_work(DELIVERY, update_id)
    assert waiting is not None and waiting.state == "due"
    assert waiting.last_error == "the request's message is not posted yet"
    assert slack.calls == []

    post_id = delivery_id_for("ops", "approval.requested", "apr_1")
    worker.deliver(claimed[post_id])
    worker.deliver_due()
    [post] = slack.posted()
    assert "Denied" in post.text and post.buttons == []  # posted already resolved
    [update] = slack.updated()
    assert (update.body["channel"], update.body["ts"]) == ("C0OPS", post.ts)
    worker.close()


def test_a_service_with_slack_needs_a_ledger_that_records_its_deliveries(
    slack: FakeSlack,
) -> None:
    ops = channel(slack.url)
    app = SlackApp((ops,))
    with pytest.raises(ValueError, match=r"^slack: the authority's ledger records no deliveries"):
        ApprovalService(None, ApprovalAuthority(InMemoryLedger()), slack=app)
    authority, worker = sender(channel(slack.url))  # another channel object, same name
    with pytest.raises(ValueError, match=r"^slack: the worker given must send for"):
        ApprovalService(None, authority, webhooks=worker, slack=app)
    worker.close()

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

from .fake_slack import OTHER_APP_TOKEN, TOKEN, FakeSlack, fake_slack

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


def test_a_first_post_of_a_new_delivery_reads_no_history(slack: FakeSlack) -> None:
    authority, worker = sender(channel(slack.url))
    ask(authority, "apr_new")
    worker.deliver_due()
    assert post_row(authority, "apr_new").state == "done"  # type: ignore[attr-defined]
    assert len(slack.posted()) == 1 and slack.of("conversations.history") == []


def test_a_retried_post_that_slack_took_before_is_found_and_not_posted_again(
    slack: FakeSlack,
) -> None:
    from slack_sdk import WebClient

    authority, worker = sender(channel(slack.url))
    ask(authority, "apr_lost")
    slack.failures = 1
    worker.deliver_due()  # refused: retried
    row = post_row(authority, "apr_lost")
    assert row.attempts == 1  # type: ignore[attr-defined]
    # Slack took a post whose answer never came back (the sender timed out, or died).
    metadata = {
        "event_type": "aais_approval_requested",
        "event_payload": {"delivery_id": row.work_id, "request_id": "apr_lost"},  # type: ignore[attr-defined]
    }
    earlier = WebClient(token=TOKEN, base_url=slack.url).chat_postMessage(
        channel="C0OPS", text="the earlier post", metadata=metadata
    )
    worker.deliver_due()
    done = post_row(authority, "apr_lost")
    assert done.state == "done"  # type: ignore[attr-defined]
    assert done.result == f"C0OPS {earlier['ts']}"  # type: ignore[attr-defined]
    assert len(slack.posted()) == 1  # only the earlier one
    assert len(slack.of("conversations.history")) == 1


def test_a_retried_post_whose_history_cannot_be_read_is_posted_and_said_once(
    slack: FakeSlack, caplog: pytest.LogCaptureFixture
) -> None:
    authority, worker = sender(channel(slack.url))
    slack.history_error = "missing_scope"
    for request_id in ("apr_a", "apr_b"):
        ask(authority, request_id)
    slack.failures = 2
    with caplog.at_level("WARNING", logger="aais_langgraph.webhooks.worker"):
        worker.deliver_due()  # both refused
        worker.deliver_due()  # both retried: the history cannot be read, so they post
    assert {post_row(authority, r).state for r in ("apr_a", "apr_b")} == {"done"}  # type: ignore[attr-defined]
    assert len(slack.posted()) == 2
    said = [r.getMessage() for r in caplog.records if "history" in r.getMessage()]
    assert len(said) == 1 and "missing_scope" in said[0]


def test_a_message_of_another_app_with_the_posts_metadata_is_not_taken_for_it(
    slack: FakeSlack,
) -> None:
    from slack_sdk import WebClient

    authority, worker = sender(channel(slack.url))
    ask(authority, "apr_spoof")
    slack.failures = 1
    worker.deliver_due()  # refused: retried
    row = post_row(authority, "apr_spoof")
    metadata = {
        "event_type": "aais_approval_requested",
        "event_payload": {"delivery_id": row.work_id, "request_id": "apr_spoof"},  # type: ignore[attr-defined]
    }
    # Another app in the channel posts a message that claims to be the request's post.
    WebClient(token=OTHER_APP_TOKEN, base_url=slack.url).chat_postMessage(
        channel="C0OPS", text="not ours", metadata=metadata
    )
    worker.deliver_due()
    ours = [call for call in slack.posted() if call.body["bot_id"] == "B0AAIS"]
    assert len(ours) == 1 and len(slack.of("conversations.history")) == 1
    done = post_row(authority, "apr_spoof")
    assert done.result == f"C0OPS {ours[0].ts}"  # type: ignore[attr-defined]

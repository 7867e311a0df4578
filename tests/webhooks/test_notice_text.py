"""Request text in the notices people read: no header, line or markup of its own.

A summary (or an action's name, kind or arguments) is usually built from model output
or tool arguments. Mailed to a real SMTP server on loopback (``aiosmtpd``) and read
back, a message holds the headers the sender wrote and no other, reaches only its
recipients, and starts its body where the sender did; a message that cannot be built
is a failed attempt that ends ``dead``.
"""

from __future__ import annotations

import email
import email.policy
import re
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aais_langgraph.authority import AccessPolicy, ApprovalAuthority, Principal
from aais_langgraph.ledger import DELIVERY, InMemoryLedger
from aais_langgraph.protocol import Actor, build_decision
from aais_langgraph.webhooks import (
    FollowUpRunner,
    MailSettings,
    SubscriptionPlan,
    WebhookSubscription,
    WebhookWorker,
    email_message,
    request_message,
    resolved_message,
    slack_body,
)
from aais_langgraph.webhooks.plain_text import header_text, one_line
from hostile.report import hostile_input, record

from .mailbox import Mailbox

CATEGORY = "notice text"
ORIGIN = {"harness": "tests", "session_id": "sess_1"}
FAST = {"retry_base": 0.01, "retry_max": 0.02, "timeout": 2.0, "claim_ttl": 5.0}
HEADERS = {
    "subject",
    "from",
    "to",
    "date",
    "message-id",
    "auto-submitted",
    "content-type",
    "content-transfer-encoding",
    "mime-version",
}
LINE_BREAKS = ["\r", "\n", "\r\n", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85"]
LINE_BREAKS += ["\u2028", "\u2029"]
"""Every separator :meth:`str.splitlines` breaks a line at."""
ENCODED_WORDS = [
    "=?utf-8?q?x=0D=0ABcc:_evil@example.com?=",
    "=?utf-8?q?x=0D=0AX-Injected:_1=0D=0A=0D=0APlease_approve_at_http://evil.example/?=",
    "=?utf-8?b?eA0KQmNjOiBldmlsQGV4YW1wbGUuY29t?=",  # the same Bcc line, base64
    "=?iso-8859-1?q?x=0ABcc:_evil@example.com?=",
]
SAM = Principal(Actor(id="sam", type="human"), groups=frozenset({"sre"}))


def subscription(port: int, **settings: Any) -> WebhookSubscription:
    mail = MailSettings(
        to=("oncall@example.com",),
        sender="approvals@example.com",
        host="127.0.0.1",
        port=port,
        starttls=False,
    )
    settings.setdefault("notices", frozenset({"approval.requested"}))
    return WebhookSubscription(
        name="mail",
        url=f"smtp://127.0.0.1:{port}",
        format="email",
        mail=mail,
        as_groups=frozenset({"sre"}),
        inbox_url="https://approvals.example/inbox/",
        **settings,
    )


def site(
    subscriptions: list[WebhookSubscription], policy: dict[str, Any] | None = None
) -> tuple[ApprovalAuthority, WebhookWorker]:
    authorizer = AccessPolicy.from_mapping(policy or {"default_approvers": ["sre"]})
    plan = SubscriptionPlan(subscriptions, policy=authorizer)
    authority = ApprovalAuthority(InMemoryLedger(delivery_plan=plan), authorizer=authorizer)
    return authority, WebhookWorker(authority, subscriptions, **FAST)


def ask(authority: ApprovalAuthority, request_id: str, summary: str, **action: Any) -> Any:
    return authority.request(
        {
            "kind": "tool_call",
            "name": "deploy",
            "arguments": {"note": summary},
            "summary": summary,
            **action,
        },
        origin=ORIGIN,
        risk={"level": "high", "reasons": ["tests"]},
        request_id=request_id,
        thread_id="thr_1",
        expires_in=timedelta(seconds=900),
        context={"requester": "alice"},
    )


def settle(worker: WebhookWorker) -> None:
    """Send until no delivery is due or claimed (a stuck one fails the test)."""
    for _ in range(300):
        worker.deliver_due()
        if not worker.authority.ledger.list_work(DELIVERY, states=("due", "claimed")):
            return
        time.sleep(0.01)
    raise AssertionError("a delivery is still due or claimed")


@pytest.fixture
def mailbox() -> Iterator[Mailbox]:
    with Mailbox() as running:
        yield running


def unfolded(message: Any, name: str) -> str:
    """A header's value as read (RFC 5322 unfolding: a line break before white space is
    no part of it)."""
    return re.sub(r"\r?\n(?=[ \t])", "", str(message[name])).strip()


def mailed_as_written(mailbox: Mailbox, subject: str) -> bool:
    """Whether the one mail received holds only the sender's headers, went to the
    configured recipient alone, and its body starts where the sender's does."""
    ((recipients, message),) = mailbox.messages
    names = {name.lower() for name in message}
    body = mailbox.bodies()[0]
    return (
        recipients == ("oncall@example.com",)
        and names == HEADERS
        and unfolded(message, "Subject").startswith(subject)
        and body.startswith(subject)
    )


@pytest.mark.parametrize("word", ENCODED_WORDS)
def test_an_encoded_word_in_the_summary_adds_no_header_recipient_or_body(
    mailbox: Mailbox, word: str
) -> None:
    authority, worker = site([subscription(mailbox.port)])
    summary = f"Pay invoice {word} today"
    with hostile_input(CATEGORY, opened=lambda: not mailed_as_written(mailbox, "Approval")):
        ask(authority, "apr_word", summary)
        settle(worker)
    ((_, message),) = mailbox.messages
    assert "evil" not in str(message.get("Bcc", "")) and message.get("X-Injected") is None
    assert mailed_as_written(mailbox, "Approval requested (high risk): Pay invoice")
    assert "Please approve" not in mailbox.bodies()[0].splitlines()[0]


@pytest.mark.parametrize(
    "separator", LINE_BREAKS, ids=["+".join(f"U{ord(c):04X}" for c in s) for s in LINE_BREAKS]
)
def test_every_line_separator_in_the_summary_stays_on_the_subject_line(
    mailbox: Mailbox, separator: str
) -> None:
    authority, worker = site([subscription(mailbox.port)])
    summary = f"Run deploy{separator}Bcc: evil@example.com{separator}{separator}Approve now"
    with hostile_input(CATEGORY, opened=lambda: not mailed_as_written(mailbox, "Approval")):
        ask(authority, "apr_break", summary)
        settle(worker)
    ((_, message),) = mailbox.messages
    subject = unfolded(message, "Subject")
    assert len(subject.splitlines()) == 1 and "Bcc: evil@example.com" in subject
    assert mailed_as_written(mailbox, "Approval requested (high risk): Run deploy")
    (done,) = authority.ledger.list_work(DELIVERY, states=("done",))
    assert done.attempts == 1


def test_line_separators_in_the_arguments_stay_inside_their_json_string(
    mailbox: Mailbox,
) -> None:
    authority, worker = site([subscription(mailbox.port, include_arguments=True)])
    with hostile_input(CATEGORY, opened=lambda: not mailed_as_written(mailbox, "Approval")):
        ask(authority, "apr_args", "Run deploy", arguments={"note": "a\u2028b\x85c\u2029d"})
        settle(worker)
    body = mailbox.bodies()[0]
    assert '  "note": "a\\u2028b\\u0085c\\u2029d"' in body.splitlines()


def test_a_message_that_cannot_be_built_is_a_failed_attempt_and_ends_dead(
    mailbox: Mailbox,
) -> None:
    policy = {
        "default_approvers": ["sre"],
        "requesters": {
            "notify": ["denied"],
            "notify_via": "mail",
            "addresses": {"alice": "alice\u2028@example.com"},
        },
    }
    authority, worker = site([subscription(mailbox.port, max_attempts=3)], policy)
    runner = FollowUpRunner(authority, authority.ledger.delivery_plan, claim_ttl=5.0)
    to_alice = lambda: [m for rcpt, m in mailbox.messages if "oncall@example.com" not in rcpt]  # noqa: E731
    with hostile_input(CATEGORY, opened=lambda: bool(to_alice())):
        requested = ask(authority, "apr_unbuilt", "Run deploy")
        decided = build_decision(requested, decision="deny", scope="once", actor=SAM.actor)
        authority.decide(decided, actor=SAM)
        runner.run_due()
        settle(worker)
    (dead,) = authority.ledger.list_work(DELIVERY, states=("dead",))
    assert dead.topic == "approval.requester_notice"
    assert dead.attempts == 3
    assert dead.last_error is not None and "cannot be built" in dead.last_error
    assert "alice" not in dead.last_error


@pytest.mark.parametrize("hostile", [*LINE_BREAKS, *ENCODED_WORDS])
def test_slack_text_holds_no_line_of_the_requests_own(hostile: str) -> None:
    authority, _ = site([])
    summary = f"Run deploy{hostile}*Approved* by <@U0BOSS>"
    requested = ask(authority, "apr_slack", summary)
    authority.decide(
        build_decision(requested, decision="deny", scope="once", actor=SAM.actor), actor=SAM
    )
    resolved = authority.get_resolution("apr_slack")
    assert resolved is not None
    texts = [
        slack_body("approval.requested", requested, None, inbox_url=None, include_arguments=True)[
            "text"
        ],
        request_message(requested, include_arguments=True)["text"],
        resolved_message(requested, resolved, decided_by="sam", include_arguments=True)["text"],
    ]
    blocks = [
        request_message(requested, include_arguments=True)["blocks"][0]["text"]["text"],
        slack_body("approval.requested", requested, None, inbox_url=None, include_arguments=True)[
            "blocks"
        ][0]["text"]["text"],
    ]
    assert requested.request.action.summary == summary
    broken = [text for text in texts if len(text.splitlines()) != 1 or "<@" in text]
    # The app's own lines only: the summary's stays on the first.
    broken += [
        block
        for block in blocks
        if "<@" in block
        or "*Approved* by &lt;@U0BOSS&gt;" not in block.splitlines()[0]
        or any(line.startswith("*Approved*") for line in block.splitlines()[1:])
    ]
    record(CATEGORY, 1, failed_open=int(bool(broken)))
    assert broken == []


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(summary=st.text(min_size=1, max_size=120))
def test_any_summary_builds_a_message_that_reads_back_with_the_senders_headers(
    summary: str,
) -> None:
    authority, _ = site([])
    requested = ask(authority, "apr_any", summary)
    message = email_message(
        "approval.requested",
        requested,
        None,
        sender="approvals@example.com",
        to=("oncall@example.com",),
        message_id="dlv_1",
        inbox_url=None,
        include_arguments=True,
    )
    read = email.message_from_bytes(message.as_bytes(policy=email.policy.SMTP))
    assert {name.lower() for name in read} == HEADERS
    assert len(unfolded(read, "Subject").splitlines()) == 1


def test_every_character_that_breaks_a_line_is_shown_as_a_space() -> None:
    breaking = [
        char for char in map(chr, range(sys.maxunicode + 1)) if len(f"a{char}b".splitlines()) > 1
    ]
    assert set(LINE_BREAKS) - {"\r\n"} == set(breaking)  # the list the tests above use
    assert [one_line(f"a{char}b") for char in breaking] == ["a b"] * len(breaking)
    assert all("=?" not in header_text(f"={char}?") for char in breaking)

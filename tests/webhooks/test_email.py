"""Email notices by SMTP, received by a real server on loopback (aiosmtpd)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from aais_langgraph.authority import AccessPolicy, ApprovalAuthority
from aais_langgraph.ledger import DELIVERY, InMemoryLedger
from aais_langgraph.webhooks import (
    MailSettings,
    SubscriptionPlan,
    WebhookSubscription,
    WebhookWorker,
    load_webhooks,
)
from aais_langgraph.webhooks.mail import inbox_link

from .mailbox import Mailbox

ORIGIN = {"harness": "tests", "session_id": "sess_1"}
HIDDEN = "s3cr3t-payroll-path"
FAST = {"retry_base": 0.01, "retry_max": 0.05, "timeout": 2.0, "claim_ttl": 5.0}
POLICY = AccessPolicy.from_mapping(
    {
        "default_approvers": ["sre"],
        "approvers": [{"names": ["payroll*"], "groups": ["finance"]}],
    }
)


def subscription(port: int, **settings: Any) -> WebhookSubscription:
    mail = MailSettings(
        to=("oncall@example.com",),
        sender="approvals@example.com",
        host="127.0.0.1",
        port=port,
        starttls=False,
        username=settings.pop("username", None),
        password=settings.pop("password", None),
    )
    settings.setdefault("as_groups", frozenset({"sre"}))
    settings.setdefault("notices", frozenset({"approval.requested", "approval.resolved"}))
    return WebhookSubscription(
        name="mail",
        url=f"smtp://127.0.0.1:{port}",
        format="email",
        mail=mail,
        inbox_url="https://approvals.example/inbox/",
        **settings,
    )


def site(subscriptions: list[WebhookSubscription]) -> tuple[ApprovalAuthority, WebhookWorker]:
    ledger = InMemoryLedger(delivery_plan=SubscriptionPlan(subscriptions))
    authority = ApprovalAuthority(ledger, authorizer=POLICY)
    return authority, WebhookWorker(authority, subscriptions, **FAST)


def ask(authority: ApprovalAuthority, request_id: str, name: str = "deploy") -> Any:
    return authority.request(
        {
            "kind": "tool_call",
            "name": name,
            "arguments": {"path": f"/srv/{HIDDEN}"},
            "summary": f"Run {name}\nnow",
        },
        origin=ORIGIN,
        risk={"level": "high", "reasons": ["tests"]},
        request_id=request_id,
        thread_id="thr_1",
        expires_in=timedelta(seconds=900),
    )


def drain(worker: WebhookWorker) -> None:
    import time

    for _ in range(200):
        worker.deliver_due()
        if not worker.authority.ledger.list_work(DELIVERY, states=("due", "claimed")):
            return
        time.sleep(0.01)
    raise AssertionError("deliveries still pending")


@pytest.fixture
def mailbox() -> Iterator[Mailbox]:
    with Mailbox() as running:
        yield running


def test_the_mail_shows_summary_risk_and_a_card_link_without_arguments(mailbox: Mailbox) -> None:
    authority, worker = site([subscription(mailbox.port)])
    ask(authority, "apr_mail")
    drain(worker)
    ((recipients, message),) = mailbox.messages
    assert recipients == ("oncall@example.com",)
    assert message["Subject"] == "Approval requested (high risk): Run deploy now"
    assert message["From"] == "approvals@example.com"
    assert message["Auto-Submitted"] == "auto-generated"
    body = mailbox.bodies()[0]
    assert "Action: tool_call deploy" in body and "Risk: high" in body
    assert "https://approvals.example/inbox/#request=apr_mail" in body
    assert HIDDEN not in body and HIDDEN not in message.as_string()
    # Nothing in it decides: the only link opens the card.
    assert body.count("https://") == 1


def test_the_mail_shows_arguments_only_when_the_subscription_allows(mailbox: Mailbox) -> None:
    authority, worker = site([subscription(mailbox.port, include_arguments=True)])
    ask(authority, "apr_args")
    drain(worker)
    assert HIDDEN in mailbox.bodies()[0]


def test_a_request_the_principal_may_not_view_is_not_mailed(mailbox: Mailbox) -> None:
    authority, worker = site([subscription(mailbox.port)])
    ask(authority, "apr_payroll", name="payroll-export")  # finance decides, sre may not view
    drain(worker)
    assert mailbox.messages == []
    (skipped,) = authority.ledger.list_work(DELIVERY, states=("skipped",))
    assert skipped.request_id == "apr_payroll"


def test_the_resolution_is_mailed_with_its_outcome(mailbox: Mailbox) -> None:
    from aais_langgraph.authority import Principal
    from aais_langgraph.protocol import Actor, build_decision

    authority, worker = site([subscription(mailbox.port)])
    requested = ask(authority, "apr_out")
    sam = Principal(Actor(id="sam", type="human"), groups=frozenset({"sre"}))
    authority.decide(
        build_decision(requested, decision="deny", scope="once", actor=sam.actor), actor=sam
    )
    drain(worker)
    subjects = sorted(str(message["Subject"]) for _, message in mailbox.messages)
    assert subjects == [
        "Approval denied (high risk): Run deploy now",
        "Approval requested (high risk): Run deploy now",
    ]


def test_a_refused_mail_is_retried_with_the_same_message_id() -> None:
    with Mailbox(refuse_first=1) as mailbox:
        authority, worker = site([subscription(mailbox.port)])
        ask(authority, "apr_retry")
        drain(worker)
        ((_, message),) = mailbox.messages
    (delivery,) = authority.ledger.list_work(DELIVERY, states=("done",))
    assert delivery.attempts == 2
    assert message["Message-ID"] == f"<{delivery.work_id}@example.com>"


def test_a_server_that_is_down_leaves_the_mail_pending_then_dead() -> None:
    from .receivers import free_port

    authority, worker = site([subscription(free_port(), max_attempts=2)])
    ask(authority, "apr_down")
    drain(worker)
    (dead,) = authority.ledger.list_work(DELIVERY, states=("dead",))
    assert dead.last_error == "ConnectionRefusedError"


@pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS")
def test_the_sender_logs_in_with_the_configured_user() -> None:
    with Mailbox(login=("mailer", "pw-123")) as mailbox:
        authority, worker = site([subscription(mailbox.port, username="mailer", password="pw-123")])
        ask(authority, "apr_login")
        drain(worker)
        assert len(mailbox.messages) == 1 and mailbox.logins == ["mailer"]


def test_an_email_subscription_loads_from_the_policy_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(
        "[[webhooks]]\n"
        'name = "mail"\nformat = "email"\nto = ["oncall@example.com"]\n'
        'from = "approvals@example.com"\nsmtp_host = "smtp.example.com"\n'
        'username_env = "SMTP_USER"\npassword_env = "SMTP_PASSWORD"\n'
    )
    monkeypatch.setenv("SMTP_USER", "mailer")
    monkeypatch.setenv("SMTP_PASSWORD", "pw-secret-123")
    (loaded,) = load_webhooks(policy)
    assert loaded.mail is not None
    assert (loaded.mail.host, loaded.mail.port, loaded.mail.starttls) == (
        "smtp.example.com",
        587,
        True,
    )
    assert loaded.url == "smtp://smtp.example.com:587"
    assert "pw-secret-123" not in repr(loaded)


@pytest.mark.parametrize(
    ("table", "named"),
    [
        ('to = "a@example.com"', "to"),
        ('to = ["not-an-address"]', "to"),
        ('to = ["a@example.com"]\nurl = "https://x"', "url"),
        ('to = ["a@example.com"]\nsmtp_port = 0', "smtp_port"),
        ('to = ["a@example.com"]\nstarttls = "yes"', "starttls"),
        ('to = ["a@example.com"]\nusername_env = "SMTP_USER"', "password_env"),
        ('to = ["a@example.com"]\npassword_env = "UNSET_PASSWORD"', "password_env"),
    ],
)
def test_a_bad_email_setting_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, table: str, named: str
) -> None:
    monkeypatch.setenv("SMTP_USER", "mailer")
    monkeypatch.delenv("UNSET_PASSWORD", raising=False)
    policy = tmp_path / "policy.toml"
    policy.write_text(
        '[[webhooks]]\nname = "mail"\nformat = "email"\nfrom = "approvals@example.com"\n'
        f'smtp_host = "smtp.example.com"\n{table}\n'
    )
    with pytest.raises(ValueError, match=named) as raised:
        load_webhooks(policy)
    assert "mailer" not in str(raised.value)


def test_smtp_settings_only_belong_to_an_email_subscription(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(
        '[[webhooks]]\nname = "a"\nurl = "https://x"\nformat = "slack"\nsmtp_host = "h"\n'
    )
    with pytest.raises(ValueError, match="smtp_host"):
        load_webhooks(policy)


def test_the_inbox_link_names_the_request_in_the_fragment() -> None:
    assert inbox_link("https://a.example/inbox/#old", "apr_1") == (
        "https://a.example/inbox/#request=apr_1"
    )

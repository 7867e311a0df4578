"""docs/reaching-people.md's policy-file blocks, read as written and run against a real
SMTP server on loopback (only the SMTP host and port are replaced by the server's)."""

from __future__ import annotations

import re
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from aais_langgraph.authority import AccessPolicy, ApprovalAuthority, Principal
from aais_langgraph.ledger import InMemoryLedger
from aais_langgraph.protocol import Actor, build_decision
from aais_langgraph.webhooks import (
    FollowUpRunner,
    SubscriptionPlan,
    WebhookWorker,
    webhooks_from_mapping,
)

from .mailbox import Mailbox
from .test_follow_ups import START, Clock

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reaching-people.md"
ENV = {"SMTP_USER": "mailer", "SMTP_PASSWORD": "pw"}


def toml_blocks(section: str) -> list[str]:
    """The ``toml`` blocks of one ``##`` section of the page, in order."""
    text = PAGE.read_text(encoding="utf-8")
    body = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```toml\n(.*?)```", body, flags=re.S)


def on_mailbox(text: str, port: int) -> dict[str, Any]:
    document = tomllib.loads(text.replace('"smtp.example.com"', '"127.0.0.1"'))
    for table in document.get("webhooks", []):
        table.update(smtp_port=port, starttls=False)
        table.pop("username_env", None)
        table.pop("password_env", None)
    return document


def test_the_email_block_loads_as_written() -> None:
    (block,) = toml_blocks("Email")
    document = tomllib.loads(block)
    AccessPolicy.from_mapping(document)
    (mail,) = webhooks_from_mapping(document, environ=ENV)
    assert mail.format == "email" and mail.mail is not None
    assert mail.mail.username == "mailer" and not mail.include_arguments


def test_the_follow_up_block_reminds_escalates_and_tells_the_requester() -> None:
    (block,) = toml_blocks("Reminders, escalation and notices")
    with Mailbox() as mailbox:
        document = on_mailbox(block, mailbox.port)
        policy = AccessPolicy.from_mapping(document)
        subscriptions = webhooks_from_mapping(document, environ=ENV)
        plan = SubscriptionPlan(subscriptions, policy=policy)
        clock = Clock()
        authority = ApprovalAuthority(
            InMemoryLedger(delivery_plan=plan), authorizer=policy, clock=clock
        )
        runner = FollowUpRunner(authority, plan)
        worker = WebhookWorker(
            authority, subscriptions, clock=lambda: clock().timestamp(), timeout=2.0
        )

        def at(seconds: float) -> list[str]:
            clock.now = START + timedelta(seconds=seconds)
            runner.run_due()
            worker.deliver_due()
            return [str(message["Subject"]) for _, message in mailbox.messages]

        requested = authority.request(
            {"kind": "tool_call", "name": "deploy-api", "summary": "Deploy", "arguments": {}},
            origin={"harness": "tests", "session_id": "s-1"},
            request_id="apr_page",
            thread_id="t-1",
            expires_in=timedelta(hours=3),
            context={"requester": "alice"},
        )
        assert at(599) == []
        assert at(600) == ["Reminder: approval waiting (medium risk): Deploy"]
        manager = Principal(Actor(id="mia", type="human"), groups=frozenset({"managers"}))
        assert not authority.access.may_view(manager, "apr_page")
        at(3600)
        assert authority.access.may_view(manager, "apr_page")
        decided = build_decision(requested, decision="deny", scope="once", actor=manager.actor)
        authority.decide(decided, actor=manager)
        subjects = at(3601)
        assert subjects.count("Reminder: approval waiting (medium risk): Deploy") == 2
        assert mailbox.messages[-1][0] == ("alice@example.com",)
        assert subjects[-1] == "Your approval request was denied: Deploy"

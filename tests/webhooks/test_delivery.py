"""Signed webhooks against real receivers: verified, retried, dead-lettered, filtered, coalesced."""

from __future__ import annotations

import io
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import aais
import pytest

from aais_langgraph.authority import (
    AccessPolicy,
    ApprovalAuthority,
    CedarAuthorizer,
    Permission,
    Principal,
    Resource,
    Verb,
)
from aais_langgraph.cli import main as cli_main
from aais_langgraph.ledger import DELIVERY, InMemoryLedger, Ledger, SqliteLedger, shown_states
from aais_langgraph.ledger.deliveries import Delivery
from aais_langgraph.protocol import build_decision
from aais_langgraph.webhooks import (
    SubscriptionPlan,
    WebhookSubscription,
    WebhookWorker,
    load_webhooks,
)

from .receivers import SECRET, Receiver, free_port

ORIGIN = {"harness": "tests", "session_id": "sess_1"}
FAST = {"retry_base": 0.01, "retry_max": 0.05, "timeout": 0.5, "claim_ttl": 5.0}


def subscription(url: str, **settings: Any) -> WebhookSubscription:
    return WebhookSubscription(name=settings.pop("name", "ops"), url=url, secret=SECRET, **settings)


def served(
    ledger: Ledger | None, subscriptions: list[WebhookSubscription], **options: Any
) -> tuple[ApprovalAuthority, WebhookWorker]:
    """A sender for ``subscriptions`` and an authority on ``ledger``, opened with their plan
    (None: a new in-memory ledger)."""
    authorizer = options.pop("authorizer", None)
    if ledger is None:
        ledger = InMemoryLedger(delivery_plan=SubscriptionPlan(subscriptions))
    assert ledger.delivery_plan is not None
    authority = ApprovalAuthority(ledger, authorizer=authorizer)
    return authority, WebhookWorker(authority, subscriptions, **{**FAST, **options})


def ask(
    authority: ApprovalAuthority,
    request_id: str,
    *,
    thread_id: str = "thr_1",
    name: str = "shell",
    risk: str = "medium",
    expires_in: float = 900.0,
    summary: str | None = None,
) -> Any:
    action = {"kind": "tool_call", "name": name, "arguments": {"path": "/srv/payroll"}}
    return authority.request(
        {**action, "summary": summary or f"Run {name}"},
        origin=ORIGIN,
        risk={"level": risk, "reasons": ["tests"]},
        request_id=request_id,
        thread_id=thread_id,
        expires_in=timedelta(seconds=expires_in),
    )


def approve(authority: ApprovalAuthority, requested: Any) -> None:
    decided = build_decision(
        requested, decision="approve", scope="once", actor={"id": "user_alex", "type": "human"}
    )
    authority.decide(decided)


def drain(worker: WebhookWorker, *, passes: int = 200) -> list[Delivery]:
    """Run passes until nothing is pending (bounded: a test that never settles fails)."""
    import time

    settled: list[Delivery] = []
    for _ in range(passes):
        settled.extend(worker.deliver_due())
        if not worker.authority.ledger.list_work(
            DELIVERY, states=shown_states(DELIVERY, ("pending",))
        ):
            return settled
        time.sleep(0.01)
    raise AssertionError("deliveries still pending")


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as running:
        yield running


def test_a_receiver_verifies_the_signed_aais_envelope(receiver: Receiver) -> None:
    notices = frozenset({"approval.requested", "approval.resolved"})
    authority, worker = served(None, [subscription(receiver.url, notices=notices)])
    requested = ask(authority, "apr_1")
    approve(authority, requested)
    drain(worker)

    # Deliveries are sent concurrently: the envelope's sequence orders them.
    bodies = sorted(receiver.bodies.values(), key=lambda body: body["data"]["sequence"])
    assert [body["type"] for body in bodies] == ["approval.requested", "approval.resolved"]
    for body in bodies:
        aais.validate(body["data"])
    assert bodies[0]["data"]["request"]["id"] == "apr_1"
    assert bodies[1]["data"]["resolution"]["outcome"] == "approved"
    assert receiver.rejected == receiver.cut_short == receiver.duplicates == 0
    assert all(h["webhook-signature"].startswith("v1,") for h in receiver.headers)


def test_a_receiver_with_another_secret_rejects_the_signature() -> None:
    with Receiver(secret="whsec_" + "QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFB") as other:
        notices = frozenset({"approval.requested"})
        sub = subscription(other.url, max_attempts=1, notices=notices)
        authority, worker = served(None, [sub])
        ask(authority, "apr_1")
        drain(worker)
        assert other.rejected >= 1 and other.bodies == {}
    dead = worker.authority.ledger.list_work(DELIVERY, states=shown_states(DELIVERY, ("dead",)))
    assert {d.last_error for d in dead} == {"HTTP 400"}


def test_a_receiver_that_answers_500_gets_it_once_it_recovers() -> None:
    with Receiver(fail_first=3) as flaky:
        notices = frozenset({"approval.requested"})
        authority, worker = served(None, [subscription(flaky.url, notices=notices)])
        ask(authority, "apr_1")
        settled = drain(worker)
        assert [d.shown_state for d in settled] == ["pending"] * 3 + ["delivered"]
        assert settled[-1].attempts == 4 and settled[0].last_error == "HTTP 500"
        assert len(flaky.bodies) == 1 and flaky.duplicates == 0


def test_a_delivery_sent_once_is_listed_with_one_attempt(
    receiver: Receiver, tmp_path: Path
) -> None:
    db = tmp_path / "ledger.db"
    notices = frozenset({"approval.requested"})
    subs = [subscription(receiver.url, notices=notices)]
    with SqliteLedger.from_conn_string(db, delivery_plan=SubscriptionPlan(subs)) as ledger:
        authority, worker = served(ledger, subs)
        ask(authority, "apr_1")
        [delivered] = drain(worker)
        assert (delivered.shown_state, delivered.attempts) == ("delivered", 1)
        out = io.StringIO()
        assert (
            cli_main(["webhooks", "list", "--state", "delivered", "--db", str(db)], stdout=out) == 0
        )
        [line, total] = out.getvalue().splitlines()
        assert line.endswith("delivered  attempts 1") and total == "1 deliveries, 0 dead"
    assert len(receiver.bodies) == 1


def test_a_receiver_that_is_down_gets_it_when_it_comes_back() -> None:
    down = Receiver(port=free_port(), start=False)
    notices = frozenset({"approval.requested"})
    authority, worker = served(None, [subscription(down.url, notices=notices)])
    ask(authority, "apr_1")
    first = worker.deliver_due()
    assert [(d.shown_state, d.last_error) for d in first] == [("pending", "ConnectError")]
    down.start()
    try:
        drain(worker)
        assert len(down.bodies) == 1
    finally:
        down.stop()


def test_a_slow_receiver_gets_it_again_with_the_same_webhook_id() -> None:
    with Receiver(slow_first=1, slow_seconds=0.8) as slow:
        notices = frozenset({"approval.requested"})
        sub = subscription(slow.url, notices=notices)
        authority, worker = served(None, [sub], timeout=0.2)
        ask(authority, "apr_1")
        settled = drain(worker)
        assert settled[0].last_error == "ReadTimeout"
        import time

        for _ in range(200):  # the first POST is still being answered
            if slow.duplicates:
                break
            time.sleep(0.01)
        assert len(slow.bodies) == 1 and slow.duplicates == 1


def test_after_max_attempts_it_is_dead_and_the_cli_lists_and_retries_it(tmp_path: Path) -> None:
    port = free_port()
    db = tmp_path / "ledger.db"
    notices = frozenset({"approval.requested"})
    sub = subscription(f"http://127.0.0.1:{port}/hook", notices=notices, max_attempts=2)
    with SqliteLedger.from_conn_string(db, delivery_plan=SubscriptionPlan([sub])) as ledger:
        authority, worker = served(ledger, [sub])
        ask(authority, "apr_1")
        drain(worker)
        [dead] = ledger.list_work(DELIVERY, states=shown_states(DELIVERY, ("dead",)))
        assert (dead.attempts, dead.last_error) == (2, "ConnectError")

        out = io.StringIO()
        assert cli_main(["--db", str(db), "webhooks", "list"], stdout=out) == 0
        assert dead.work_id in out.getvalue() and "1 deliveries, 1 dead" in out.getvalue()
        assert str(port) not in out.getvalue()  # the receiver's URL is never shown

        with Receiver(port=port) as back:
            out = io.StringIO()
            assert cli_main(["--db", str(db), "webhooks", "retry", dead.work_id], stdout=out) == 0
            drain(worker)
            assert list(back.bodies) == [dead.work_id]
        again = io.StringIO()
        assert cli_main(["--db", str(db), "webhooks", "retry", dead.work_id], stdout=again) == 1


def test_the_subscriber_is_told_only_what_its_principal_may_view(receiver: Receiver) -> None:
    policy = AccessPolicy.from_mapping(
        {"default_approvers": ["ops"], "approvers": [{"names": ["deploy*"], "groups": ["sre"]}]}
    )
    notices = frozenset({"approval.requested"})
    subs = [
        subscription(receiver.url, name="sre", as_groups=frozenset({"sre"}), notices=notices),
        subscription(receiver.url, name="ops", as_groups=frozenset({"ops"}), notices=notices),
    ]
    authority, worker = served(None, subs, authorizer=policy)
    ask(authority, "apr_deploy", name="deploy_prod")
    ask(authority, "apr_shell", name="shell", thread_id="thr_2")
    drain(worker)

    told = {(d.target, d.request_id): d.shown_state for d in _every(authority.ledger)}
    assert told == {
        ("sre", "apr_deploy"): "delivered",
        ("sre", "apr_shell"): "skipped",
        ("ops", "apr_deploy"): "skipped",
        ("ops", "apr_shell"): "delivered",
    }
    assert len(receiver.bodies) == 2


def test_a_notice_its_principal_may_not_view_is_logged_once_without_values(
    receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    policy = AccessPolicy.from_mapping({"default_approvers": ["sre"]})
    notices = frozenset({"approval.requested"})
    subs = [subscription(receiver.url, name="ops", as_groups=frozenset({"ops"}), notices=notices)]
    authority, worker = served(None, subs, authorizer=policy)
    for number in range(3):
        ask(authority, f"apr_{number}", thread_id=f"thr_{number}", summary="Wipe /srv/payroll")
    with caplog.at_level("INFO", logger="aais_langgraph.webhooks"):
        drain(worker)
    assert {d.state for d in _every(authority.ledger)} == {"skipped"}
    assert receiver.bodies == {}
    said = [r for r in caplog.records if "may not view" in r.getMessage()]
    assert len(said) == 1 and said[0].levelname == "WARNING"
    text = said[0].getMessage()
    assert "'ops'" in text and "webhooks list --state skipped" in text
    assert "payroll" not in text and "apr_" not in text and "Wipe" not in text


def test_a_group_filter_keeps_the_requests_the_group_decides(receiver: Receiver) -> None:
    policy = AccessPolicy.from_mapping(
        {
            "viewer_groups": ["bots"],
            "default_approvers": ["ops"],
            "approvers": [{"risk": ["high"], "groups": ["sre"]}],
        }
    )
    sub = subscription(
        receiver.url,
        groups=frozenset({"sre"}),
        as_groups=frozenset({"bots"}),
        notices=frozenset({"approval.requested"}),
    )
    authority, worker = served(None, [sub], authorizer=policy)
    ask(authority, "apr_high", risk="high")
    ask(authority, "apr_low", risk="low", thread_id="thr_2")
    drain(worker)
    assert [body["data"]["request"]["id"] for body in receiver.bodies.values()] == ["apr_high"]


def test_a_group_filter_under_cedar_keeps_the_requests_the_group_decides(
    receiver: Receiver,
) -> None:
    policy = CedarAuthorizer(
        'permit (principal in Group::"bots", action == Action::"view", resource);\n'
        'permit (principal in Group::"sre", action == Action::"decide", resource)'
        " when { resource.risk_rank >= 2 };"
    )
    sub = subscription(
        receiver.url,
        groups=frozenset({"sre"}),
        as_groups=frozenset({"bots"}),
        notices=frozenset({"approval.requested"}),
    )
    authority, worker = served(None, [sub], authorizer=policy)
    ask(authority, "apr_high", risk="high")
    ask(authority, "apr_low", risk="low", thread_id="thr_2")
    drain(worker)
    assert [body["data"]["request"]["id"] for body in receiver.bodies.values()] == ["apr_high"]


def test_a_group_filter_skips_what_an_authorizer_without_group_answers_cannot_say(
    receiver: Receiver,
) -> None:
    class PeopleOnly:
        def authorize(self, principal: Principal, verb: Verb, resource: Resource) -> Permission:
            return Permission(verb == "view")

    sub = subscription(
        receiver.url, groups=frozenset({"sre"}), notices=frozenset({"approval.requested"})
    )
    authority, worker = served(None, [sub], authorizer=PeopleOnly())
    ask(authority, "apr_1")
    drain(worker)
    [skipped] = _every(authority.ledger)
    assert skipped.state == "skipped" and receiver.bodies == {}
    assert skipped.last_error == "the authorizer cannot say which groups decide the request"


def test_a_coalescing_subscription_sends_one_notice_per_thread(receiver: Receiver) -> None:
    sub = subscription(receiver.url, coalesce=True, notices=frozenset({"approval.requested"}))
    authority, worker = served(None, [sub])
    for index in range(5):
        ask(authority, f"apr_{index}")
    ask(authority, "apr_other", thread_id="thr_2")
    drain(worker)
    ids = sorted(body["data"]["request"]["id"] for body in receiver.bodies.values())
    assert ids == ["apr_4", "apr_other"]


def test_an_expiry_notice_goes_out_before_expiry_unless_resolved(receiver: Receiver) -> None:
    sub = subscription(
        receiver.url, notices=frozenset({"approval.expiring"}), expiring_before=3600.0
    )
    authority, worker = served(None, [sub])
    ask(authority, "apr_soon", expires_in=600.0)
    ask(authority, "apr_later", expires_in=7200.0, thread_id="thr_2")
    answered = ask(authority, "apr_answered", expires_in=600.0, thread_id="thr_3")
    approve(authority, answered)
    drain_due_only(worker)

    assert [body["type"] for body in receiver.bodies.values()] == ["approval.expiring"]
    assert [b["data"]["request"]["id"] for b in receiver.bodies.values()] == ["apr_soon"]
    states = {d.request_id: d.shown_state for d in _every(authority.ledger)}
    assert states == {"apr_soon": "delivered", "apr_later": "pending", "apr_answered": "skipped"}


def test_the_slack_format_shows_summary_risk_and_link_without_arguments() -> None:
    with Receiver(verify=False) as slack:
        sub = WebhookSubscription(
            name="slack",
            url=slack.url,
            format="slack",
            inbox_url="https://approvals.example/",
            notices=frozenset({"approval.requested"}),
        )
        authority, worker = served(None, [sub])
        ask(authority, "apr_1", name="deploy", risk="high", summary="Run deploy<prod>")
        drain(worker)
        [message] = slack.bodies.values()
    text = message["blocks"][0]["text"]["text"]
    assert message["text"] == "Approval requested (high risk): Run deploy&lt;prod&gt;"
    assert "<https://approvals.example/|Open the approval inbox>" in text
    assert "payroll" not in text and "path" not in text


def test_the_slack_format_shows_arguments_when_allowed() -> None:
    with Receiver(verify=False) as slack:
        sub = WebhookSubscription(
            name="slack", url=slack.url, format="slack", include_arguments=True
        )
        authority, worker = served(None, [sub])
        ask(authority, "apr_1")
        drain_due_only(worker)
        [message] = slack.bodies.values()
    assert '{"path": "/srv/payroll"}' in message["blocks"][0]["text"]["text"]


def test_two_senders_on_one_ledger_send_each_notice_once(
    tmp_path: Path, receiver: Receiver
) -> None:
    db = tmp_path / "ledger.db"
    subs = [subscription(receiver.url, notices=frozenset({"approval.requested"}))]
    with (
        SqliteLedger.from_conn_string(db, delivery_plan=SubscriptionPlan(subs)) as first,
        SqliteLedger.from_conn_string(db, delivery_plan=SubscriptionPlan(subs)) as second,
    ):
        authority, one = served(first, subs)
        _, two = served(second, subs)
        for index in range(30):
            ask(authority, f"apr_{index}", thread_id=f"thr_{index}")
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(2) as pool:
            list(pool.map(drain, [one, two]))
    assert len(receiver.bodies) == 30 and receiver.duplicates == 0


def test_subscriptions_load_from_the_access_policy_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(
        'default_approvers = ["ops"]\n\n'
        "[[webhooks]]\n"
        'name = "ops"\nurl = "https://ops.example/hook"\nsecret_env = "OPS_SECRET"\n'
        'risk = ["high"]\ncoalesce = true\n'
    )
    monkeypatch.setenv("OPS_SECRET", SECRET)
    from aais_langgraph.authority import load_access_policy

    load_access_policy(policy)  # the policy itself still loads
    [loaded] = load_webhooks(policy)
    assert (loaded.name, loaded.coalesce, loaded.actions.risks) == ("ops", True, {"high"})
    assert loaded.secret == SECRET and SECRET not in repr(loaded)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('name = "a"\nurl = "https://x"\nsecret_env = "OPS_SECRET"\ncolour = 1', "colour"),
        ('name = "a"\nurl = "https://x"', "secret_env"),
        ('name = "a"\nurl = "https://x"\nsecret_env = "UNSET_SECRET"', "secret_env"),
        ('name = "a"\nurl = "ftp://x"\nsecret_env = "OPS_SECRET"', "url"),
        ('name = "a"\nurl = "https://x"\nsecret_env = "OPS_SECRET"\nrisk = ["huge"]', "risk"),
    ],
)
def test_a_bad_subscription_names_its_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, table: str, message: str
) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(f"[[webhooks]]\n{table}\n")
    monkeypatch.setenv("OPS_SECRET", SECRET)
    monkeypatch.delenv("UNSET_SECRET", raising=False)
    with pytest.raises(ValueError, match=message) as raised:
        load_webhooks(policy)
    assert SECRET not in str(raised.value)


def drain_due_only(worker: WebhookWorker) -> None:
    """Passes until what is due now has been attempted (later notices stay pending)."""
    for _ in range(20):
        if not worker.deliver_due():
            return


def _every(ledger: Ledger) -> list[Delivery]:
    states = ("pending", "delivered", "dead", "coalesced", "skipped")
    return ledger.list_work(DELIVERY, states=shown_states(DELIVERY, states))  # type: ignore[arg-type]


def test_the_cli_records_the_notices_of_its_own_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, policy = tmp_path / "ledger.db", tmp_path / "policy.toml"
    policy.write_text(
        '[[webhooks]]\nname = "ops"\nurl = "https://ops.example/hook"\n'
        'secret_env = "OPS_SECRET"\nnotices = ["approval.resolved"]\n'
    )
    monkeypatch.setenv("OPS_SECRET", SECRET)
    with SqliteLedger.from_conn_string(db) as ledger:
        ask(ApprovalAuthority(ledger), "apr_1")
    out = io.StringIO()
    args = ["--db", str(db), "--access-policy", str(policy), "approve", "apr_1", "--yes"]
    assert cli_main(args, stdout=out) == 0, out.getvalue()
    with SqliteLedger.from_conn_string(db) as ledger:
        assert [d.topic for d in ledger.list_work(DELIVERY)] == ["approval.resolved"]


def test_the_cli_names_a_bad_subscription_setting(tmp_path: Path) -> None:
    db, policy = tmp_path / "ledger.db", tmp_path / "policy.toml"
    policy.write_text('[[webhooks]]\nname = "ops"\nurl = "https://x"\nsecret = "whsec_x"\n')
    with SqliteLedger.from_conn_string(db) as ledger:
        ledger.setup()
    out = io.StringIO()
    assert (
        cli_main(["--db", str(db), "--access-policy", str(policy), "webhooks", "list"], stdout=out)
        == 2
    )
    assert "webhooks[0].secret: not a setting" in out.getvalue()
    assert "whsec_x" not in out.getvalue()

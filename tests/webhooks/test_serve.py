"""Servers send webhooks: ``aais-agui serve --access-policy``, ``create_app(webhooks=...)``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
from fastapi.testclient import TestClient
from langgraph.checkpoint.memory import InMemorySaver

from aais_agui import ApprovalService, bearer_token_authenticator, create_app, run_agent_input
from aais_langgraph import build_decision
from aais_langgraph.authority import ApprovalAuthority
from aais_langgraph.ledger import SqliteLedger
from aais_langgraph.webhooks import SubscriptionPlan, WebhookSubscription
from demo.support import JSON_HEADERS, agui_run, interrupts_of, running, wait_for
from demo.tiny_graph import builder

from .receivers import SECRET, Receiver, free_port
from .test_delivery import ask

GRAPHS = Path(__file__).resolve().parents[1] / "demo"  # tiny_graph.py
TOKEN = {"Authorization": "Bearer s3cret"}


def test_serve_signs_and_sends_the_policy_files_webhooks(tmp_path: Path) -> None:
    down = free_port()
    policy = tmp_path / "policy.toml"
    policy.write_text(
        "[[webhooks]]\n"
        'name = "ops"\n'
        'url = "{live}"\n'
        'secret_env = "OPS_SECRET"\n'
        'notices = ["approval.requested", "approval.resolved"]\n'
        "\n[[webhooks]]\n"
        'name = "gone"\n'
        f'url = "http://127.0.0.1:{down}/hook"\n'
        'secret_env = "OPS_SECRET"\n'
        'notices = ["approval.requested"]\n'
        "max_attempts = 1\n"
    )
    with Receiver() as receiver:
        policy.write_text(policy.read_text().replace("{live}", receiver.url))
        args = ["serve", "tiny_graph:make_graph", "--port", "0", "--db", str(tmp_path / "app.db")]
        args += ["--token-env", "AAIS_TEST_TOKEN", "--access-policy", str(policy)]
        env = {"AAIS_TEST_TOKEN": "s3cret", "OPS_SECRET": SECRET}
        with (
            running(args, cwd=GRAPHS, env=env) as server,
            httpx.Client(base_url=server.url, timeout=30, headers=TOKEN) as client,
        ):
            [interrupt] = interrupts_of(agui_run(client, run_agent_input("t-1", text="delete it")))
            requested = interrupt["metadata"]["aais"]
            wait_for(lambda: len(receiver.bodies) == 1, what="the requested notice")
            decided = build_decision(
                requested, decision="approve", actor={"id": "x", "type": "human"}
            )
            answer = client.post(
                f"/approvals/{requested['request']['id']}/decisions",
                content=json.dumps(decided.to_json()),
                headers=JSON_HEADERS,
            )
            assert answer.status_code == 200, answer.text
            wait_for(lambda: len(receiver.bodies) == 2, what="the resolved notice")

            listed = wait_for(
                lambda: client.get("/inbox/webhooks").json()["deliveries"] or None,
                what="the dead delivery",
            )
            assert [(d["subscription"], d["state"]) for d in listed] == [("gone", "dead")]
            assert str(down) not in json.dumps(listed)  # never the receiver's URL

    bodies = list(receiver.bodies.values())
    assert [body["type"] for body in bodies] == ["approval.requested", "approval.resolved"]
    assert bodies[0]["data"]["request"]["id"] == requested["request"]["id"]
    assert receiver.rejected == receiver.cut_short == 0


def test_an_app_made_with_webhooks_sends_them_while_it_serves(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    other = SqliteLedger(path)  # another process's writer: it knows no subscriptions
    ledger = None
    try:
        with Receiver() as receiver:
            ops = WebhookSubscription(
                name="ops",
                url=receiver.url,
                secret=SECRET,
                notices=frozenset({"approval.requested"}),
            )
            ledger = SqliteLedger(path, delivery_plan=SubscriptionPlan([ops]))
            service = ApprovalService(
                builder, ApprovalAuthority(ledger), checkpointer=InMemorySaver(), webhooks=[ops]
            )
            app = create_app(
                service,
                authenticate=bearer_token_authenticator({"s3cret": {"id": "x", "type": "human"}}),
            )
            with TestClient(app, headers=TOKEN) as client:
                [interrupt] = interrupts_of(agui_run(client, run_agent_input("t-1", text="go")))
                wait_for(lambda: len(receiver.bodies) == 1, what="the app's requested notice")
                ask(ApprovalAuthority(other), "apr_elsewhere")
                wait_for(lambda: len(receiver.bodies) == 2, what="the other writer's notice")

        asked = [body["data"]["request"]["id"] for body in receiver.bodies.values()]
        assert asked == [interrupt["metadata"]["aais"]["request"]["id"], "apr_elsewhere"]
        assert receiver.rejected == receiver.cut_short == receiver.duplicates == 0
    finally:
        if ledger is not None:
            ledger.close()
        other.close()


def test_serve_reminds_the_approvers_by_the_policy_files_rule(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    with Receiver() as receiver:
        policy.write_text(
            'default_approvers = ["*"]\n\n'
            "[[approvers]]\n"
            'kinds = ["fs.delete"]\ngroups = ["*"]\n'
            "remind_after = 1\nremind_every = 1\nremind_times = 2\n\n"
            "[[webhooks]]\n"
            f'name = "ops"\nurl = "{receiver.url}"\nsecret_env = "OPS_SECRET"\n'
            'notices = ["approval.reminder"]\n'
        )
        args = ["serve", "tiny_graph:make_graph", "--port", "0", "--db", str(tmp_path / "app.db")]
        args += ["--token-env", "AAIS_TEST_TOKEN", "--access-policy", str(policy)]
        env = {"AAIS_TEST_TOKEN": "s3cret", "OPS_SECRET": SECRET}
        with (
            running(args, cwd=GRAPHS, env=env) as server,
            httpx.Client(base_url=server.url, timeout=30, headers=TOKEN) as client,
        ):
            [interrupt] = interrupts_of(agui_run(client, run_agent_input("t-1", text="delete it")))
            request_id = interrupt["metadata"]["aais"]["request"]["id"]
            wait_for(lambda: len(receiver.bodies) == 2, what="two reminders")
    reminders = list(receiver.bodies.values())
    assert [body["type"] for body in reminders] == ["approval.reminder"] * 2
    assert {body["data"]["request"]["id"] for body in reminders} == {request_id}
    assert receiver.duplicates == 0


CEDAR_BESIDE_POLICY = """
permit (principal, action, resource);
forbid (principal == User::"muted-bot", action == Action::"view", resource);
forbid (principal == User::"api-client", action == Action::"decide", resource)
when { context.decision == "deny" };
"""


def test_serve_with_cedar_beside_the_policy_file_sends_its_webhooks_as_cedar_allows(
    tmp_path: Path,
) -> None:
    cedar = tmp_path / "access.cedar"
    cedar.write_text(CEDAR_BESIDE_POLICY)
    policy = tmp_path / "policy.toml"
    with Receiver() as told, Receiver() as muted:
        policy.write_text(
            "".join(
                f'[[webhooks]]\nname = "{name}"\nurl = "{url}"\nsecret_env = "OPS_SECRET"\n'
                f'as_user = "{name}-bot"\nnotices = ["approval.requested"]\n\n'
                for name, url in (("told", told.url), ("muted", muted.url))
            )
        )
        args = ["serve", "tiny_graph:make_graph", "--port", "0", "--db", str(tmp_path / "app.db")]
        args += ["--token-env", "AAIS_TEST_TOKEN", "--access-policy", str(policy)]
        args += ["--cedar-policies", str(cedar)]
        env = {"AAIS_TEST_TOKEN": "s3cret", "OPS_SECRET": SECRET}
        with (
            running(args, cwd=GRAPHS, env=env) as server,
            httpx.Client(base_url=server.url, timeout=30, headers=TOKEN) as client,
        ):
            [interrupt] = interrupts_of(agui_run(client, run_agent_input("t-1", text="delete it")))
            requested = interrupt["metadata"]["aais"]
            wait_for(lambda: len(told.bodies) == 1, what="the requested notice")
            # The muted delivery was written with the request; it leaves the waiting
            # listing without a post: skipped, since Cedar lets its principal view nothing.
            wait_for(
                lambda: not client.get("/inbox/webhooks").json()["deliveries"],
                what="the muted subscription's delivery to be settled",
            )
            # Cedar decides the decisions too: this client may approve, never deny.
            url = f"/approvals/{requested['request']['id']}/decisions"
            actor = {"id": "api-client", "type": "human"}
            denied = build_decision(requested, decision="deny", actor=actor)
            refused = client.post(url, content=json.dumps(denied.to_json()), headers=JSON_HEADERS)
            assert refused.status_code == 403, refused.text
            approved = build_decision(requested, decision="approve", actor=actor)
            answer = client.post(url, content=json.dumps(approved.to_json()), headers=JSON_HEADERS)
            assert answer.status_code == 200, answer.text
    assert muted.posts == 0
    assert [body["type"] for body in told.bodies.values()] == ["approval.requested"]


def test_serve_refuses_a_policy_files_access_settings_beside_cedar(tmp_path: Path) -> None:
    (tmp_path / "access.cedar").write_text(CEDAR_BESIDE_POLICY)
    (tmp_path / "policy.toml").write_text('[grants]\nrevoke_groups = ["sre"]\n')
    (tmp_path / "tiny_graph.py").write_text((GRAPHS / "tiny_graph.py").read_text())
    command = [sys.executable, "-m", "aais_agui.cli", "serve", "tiny_graph:builder"]
    command += ["--port", "0", "--db", str(tmp_path / "app.db"), "--local-dev-login"]
    command += ["--access-policy", "policy.toml", "--cedar-policies", "access.cedar"]
    done = subprocess.run(
        command,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert "grants: Cedar decides access" in done.stderr, done
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "app.db").exists()

"""``aais-agui serve --access-policy FILE`` with ``[[slack]]``: it posts, and answers clicks."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from aais_agui import run_agent_input
from demo.support import agui_run, interrupts_of, running

from .fake_slack import TOKEN, fake_slack
from .site import SECRET, block_actions, button, signed, wait_for

pytestmark = pytest.mark.slow

GRAPHS = Path(__file__).resolve().parents[1] / "demo"  # tiny_graph.py
POLICY = """
default_approvers = ["*"]

[[slack]]
name = "ops"
channel = "C0SERVE"
token_env = "SLACK_BOT_TOKEN"
signing_secret_env = "SLACK_SIGNING_SECRET"
api_url = "{api}"

[slack_users]
U0ALICE = {{ user = "alice" }}
"""


def test_serve_posts_the_policy_files_slack_channel_and_takes_its_clicks(tmp_path: Path) -> None:
    with fake_slack() as slack:
        policy = tmp_path / "policy.toml"
        policy.write_text(POLICY.format(api=slack.url))
        args = ["serve", "tiny_graph:make_graph", "--port", "0", "--db", str(tmp_path / "app.db")]
        args += ["--token-env", "AAIS_TEST_TOKEN", "--access-policy", str(policy)]
        env = {
            "AAIS_TEST_TOKEN": "s3cret",
            "SLACK_BOT_TOKEN": TOKEN,
            "SLACK_SIGNING_SECRET": SECRET,
        }
        with (
            running(args, cwd=GRAPHS, env=env) as server,
            httpx.Client(
                base_url=server.url, timeout=30, headers={"Authorization": "Bearer s3cret"}
            ) as client,
        ):
            assert any("/slack/interactions" in line for line in server.output)
            [interrupt] = interrupts_of(agui_run(client, run_agent_input("t-1", text="delete")))
            request_id = interrupt["metadata"]["aais"]["request"]["id"]
            message = wait_for(
                lambda: next((c for c in slack.posted() if request_id in c.text), None),
                what="the posted request",
            )
            unsigned = httpx.post(
                f"{server.url.rstrip('/')}/slack/interactions", content=b"payload=%7B%7D"
            )
            assert unsigned.status_code == 401, (unsigned.status_code, unsigned.text)
            assert unsigned.json()["error"]["code"] == "aais.slack_signature"

            body, headers = signed(
                block_actions(message, button(message, "approve"), user="U0ALICE")
            )
            answer = httpx.post(
                f"{server.url.rstrip('/')}/slack/interactions", content=body, headers=headers
            )
            assert answer.status_code == 200, answer.text
            assert answer.json()["resolution"]["resolution"]["outcome"] == "approved"
            [update] = wait_for(
                lambda: [c for c in slack.updated() if request_id in c.text], what="the rewrite"
            )
        assert "Approved" in update.text and "alice" in update.text

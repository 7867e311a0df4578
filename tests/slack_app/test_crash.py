"""A served process killed with SIGKILL between a click and its record, after the record,
between a Slack post's claim and its send, and after Slack took the post but before the
ledger recorded it: nothing is lost and nothing doubled.

The server runs in its own process (``served_process.py``) over a SQLite ledger and
checkpointer in one folder, stopped at an exact point (it writes a marker file there);
a second process over the same files takes over. Slack's Web API is played on loopback.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from aais_agui import run_agent_input
from aais_langgraph.ledger import DELIVERY, SqliteLedger
from aais_langgraph.ledger.deliveries import delivery_id_for
from agui.demo_graph import EffectLog
from demo.support import agui_run, interrupts_of

from .fake_slack import FakeSlack, fake_slack
from .site import POLICY, USERS, block_actions, button, signed, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

SERVED = Path(__file__).with_name("served_process.py")


@dataclass
class Served:
    url: str
    process: subprocess.Popen[str]


@contextmanager
def served(folder: Path, slack: FakeSlack, point: str = "") -> Iterator[Served]:
    process = subprocess.Popen(
        [sys.executable, str(SERVED), str(folder), slack.url, point],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        assert line.startswith("ready "), line
        yield Served(line.removeprefix("ready "), process)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)


def kill_at(folder: Path, server: Served, point: str) -> None:
    wait_for(lambda: (folder / point).exists(), what=f"the server to stop at {point}")
    os.kill(server.process.pid, signal.SIGKILL)
    server.process.wait(timeout=10)


def start_thread(server: Served, thread_id: str) -> str:
    with httpx.Client(
        base_url=server.url, headers={"Authorization": "Bearer runner-token"}, timeout=30
    ) as client:
        body = run_agent_input(thread_id, text=f"delete /srv/{thread_id}.txt")
        [interrupt] = interrupts_of(agui_run(client, body))
    return str(interrupt["metadata"]["aais"]["request"]["id"])


def click_in_background(server: Served, body: bytes, headers: dict[str, str]) -> None:
    """A click whose answer never comes (the server is killed before it answers)."""

    def send() -> None:
        with suppress(httpx.HTTPError):
            httpx.post(
                f"{server.url}/slack/interactions", content=body, headers=headers, timeout=60
            )

    threading.Thread(target=send, daemon=True).start()


def click(server: Served, slack: FakeSlack, request_id: str) -> httpx.Response:
    message = next(call for call in slack.posted() if request_id in call.text)
    body, headers = signed(block_actions(message, button(message, "approve"), user=USERS["alice"]))
    return httpx.post(f"{server.url}/slack/interactions", content=body, headers=headers, timeout=30)


def decided(ledger: SqliteLedger, request_id: str) -> int:
    return sum(
        1
        for event in ledger.events_after(0, limit=100_000)
        if event["type"] == "approval.decided" and event["decision"]["request_id"] == request_id
    )


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return tmp_path


def test_killed_between_a_click_and_its_record_the_request_stays_answerable(
    folder: Path,
) -> None:
    with fake_slack() as slack:
        (folder / "policy.toml").write_text(POLICY.format(api=slack.url, hooks=slack.hooks_url))
        with served(folder, slack, "before_record") as first:
            request_id = start_thread(first, "t-before")
            message = wait_for(
                lambda: next((c for c in slack.posted() if request_id in c.text), None),
                what="the message",
            )
            payload = block_actions(message, button(message, "approve"), user=USERS["alice"])
            click_in_background(first, *signed(payload))
            kill_at(folder, first, "before_record")

        with SqliteLedger.from_conn_string(folder / "ledger.db") as ledger:
            assert ledger.get_resolution(request_id) is None  # still pending
            assert decided(ledger, request_id) == 0
            assert [row.request_id for row in ledger.list_pending()] == [request_id]

        with served(folder, slack) as second:
            answer = click(second, slack, request_id)
            assert answer.status_code == 200, answer.text
            effects = EffectLog(folder / "effects.db")
            wait_for(lambda: effects.list("t-before"), what="the approved action to run")
            update = wait_for(
                lambda: [c for c in slack.updated() if request_id in c.text], what="the update"
            )
        assert effects.list("t-before") == [("t-before", "delete_file", "/srv/t-before.txt")]
        assert "Approved" in update[0].text
        assert len([c for c in slack.posted() if request_id in c.text]) == 1
        with SqliteLedger.from_conn_string(folder / "ledger.db") as ledger:
            assert decided(ledger, request_id) == 1


def test_killed_after_a_click_is_recorded_a_second_click_records_nothing(folder: Path) -> None:
    with fake_slack() as slack:
        (folder / "policy.toml").write_text(POLICY.format(api=slack.url, hooks=slack.hooks_url))
        with served(folder, slack, "after_record") as first:
            request_id = start_thread(first, "t-after")
            message = wait_for(
                lambda: next((c for c in slack.posted() if request_id in c.text), None),
                what="the message",
            )
            payload = block_actions(message, button(message, "approve"), user=USERS["alice"])
            click_in_background(first, *signed(payload))
            kill_at(folder, first, "after_record")

        with SqliteLedger.from_conn_string(folder / "ledger.db") as ledger:
            recorded = ledger.get_resolution(request_id)
            assert recorded is not None and recorded.envelope["resolution"]["outcome"] == "approved"
            assert decided(ledger, request_id) == 1
        effects = EffectLog(folder / "effects.db")
        assert effects.list("t-after") == []  # recorded, not run yet: durable resume work

        with served(folder, slack) as second:
            wait_for(lambda: effects.list("t-after"), what="the durable resume to run the action")
            again = click(second, slack, request_id)
            assert again.status_code == 409 and again.json()["error"]["code"] == "aais.conflict"
            wait_for(
                lambda: [c for c in slack.updated() if request_id in c.text], what="the update"
            )
            time.sleep(0.5)  # a second run would show by now
        assert effects.list("t-after") == [("t-after", "delete_file", "/srv/t-after.txt")]
        with SqliteLedger.from_conn_string(folder / "ledger.db") as ledger:
            assert decided(ledger, request_id) == 1


def test_killed_between_a_posts_claim_and_its_send_the_message_is_posted_once(
    folder: Path,
) -> None:
    with fake_slack() as slack:
        (folder / "policy.toml").write_text(POLICY.format(api=slack.url, hooks=slack.hooks_url))
        with served(folder, slack, "before_send") as first:
            request_id = start_thread(first, "t-send")
            kill_at(folder, first, "before_send")
        assert slack.posted() == []
        post_id = delivery_id_for("ops", "approval.requested", request_id)
        with SqliteLedger.from_conn_string(folder / "ledger.db") as ledger:
            held = ledger.get_work(DELIVERY, post_id)
            assert held is not None and held.state == "claimed"  # by the dead process

        with served(folder, slack) as second:
            wait_for(lambda: [c for c in slack.posted() if request_id in c.text], what="the post")
            answer = click(second, slack, request_id)
            assert answer.status_code == 200, answer.text
            wait_for(
                lambda: [c for c in slack.updated() if request_id in c.text], what="the update"
            )
        [post] = [c for c in slack.posted() if request_id in c.text]
        [update] = [c for c in slack.updated() if request_id in c.text]
        assert update.body["ts"] == post.ts
        with SqliteLedger.from_conn_string(folder / "ledger.db") as ledger:
            done = ledger.get_work(DELIVERY, post_id)
            assert done is not None and done.state == "done"
            assert done.result == f"{post.body['channel']} {post.ts}"


def test_killed_after_slack_took_the_post_the_next_sender_finds_it_and_posts_nothing(
    folder: Path,
) -> None:
    with fake_slack() as slack:
        (folder / "policy.toml").write_text(POLICY.format(api=slack.url, hooks=slack.hooks_url))
        with served(folder, slack, "after_send") as first:
            request_id = start_thread(first, "t-sent")
            kill_at(folder, first, "after_send")
        [post] = [c for c in slack.posted() if request_id in c.text]
        post_id = delivery_id_for("ops", "approval.requested", request_id)
        with SqliteLedger.from_conn_string(folder / "ledger.db") as ledger:
            held = ledger.get_work(DELIVERY, post_id)
            assert held is not None and held.state == "claimed" and held.result is None

        with served(folder, slack) as second:
            with SqliteLedger.from_conn_string(folder / "ledger.db") as ledger:
                wait_for(
                    lambda: (ledger.get_work(DELIVERY, post_id) or held).state == "done",
                    what="the post's delivery to be settled",
                )
            answer = click(second, slack, request_id)
            assert answer.status_code == 200, answer.text
            wait_for(
                lambda: [c for c in slack.updated() if request_id in c.text], what="the update"
            )
        assert [c for c in slack.posted() if request_id in c.text] == [post]  # posted once
        assert [c for c in slack.of("conversations.history")]  # found by looking, not luck
        [update] = [c for c in slack.updated() if request_id in c.text]
        assert update.body["ts"] == post.ts
        with SqliteLedger.from_conn_string(folder / "ledger.db") as ledger:
            done = ledger.get_work(DELIVERY, post_id)
            assert done is not None and done.result == f"{post.body['channel']} {post.ts}"

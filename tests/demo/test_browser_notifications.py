"""In Chromium: a dead webhook delivery in the inbox's Notifications panel, retried from it."""

from __future__ import annotations

import secrets
import subprocess
import threading
from pathlib import Path

import httpx

from aais_agui import run_agent_input
from aais_langgraph.ledger import DELIVERY, Delivery, SqliteLedger
from webhooks.receivers import SECRET, Receiver

from .support import agui_run, free_port, interrupts_of, running, wait_for
from .test_browser import BROWSER_PROJECT, SCREENSHOTS, _require_tools
from .test_browser_authorization import AUDIENCE, ISSUER, SECRET_ENV, token

HERE = Path(__file__).resolve().parent
# sre decides (and so sees) tiny_graph's `fs.delete`; finance sees nothing. The subscription
# delivers as sre and gives up after one failed attempt.
POLICY = """\
default_approvers = ["sre"]

[[webhooks]]
name = "ops"
url = "{url}"
secret_env = "OPS_SECRET"
notices = ["approval.requested"]
as_groups = ["sre"]
max_attempts = 1
"""


def stored(db: Path, delivery_id: str) -> Delivery | None:
    """The delivery's row as the ledger holds it now."""
    with SqliteLedger.from_path(db) as ledger:
        return ledger.get_work(DELIVERY, delivery_id)


def test_a_dead_delivery_is_shown_to_who_may_see_it_and_retried_from_the_page(
    tmp_path: Path,
) -> None:
    node = _require_tools()
    secret = secrets.token_urlsafe(48)
    alice, dave = token(secret, "alice"), token(secret, "dave")
    db = tmp_path / "notifications.db"
    answer = threading.Event()
    # The first POST fails (the delivery is dead); the retried one waits for `answer`.
    receiver = Receiver(fail_first=1, hold=answer)
    policy = tmp_path / "access.toml"
    policy.write_text(POLICY.format(url=receiver.url), encoding="utf-8")
    args = ["serve", "tiny_graph:builder", "--port", str(free_port()), "--db", str(db)]
    args += ["--jwt-issuer", ISSUER, "--jwt-audience", AUDIENCE, "--jwt-secret-env", SECRET_ENV]
    args += ["--access-policy", str(policy)]
    env = {SECRET_ENV: secret, "OPS_SECRET": SECRET}
    as_alice = {"Authorization": f"Bearer {alice}"}
    try:
        with (
            running(args, cwd=HERE, env=env) as server,
            httpx.Client(base_url=server.url, timeout=30, headers=as_alice) as client,
        ):
            [interrupt] = interrupts_of(agui_run(client, run_agent_input("t-1", text="delete")))
            request_id = str(interrupt["metadata"]["aais"]["request"]["id"])

            def dead_ones() -> list[dict[str, str]]:
                listed = client.get("/inbox/webhooks").json()["deliveries"]
                return [item for item in listed if item["state"] == "dead"]

            [dead] = wait_for(dead_ones, what="the dead delivery")
            assert dead["request_id"] == request_id
            delivery_id = dead["delivery_id"]
            page_args = [server.url, str(SCREENSHOTS / "notifications"), delivery_id, request_id]
            driver = subprocess.run(
                [node, "notifications.mjs", *page_args, receiver.url, alice, dave],
                cwd=BROWSER_PROJECT,
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            report = driver.stdout + driver.stderr
            assert driver.returncode == 0, report + server.log()
            assert driver.stdout.strip().splitlines()[-1] == "STEP done", report
            # Handed back by the page: pending again with its attempts counted afresh, and
            # being sent (the receiver holds its answer).
            row = stored(db, delivery_id)
            assert row is not None and (row.shown_state, row.attempts) == ("pending", 0)
            wait_for(lambda: receiver.posts == 2, what="the retried POST")
            answer.set()
            wait_for(
                lambda: getattr(stored(db, delivery_id), "shown_state", None) == "delivered",
                what="the retried delivery to be delivered",
            )
    finally:
        answer.set()
        receiver.stop()
    assert list(receiver.bodies) == [delivery_id]

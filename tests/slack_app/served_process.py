"""The demo graph served with a Slack channel in its own process, to be killed with SIGKILL.

``python served_process.py FOLDER API_URL [POINT]`` serves ``create_app`` on a loopback
port over ``FOLDER/ledger.db`` (the ledger) and ``FOLDER/checkpoints.db`` (an
``AsyncSqliteSaver``), the ``[[slack]]`` tables of ``FOLDER/policy.toml`` pointed at
``API_URL``, and prints ``ready <url>`` once it serves. Bearer token ``runner-token``
starts runs. With ``POINT`` the process stops there, writes ``FOLDER/<POINT>`` and
waits to be killed:

``before_send``    the Slack post's delivery is claimed; Slack has not been called
``after_send``     Slack took the post (``chat.postMessage`` answered); the ledger has not
                   recorded it
``before_record``  a click's signature, user and digest are checked; nothing recorded
``after_record``   the click's decision is recorded; the answer is not sent, nothing resumed
                   (this process runs no watcher, so only the next one can resume it)
"""

from __future__ import annotations

import asyncio
import socket
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import uvicorn  # noqa: E402
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver  # noqa: E402

import aais_agui.http.slack as slack_http  # noqa: E402
from aais_agui import ApprovalService, ServiceSettings, bearer_token_authenticator, create_app  # noqa: E402
from aais_langgraph import ApprovalAuthority  # noqa: E402
from aais_langgraph.authority import AccessPolicy  # noqa: E402
from aais_langgraph.ledger import SqliteLedger  # noqa: E402
from aais_langgraph.webhooks import SubscriptionPlan, WebhookWorker, load_slack  # noqa: E402
from agui.demo_graph import EffectLog, build_demo_graph  # noqa: E402

TOKEN = "xoxb-test-token"
SECRET = "8f742231b10e8888abcd99yyyzzz85a5"


def stop_here(folder: Path, point: str) -> None:
    (folder / point).write_text(str(time.time()))
    time.sleep(3600)


def install(folder: Path, point: str) -> None:
    if point == "before_send":

        def held(self: Any, *args: Any, **kwargs: Any) -> Any:
            stop_here(folder, point)

        WebhookWorker._slack_attempt = held  # type: ignore[method-assign]
    elif point == "after_send":
        from slack_sdk import WebClient

        real_post = WebClient.chat_postMessage

        def posted(self: Any, *args: Any, **kwargs: Any) -> Any:
            real_post(self, *args, **kwargs)
            stop_here(folder, point)

        WebClient.chat_postMessage = posted  # type: ignore[method-assign]
    elif point in ("before_record", "after_record"):
        real = slack_http.arecord_decision

        async def record(*args: Any, **kwargs: Any) -> Any:
            if point == "before_record":
                await asyncio.to_thread(stop_here, folder, point)
            answer = await real(*args, **kwargs)
            await asyncio.to_thread(stop_here, folder, point)
            return answer

        slack_http.arecord_decision = record  # type: ignore[assignment]


async def main(folder: Path, api_url: str, point: str) -> None:
    install(folder, point)
    policy = folder / "policy.toml"
    slack = load_slack(policy, environ={"SLACK_BOT_TOKEN": TOKEN, "SLACK_SIGNING_SECRET": SECRET})
    assert slack is not None
    ledger = SqliteLedger(folder / "ledger.db", delivery_plan=SubscriptionPlan(slack.subscriptions))
    authority = ApprovalAuthority(
        ledger, authorizer=AccessPolicy.from_mapping({"default_approvers": ["sre"]})
    )
    worker = WebhookWorker(
        authority,
        slack.channels,
        claim_ttl=2.0,
        timeout=1.0,
        retry_base=0.05,
        retry_max=0.5,
        poll_interval=0.05,
    )
    async with AsyncSqliteSaver.from_conn_string(str(folder / "checkpoints.db")) as saver:
        graph = build_demo_graph(EffectLog(folder / "effects.db"), saver)
        service = ApprovalService(
            graph,
            authority,
            # Stopped after a record, nothing of this process resumes it: the next one must.
            settings=ServiceSettings(
                deliveries_every=0.05,
                resume_due_every=None if point == "after_record" else 0.1,
                orphans_every=None if point == "after_record" else 30.0,
            ),
            webhooks=worker,
            slack=slack,
        )
        runner = {"id": "runner", "type": "human"}
        app = create_app(service, authenticate=bearer_token_authenticator({"runner-token": runner}))
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
        serving = asyncio.ensure_future(server.serve(sockets=[sock]))
        while not server.started:
            await asyncio.sleep(0.02)
        print(f"ready http://127.0.0.1:{port}", flush=True)
        await serving


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else ""))

"""Every attempt of a delivery ends recorded: one that raises is a failed attempt and dies.

A Web API that answers JSON that is no object (a proxy in front of Slack, a changed
API) makes ``slack_sdk`` raise an ``AttributeError`` in the attempt, and one that says
``ok`` without the message's channel and ``ts`` leaves nothing to rewrite: either way
the delivery backs off and ends ``dead`` after its attempts, its reason recorded (an
error's type, never a value); it never stays claimed with no attempt counted.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from aais_langgraph.ledger import DELIVERY
from hostile.report import record

from .test_sender import ask, channel, sender


class _OddSlack(BaseHTTPRequestHandler):
    answer: object = None

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        body = json.dumps(self.answer).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def odd_slack(answer: object) -> Iterator[str]:
    """A Web API on loopback that answers every call with ``answer``."""
    handler = type("Handler", (_OddSlack,), {"answer": answer})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/api/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (["ok"], "the attempt raised AttributeError"),
        ({"ok": True}, "slack answered without the message's channel and ts"),
        (
            {"ok": True, "channel": "C0 X", "ts": "1.2"},
            "slack answered without the message's channel and ts",
        ),
    ],
    ids=["no-object", "no-channel-or-ts", "odd-channel"],
)
def test_an_attempt_that_raises_or_gets_an_odd_answer_ends_dead(
    answer: object, reason: str
) -> None:
    with odd_slack(answer) as api_url:
        authority, worker = sender(channel(api_url, max_attempts=3))
        ask(authority, "apr_odd")
        for _ in range(3):
            worker.deliver_due()

    rows = authority.ledger.list_work(DELIVERY, states=("due", "claimed", "done", "dead"))
    record("notice text", 1, failed_open=int(any(row.state != "dead" for row in rows)))
    (dead,) = rows
    assert (dead.state, dead.attempts, dead.last_error) == ("dead", 3, reason)

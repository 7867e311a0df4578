"""Real webhook receivers on loopback that verify with the ``standardwebhooks`` library.

A :class:`Receiver` is an HTTP server in the test process. Every POST is checked
with ``standardwebhooks.Webhook(secret).verify``; a verified one is recorded by its
``webhook-id``, and a second POST with an id already recorded counts as a duplicate
(what a de-duplicating receiver drops). ``fail_first`` answers 500 to the first
POSTs, ``slow_first`` answers the first POSTs only after ``slow_seconds`` (after the
sender gave up waiting), ``hold`` records a POST but answers only once the event is
set, and a receiver made with ``start=False`` is down until :meth:`Receiver.start`.
A POST whose body ends before its ``content-length`` (its sender died while sending
it) is counted in ``cut_short``, not as a POST: nothing was delivered to verify.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def free_port() -> int:
    """A loopback port nobody listens on (for a receiver that is down for now)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Receiver:
    """A de-duplicating receiver; see the module docs."""

    def __init__(
        self,
        *,
        secret: str = SECRET,
        fail_first: int = 0,
        slow_first: int = 0,
        slow_seconds: float = 0.0,
        port: int | None = None,
        start: bool = True,
        verify: bool = True,
        hold: threading.Event | None = None,
    ) -> None:
        self.secret = secret
        self.fail_first = fail_first
        self.slow_first = slow_first
        self.slow_seconds = slow_seconds
        self.verify = verify
        self.hold = hold
        self.port = port if port is not None else free_port()
        self.lock = threading.Lock()
        self.posts = 0
        self.rejected = 0
        self.cut_short = 0
        self.bodies: dict[str, Any] = {}
        """The first verified body of each ``webhook-id``, in arrival order."""
        self.duplicates = 0
        self.headers: list[dict[str, str]] = []
        self._server: ThreadingHTTPServer | None = None
        if start:
            self.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def start(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = self.headers.get("content-length")
                body = self.rfile.read(int(length or "0"))
                if length is None or len(body) < int(length):
                    with receiver.lock:
                        receiver.cut_short += 1
                    return
                receiver._receive(self, body)

            def log_message(self, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        server.daemon_threads = True
        self._server = server
        threading.Thread(target=server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def _receive(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        with self.lock:
            self.posts += 1
            number = self.posts
        headers = {key.lower(): value for key, value in handler.headers.items()}
        if number <= self.fail_first:
            self._answer(handler, 500)
            return
        if number <= self.fail_first + self.slow_first:
            time.sleep(self.slow_seconds)
        try:
            payload = (
                Webhook(self.secret).verify(body, headers) if self.verify else json.loads(body)
            )
        except WebhookVerificationError:
            with self.lock:
                self.rejected += 1
            self._answer(handler, 400)
            return
        with self.lock:
            self.headers.append(headers)
            webhook_id = headers["webhook-id"]
            if webhook_id in self.bodies:
                self.duplicates += 1
            else:
                self.bodies[webhook_id] = payload
        if self.hold is not None:  # recorded, but the answer waits: the sender may die first
            self.hold.wait(timeout=30)
        self._answer(handler, 204)

    @staticmethod
    def _answer(handler: BaseHTTPRequestHandler, status: int) -> None:
        try:
            handler.send_response(status)
            handler.send_header("content-length", "0")
            handler.end_headers()
        except OSError:
            pass  # the sender gave up waiting and closed the connection

    def __enter__(self) -> Receiver:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

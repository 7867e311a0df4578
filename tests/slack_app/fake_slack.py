"""Slack's Web API played on loopback: records ``chat.postMessage`` and ``chat.update`` calls,
and the replies posted to a click's ``response_url`` (under ``hooks_url``); answers
``conversations.history`` from the messages posted (newest first, their ``metadata`` with
``include_all_metadata``).

The Slack API is out of reach here, so ``WebClient(base_url=...)`` is pointed at this
server, which answers as Slack documents (``{"ok": true, "channel": ..., "ts": ...}``;
``{"ok": false, "error": ...}`` for a token it does not know or when told to fail).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

TOKEN = "xoxb-test-token"
OTHER_APP_TOKEN = "xoxb-another-app"
"""The token of another app in the workspace: Slack takes its posts too, as its bot's."""
BOTS = {TOKEN: "B0AAIS", OTHER_APP_TOKEN: "B0OTHER"}


@dataclass
class Call:
    method: str
    body: dict[str, Any]
    ts: str = ""
    """The message's ``ts`` as the answer named it."""

    @property
    def text(self) -> str:
        """Everything the message shows, as one string (to look for values in)."""
        return json.dumps(self.body, ensure_ascii=False)

    @property
    def buttons(self) -> list[dict[str, Any]]:
        return [
            element
            for block in self.body.get("blocks", [])
            if block.get("type") == "actions"
            for element in block["elements"]
        ]


@dataclass
class FakeSlack:
    url: str = ""
    hooks_url: str = ""
    """Slack's hooks host played here: a ``response_url`` under it is answered ``ok``."""
    calls: list[Call] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    """Every path posted to, whatever it was (to see that nothing went elsewhere)."""
    hooks_open: threading.Event = field(default_factory=threading.Event)
    """Cleared: a reply to a ``response_url`` waits (at most 10 s) until it is set again."""
    failures: int = 0
    """How many of the next calls answer ``ok: false`` (``ratelimited``)."""
    history_error: str | None = None
    """Set: ``conversations.history`` answers ``ok: false`` with this error (an app
    without the ``channels:history`` scope gets ``missing_scope``)."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def of(self, method: str) -> list[Call]:
        with self.lock:
            return [call for call in self.calls if call.method == method]

    def posted(self) -> list[Call]:
        return self.of("chat.postMessage")

    def updated(self) -> list[Call]:
        return self.of("chat.update")

    def replies(self) -> list[Call]:
        """The replies posted to ``response_url`` s under :attr:`hooks_url`."""
        return self.of("response_url")


def _bot_of(authorization: str | None) -> str | None:
    """The bot whose token the ``Authorization`` header carries (None: no known token)."""
    token = (authorization or "").removeprefix("Bearer ")
    return BOTS.get(token)


@contextmanager
def fake_slack() -> Iterator[FakeSlack]:
    state = FakeSlack()
    state.hooks_open.set()
    counter = iter(range(1, 1_000_000))

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length).decode()
            if "json" in (self.headers.get("content-type") or ""):
                body = json.loads(raw)
            else:
                body = {key: values[0] for key, values in parse_qs(raw).items()}
                if isinstance(body.get("blocks"), str):
                    body["blocks"] = json.loads(body["blocks"])
            method = self.path.rsplit("/", 1)[-1]
            with state.lock:
                state.paths.append(self.path)
            if method == "conversations.history":
                self._answer(method, body)
                return
            if self.path.startswith("/hooks/"):
                state.hooks_open.wait(10)
                with state.lock:
                    state.calls.append(Call("response_url", body, self.path))
                self.send_response(200)
                self.send_header("content-type", "text/plain")
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"ok")
                return
            with state.lock:
                failing = state.failures > 0
                state.failures -= 1 if failing else 0
                bot = _bot_of(self.headers.get("authorization"))
                if bot is None:
                    answer: dict[str, Any] = {"ok": False, "error": "invalid_auth"}
                elif failing:
                    answer = {"ok": False, "error": "ratelimited"}
                elif method == "auth.test":
                    answer = {"ok": True, "bot_id": bot, "user_id": f"U{bot}"}
                else:
                    ts = body.get("ts") or f"{int(time.time())}.{next(counter):06d}"
                    state.calls.append(Call(method, {**body, "bot_id": bot}, ts))
                    answer = {"ok": True, "channel": body.get("channel"), "ts": ts}
            data = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            split = urlsplit(self.path)
            query = {key: values[0] for key, values in parse_qs(split.query).items()}
            with state.lock:
                state.paths.append(split.path)
            self._answer(split.path.rsplit("/", 1)[-1], query)

        def _answer(self, method: str, query: dict[str, Any]) -> None:
            """Answer a ``conversations.history`` call (sent as GET or as POST)."""
            with state.lock:
                state.calls.append(Call(method, query))
                if _bot_of(self.headers.get("authorization")) is None:
                    answer: dict[str, Any] = {"ok": False, "error": "invalid_auth"}
                elif method != "conversations.history":
                    answer = {"ok": False, "error": "unknown_method"}
                elif state.history_error is not None:
                    answer = {"ok": False, "error": state.history_error}
                else:
                    metadata = query.get("include_all_metadata") in ("1", "true", "True")
                    oldest = float(query.get("oldest") or 0)
                    messages = [
                        {
                            "type": "message",
                            "ts": call.ts,
                            "text": call.body.get("text", ""),
                            "bot_id": call.body["bot_id"],
                            **({"metadata": call.body["metadata"]} if metadata else {}),
                        }
                        for call in reversed(state.calls)
                        if call.method == "chat.postMessage"
                        and call.body.get("channel") == query.get("channel")
                        and float(call.ts) >= oldest
                        and "metadata" in call.body
                    ]
                    answer = {"ok": True, "messages": messages, "has_more": False}
            data = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/api/"
    state.hooks_url = f"http://127.0.0.1:{server.server_address[1]}/hooks/"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()

"""Helpers for the HTTP tests: a real uvicorn on 127.0.0.1 in a thread, and SSE parsing."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import uvicorn


@contextmanager
def serve(app: Any, port: int = 0) -> Iterator[str]:
    """Run ``app`` on a loopback port (``0``: an ephemeral one); yields the base URL."""
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, name="uvicorn-test", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


def sse_messages(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    """Parse SSE lines into ``{"event", "id", "data"}`` messages (data decoded as JSON)."""
    message: dict[str, Any] = {}
    data: list[str] = []
    for line in lines:
        if line == "":
            if data:
                message["data"] = json.loads("\n".join(data))
                yield message
            message, data = {}, []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "data":
            data.append(value)
        elif field in ("event", "id"):
            message[field] = value


def agui_run(
    client: httpx.Client, path: str, body: dict[str, Any], **kwargs: Any
) -> list[dict[str, Any]]:
    """POST one AG-UI run and return its events (the stream ends with the run)."""
    with client.stream("POST", path, json=body, **kwargs) as response:
        response.raise_for_status()
        return [message["data"] for message in sse_messages(response.iter_lines())]

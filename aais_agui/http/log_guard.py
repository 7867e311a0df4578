"""One rate-limited warning for what refused or broken clients make the server log.

A WebSocket handshake refused before it is accepted (no actor, a foreign origin)
makes uvicorn log ``ASGI callable returned without completing handshake`` at ERROR,
and a text frame with invalid UTF-8 makes it log an ERROR line and asyncio a full
traceback (``Fatal error on transport``). An unauthenticated client could flood the
log with them. :class:`ClientNoise`, on the ``uvicorn.error`` and ``asyncio``
loggers, lets the first such record through as one WARNING line without a
traceback, then counts the rest and says how many once a minute.
"""

from __future__ import annotations

import logging
import threading
import time

__all__ = ["ClientNoise", "guard_server_logs"]

_NOISE = (
    "ASGI callable returned without completing handshake",
    "Invalid UTF-8 sequence received from client",
)
_TRANSPORT = "Fatal error on transport"
_WEBSOCKET_PROTOCOL = "uvicorn.protocols.websockets"


class ClientNoise(logging.Filter):
    """Turns client-made server errors into one WARNING line per ``interval`` seconds."""

    def __init__(self, interval: float = 60.0) -> None:
        super().__init__()
        self.interval = interval
        self._lock = threading.Lock()
        self._last = float("-inf")
        self._held = 0
        self.seen = 0
        """Such records met so far (passed on as a warning or held back)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not _is_noise(record):
            return True
        with self._lock:
            now = time.monotonic()
            self.seen += 1
            self._held += 1
            if now - self._last < self.interval:
                return False
            count, self._held, self._last = self._held, 0, now
        record.msg = (
            "refused or malformed WebSocket clients: %d since the last such line "
            "(handshakes refused before accept, frames with invalid UTF-8)"
        )
        record.args = (count,)
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        return True


def _is_noise(record: logging.LogRecord) -> bool:
    message = record.getMessage()
    if any(text in message for text in _NOISE):
        return True
    return message.startswith(_TRANSPORT) and _WEBSOCKET_PROTOCOL in message


_INSTALLED: ClientNoise | None = None


def guard_server_logs() -> ClientNoise:
    """Install the one :class:`ClientNoise` on uvicorn's and asyncio's loggers (once per
    process; uvicorn's logging configuration keeps a logger's filters)."""
    global _INSTALLED
    if _INSTALLED is None:
        _INSTALLED = ClientNoise()
        for name in ("uvicorn.error", "asyncio"):
            logging.getLogger(name).addFilter(_INSTALLED)
    return _INSTALLED

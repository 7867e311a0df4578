"""Which channel an answer arrived on, named for the metrics and spans: an ASGI middleware.

Every request ``create_app`` serves runs inside
:func:`~aais_langgraph.observability.decision_channel` with its transport's name, so
an answer the authority judges while serving it is counted and traced under that
channel: ``agui`` (the AG-UI endpoint), ``websocket`` (the AAIS WebSocket binding),
``slack`` (a Slack app's button clicks, ``/slack/``), ``http`` (the AAIS HTTP profile,
the inbox). What runs outside a request (the
watcher, durable resume work, sweeps) keeps the default, ``runtime``.
"""

from __future__ import annotations

from typing import Any

from aais_langgraph.observability import decision_channel

__all__ = ["DecisionChannelMiddleware"]


class DecisionChannelMiddleware:
    """Name each request's channel from its scope: ``websocket``, ``agui`` under
    ``agent_path``, ``slack`` under ``/slack/``, else ``http``."""

    def __init__(self, app: Any, *, agent_path: str) -> None:
        self.app = app
        self.agent_path = agent_path.rstrip("/") or "/"

    def channel(self, scope: Any) -> str | None:
        """The channel of a scope (None for the lifespan)."""
        if scope["type"] == "websocket":
            return "websocket"
        if scope["type"] != "http":
            return None
        path = str(scope.get("path", ""))
        if path == self.agent_path or path.startswith(self.agent_path + "/"):
            return "agui"
        if path.startswith("/slack/"):
            return "slack"
        return "http"

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        name = self.channel(scope)
        if name is None:
            await self.app(scope, receive, send)
            return
        with decision_channel(name):
            await self.app(scope, receive, send)

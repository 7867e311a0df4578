"""The Prometheus scrape endpoint: ``GET /metrics``, authenticated like the API, or its own port.

:func:`metrics_router` serves an :class:`~aais_langgraph.observability.ApprovalMetrics`
behind the app's authentication (a scraper sends a bearer token the authenticator
accepts; 401 otherwise). :func:`serve_metrics` serves it instead on a port of its own,
without authentication, for a listener only the monitoring network reaches (bind it to
loopback or a private interface). Each scrape reads the ledger in a worker thread.
``create_app(metrics=True)`` and ``aais-agui serve --metrics`` / ``--metrics-port``
use these.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from fastapi import APIRouter, Request, Response

from aais_langgraph.authority import FORBIDDEN, Resource
from aais_langgraph.observability import ApprovalMetrics

from .refusals import refused
from .security import Security

__all__ = ["MetricsServer", "metrics_router", "serve_metrics"]

_NO_STORE = {"Cache-Control": "no-store"}


def metrics_router(
    metrics: ApprovalMetrics, security: Security, *, path: str = "/metrics"
) -> APIRouter:
    """``GET path``: the Prometheus exposition (OpenMetrics when the scraper asks for it),
    for an actor ``security`` authenticates whom the authority's authorizer lets read the
    ``metrics`` (403 ``aais.forbidden`` otherwise): a service needs the ``metrics``
    scope under an access policy."""
    router = APIRouter()

    @router.get(path, include_in_schema=False)
    async def scrape(request: Request) -> Response:
        principal = (await security.actor(request)).principal
        allowed = await metrics.authority.access.apermits(principal, "metrics", Resource())
        if not allowed:
            raise refused(FORBIDDEN, allowed.reason)
        body, content_type = await asyncio.to_thread(
            metrics.exposition, request.headers.get("accept")
        )
        return Response(body, media_type=content_type, headers=_NO_STORE)

    return router


class MetricsServer:
    """The metrics listener :func:`serve_metrics` started; :meth:`close` stops it."""

    def __init__(self, server: Any, thread: threading.Thread) -> None:
        self._server = server
        self._thread = thread

    @property
    def port(self) -> int:
        """The port it listens on (the one chosen when 0 was asked)."""
        return int(self._server.server_address[1])

    def close(self) -> None:
        """Stop listening and wait for the serving thread."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


def serve_metrics(metrics: ApprovalMetrics, *, host: str = "127.0.0.1", port: int) -> MetricsServer:
    """Serve ``metrics`` on ``host:port`` (0 picks a free port) in a thread of its own,
    without authentication: for a listener only the monitoring network reaches."""
    from prometheus_client import start_http_server

    server, thread = start_http_server(port, addr=host, registry=metrics.registry())
    return MetricsServer(server, thread)

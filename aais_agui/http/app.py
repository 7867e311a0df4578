"""``create_app``: the AG-UI endpoint and the AAIS HTTP/SSE profile in one FastAPI app.

The app is assembled from routers that can each be mounted into an
existing app on their own (:func:`~aais_agui.http.agui.agui_router`,
:func:`~aais_agui.http.approvals.approvals_router`,
:func:`~aais_agui.http.websocket.websocket_router`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from fastapi import FastAPI, HTTPException, Request, Response
from fastapi.responses import JSONResponse

from aais_langgraph.authority import ApprovalAuthority, LedgerIntegrityError
from aais_langgraph.observability import ApprovalMetrics

from ..agent import AAISLangGraphAgent
from ..served_graph import served_graph
from ..service import ApprovalService, ServiceSettings
from .agui import agui_router
from .approvals import approvals_router
from .channels import DecisionChannelMiddleware
from .deliveries import deliveries_router
from .inbox import SECURITY_HEADERS, inbox_router
from .log_guard import guard_server_logs
from .metrics import metrics_router
from .refusals import refusal_response
from .security import Authenticator, Security
from .standing import standing_router
from .websocket import websocket_router


def create_app(
    graph: ApprovalService | Any,
    *,
    authenticate: Authenticator,
    authority: ApprovalAuthority | None = None,
    settings: ServiceSettings | None = None,
    checkpointer: Any = None,
    name: str = "aais-agent",
    description: str | None = None,
    path: str = "/agent",
    approvals_prefix: str = "/approvals",
    inbox: bool = True,
    api_docs: bool = False,
    metrics: bool | ApprovalMetrics = False,
) -> FastAPI:
    """An ASGI app serving a graph over AG-UI at ``path`` plus the AAIS profile.

    The app serves one :class:`~aais_agui.service.ApprovalService`: pass it, or pass the
    graph with ``authority`` (and ``settings``, ``checkpointer``) and one is built. Its
    lifespan (which uvicorn and ``with TestClient(app)`` run) is the service's: it opens
    the checkpointer when given a context manager (the routes exist while it serves, so
    the app can be built at module level) and runs the service's periodic jobs: resuming
    what other processes decided and the ledger's due resume work, the orphan sweep,
    webhook deliveries, retention and witnesses as its settings say
    (:mod:`aais_agui.service`). A service with Slack app channels (``slack=``) also serves
    ``POST /slack/interactions`` (:mod:`aais_agui.http.slack`).

    Args:
        graph: An :class:`~aais_agui.service.ApprovalService`, or the graph to serve: a
            compiled graph or a ``StateGraph`` builder. A builder is compiled with
            ``checkpointer``, a compiled graph is given it (a graph compiled with its own
            is refused: pass one or the other). Without ``checkpointer`` the graph's own
            is used (a graph compiled without one is refused: it could not pause on an
            approval). A synchronous checkpointer (``SqliteSaver``, ``PostgresSaver``) is
            refused with ``TypeError``: the server runs graphs asynchronously. Webhooks,
            a run config or page tools are given to the service.
        authenticate: ``authenticate(request)`` returns the actor (an ``Actor``, a
            mapping, or ``Authenticated(actor, cookie_session=True)`` to require CSRF
            tokens) or None for 401; it may be async.
        authority: The approval authority (with a graph; a service holds its own).
        settings: The served process's :class:`~aais_agui.service.ServiceSettings`
            (with a graph; a service holds its own): lease settings, the jobs'
            intervals (``resume_due_every=None, orphans_every=None`` runs no watcher),
            stream polls and re-authentication, ``allowed_origins``, ``max_body_bytes``.
        checkpointer: Where the graph's checkpoints go (with a graph): a checkpointer, or
            an async context manager that opens one, such as
            ``AsyncSqliteSaver.from_conn_string("app.checkpoints.db")``.
        name: The AG-UI agent's name.
        description: The AG-UI agent's description.
        path: Where the AG-UI endpoint is served.
        approvals_prefix: Where the AAIS profile (HTTP, SSE, WebSocket) is served.
        inbox: Serve the approval inbox page at ``/``.
        api_docs: Serve the OpenAPI document at ``/openapi.json`` (with the inbox's
            security headers). FastAPI's ``/docs`` and ``/redoc`` pages are never
            served: they load Swagger UI / ReDoc from a CDN, and any script running on
            the approval origin could approve as the signed-in user.
        metrics: True serves the Prometheus metrics of the authority at ``/metrics``,
            authenticated like the API (an
            :class:`~aais_langgraph.observability.ApprovalMetrics` may be passed instead;
            it needs the ``metrics`` extra); see :mod:`aais_agui.http.metrics` for
            serving them on a port of their own.

    An open WebSocket re-authenticates its actor before each decision frame and every
    ``settings.reauth_every`` seconds (1008 when the login ended), and so does an open
    SSE event stream (``GET /approvals/events``: it ends when the login ended).
    """
    guard_server_logs()
    service = _service_of(graph, authority, settings, checkpointer)
    security = Security(
        authenticate=authenticate,
        allowed_origins=service.settings.allowed_origins,
        max_body_bytes=service.settings.max_body_bytes,
    )

    def serve(app: FastAPI) -> None:
        """Add the routes serving the service's graph to ``app``."""
        agent = AAISLangGraphAgent(name=name, description=description, service=service)
        app.include_router(agui_router(agent, security, path=path))
        app.include_router(approvals_router(service, security, prefix=approvals_prefix))
        app.include_router(websocket_router(service, security, prefix=approvals_prefix))
        if inbox:
            app.include_router(
                inbox_router(service, security, agent_path=path, approvals_prefix=approvals_prefix)
            )
            app.include_router(standing_router(service.authority, security))
            app.include_router(deliveries_router(service.authority, security))
            app.add_api_route("/favicon.ico", _no_icon, include_in_schema=False)
        if service.slack is not None:
            from .slack import slack_router

            app.include_router(slack_router(service, service.slack, security))
        app.state.aais_agent = agent

    app = FastAPI(
        title="aais-agui",
        description="AG-UI endpoint with AAIS approvals",
        lifespan=_serving(service, serve),
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    if not service.opens_checkpointer:
        serve(app)
    if metrics:
        if not isinstance(metrics, ApprovalMetrics):
            metrics = ApprovalMetrics(service.authority)
        app.include_router(metrics_router(metrics, security))
        app.state.aais_metrics = metrics
    app.add_middleware(DecisionChannelMiddleware, agent_path=path)
    if api_docs:
        _serve_openapi(app)
    app.add_exception_handler(HTTPException, _http_error)  # type: ignore[arg-type]
    app.add_exception_handler(LedgerIntegrityError, _integrity_error)  # type: ignore[arg-type]
    app.state.aais_security = security
    app.state.aais_service = service
    return app


def _service_of(
    graph: Any,
    authority: ApprovalAuthority | None,
    settings: ServiceSettings | None,
    checkpointer: Any,
) -> ApprovalService:
    """The service ``create_app`` serves: the one given, or one built for the graph
    (``TypeError`` names what cannot serve)."""
    if isinstance(graph, ApprovalService):
        for field, value in (
            ("authority", authority),
            ("settings", settings),
            ("checkpointer", checkpointer),
        ):
            if value is not None:
                raise TypeError(f"{field}: the service holds its own; leave it out")
        service = graph
    else:
        if authority is None:
            raise TypeError("authority: required with a graph (or pass an ApprovalService)")
        service = ApprovalService(graph, authority, settings=settings, checkpointer=checkpointer)
    if not service.opens_checkpointer and service.graph is not None:
        served_graph(service.graph, None)  # refuses a graph that cannot pause
    return service


def _serving(
    service: ApprovalService, serve: Callable[[FastAPI], None]
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """The app's lifespan: the service's; when it opens the checkpointer, the graph's
    routes are added once it is open, and go again when it stops."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        routes = list(app.router.routes)
        opens = service.opens_checkpointer
        async with service.lifespan():
            if opens:
                serve(app)
            try:
                yield
            finally:
                if opens:
                    app.router.routes[:] = routes

    return lifespan


async def _no_icon() -> Response:
    """``GET /favicon.ico``: the inbox has no icon; an empty answer, not a 404."""
    return Response(status_code=204, headers=SECURITY_HEADERS)


def _serve_openapi(app: FastAPI) -> None:
    """``GET /openapi.json``: the schema FastAPI builds, as data under the inbox's CSP."""

    @app.get("/openapi.json", include_in_schema=False)
    async def openapi() -> JSONResponse:
        return JSONResponse(app.openapi(), headers=SECURITY_HEADERS)


async def _integrity_error(request: Request, error: LedgerIntegrityError) -> JSONResponse:
    """A stored row the audit does not vouch for: refused, named by table and id (503)."""
    return refusal_response("aais.ledger_integrity", str(error))


async def _http_error(request: Request, error: HTTPException) -> JSONResponse:
    """Errors as ``{"error": {"code", "message"}}``; messages never echo request values."""
    detail = error.detail
    body = detail if isinstance(detail, dict) else {"code": "http.error", "message": str(detail)}
    return JSONResponse({"error": body}, status_code=error.status_code, headers=error.headers)

"""``create_app``: the AG-UI endpoint and the AAIS HTTP/SSE profile in one FastAPI app.

The app is assembled from routers that can each be mounted into an
existing app on their own (:func:`~aais_agui.http.agui.agui_router`,
:func:`~aais_agui.http.approvals.approvals_router`,
:func:`~aais_agui.http.websocket.websocket_router`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Collection, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, HTTPException, Request, Response
from fastapi.responses import JSONResponse

from aais_langgraph.authority import DEFAULT_LEASE_TTL, ApprovalAuthority, LedgerIntegrityError
from aais_langgraph.observability import ApprovalMetrics
from aais_langgraph.threads import DEFAULT_LEASE_WAIT
from aais_langgraph.tools import PageToolGate

from ..agent import AAISLangGraphAgent
from ..webhook_serving import with_webhooks
from .agui import agui_router
from .approvals import approvals_router
from .channels import DecisionChannelMiddleware
from .deliveries import deliveries_router
from .inbox import SECURITY_HEADERS, inbox_router
from .log_guard import guard_server_logs
from .metrics import metrics_router
from .refusals import refusal_response
from .security import DEFAULT_MAX_BODY_BYTES, Authenticator, Security
from .served_graph import check_takes_checkpointer, opens_checkpointer, served_graph
from .standing import standing_router
from .watcher import watcher_lifespan
from .websocket import websocket_router

if TYPE_CHECKING:
    from aais_langgraph.webhooks import WebhookSubscription, WebhookWorker


def create_app(
    graph: Any,
    *,
    authority: ApprovalAuthority,
    authenticate: Authenticator,
    checkpointer: Any = None,
    path: str = "/agent",
    approvals_prefix: str = "/approvals",
    name: str = "aais-agent",
    description: str | None = None,
    config: Mapping[str, Any] | None = None,
    allowed_origins: Collection[str] = (),
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    lease_ttl: float = DEFAULT_LEASE_TTL,
    lease_wait: float = DEFAULT_LEASE_WAIT,
    poll_interval: float = 0.2,
    inbox: bool = True,
    watch_decisions: bool = True,
    api_docs: bool = False,
    websocket_reauth_interval: float = 15.0,
    websocket_max_age: float | None = None,
    page_tools: PageToolGate | None = None,
    metrics: bool | ApprovalMetrics = False,
    webhooks: Iterable[WebhookSubscription] | WebhookWorker | None = None,
) -> FastAPI:
    """An ASGI app serving ``graph`` over AG-UI at ``path`` plus the AAIS profile.

    ``graph`` is a compiled graph or a ``StateGraph`` builder. ``checkpointer`` is
    where its checkpoints go: a checkpointer, or an async context manager that opens
    one, such as ``AsyncSqliteSaver.from_conn_string("app.checkpoints.db")`` or
    ``AsyncPostgresSaver.from_conn_string(url)``. A context manager is entered when
    the app starts serving (its lifespan, which uvicorn and ``with TestClient(app)``
    run) and closed when it stops, so the app can be built at module level; the
    routes exist while it serves. A builder is compiled with the checkpointer, a
    compiled graph is given it (a graph compiled with its own is refused: pass one
    or the other). Without ``checkpointer`` the graph's own is used (a graph compiled
    without one is refused: it could not pause on an approval). A synchronous
    checkpointer (``SqliteSaver``, ``PostgresSaver``) is refused with ``TypeError``:
    the server runs graphs asynchronously.

    ``authenticate(request)`` returns the actor (an ``Actor``, a mapping, or
    ``Authenticated(actor, cookie_session=True)`` to require CSRF tokens) or
    None for 401; it may be async. ``allowed_origins`` lists browser origins
    besides the server's own that may change state. ``config`` is passed to
    every graph run (the authority is added under ``configurable``). ``inbox``
    serves the approval inbox page at ``/``; ``watch_decisions`` (on by default)
    runs the watcher while the app serves: it resumes threads whose approvals
    another process decided and picks up the ledger's due resume work, so an
    answer recorded while no server ran, or whose resume failed, still runs
    (see :mod:`aais_agui.http.watcher`).

    An open WebSocket re-authenticates its actor before each decision frame and every
    ``websocket_reauth_interval`` seconds (1008 when the login ended), and so does an
    open SSE event stream (``GET /approvals/events``: it ends when the login ended);
    ``websocket_max_age`` (seconds) closes any WebSocket connection that old.

    ``api_docs=True`` serves the OpenAPI document at ``/openapi.json`` (with the
    inbox's security headers). FastAPI's ``/docs`` and ``/redoc`` pages are never
    served: they load Swagger UI / ReDoc from a CDN, and any script running on
    the approval origin could approve as the signed-in user. Open the document
    in a viewer on another origin instead.

    ``page_tools`` is the graph's :class:`~aais_langgraph.tools.PageToolGate`: the
    frontend tool calls it gates reach the client only once approved.

    ``metrics=True`` serves the Prometheus metrics of ``authority`` at ``/metrics``,
    authenticated like the API (an :class:`~aais_langgraph.observability.ApprovalMetrics`
    may be passed instead; it needs the ``metrics`` extra). Off by default; see
    :mod:`aais_agui.http.metrics` for serving them on a port of their own.

    ``webhooks`` (subscriptions, or a :class:`~aais_langgraph.webhooks.WebhookWorker`
    of ``authority``; needs the ``notify`` extra) sets the ledger to record their
    deliveries with each request and resolution and runs the sender while the app
    serves, as ``aais-agui serve --access-policy`` does.
    """
    guard_server_logs()
    security = Security(
        authenticate=authenticate,
        allowed_origins=frozenset(allowed_origins),
        max_body_bytes=max_body_bytes,
    )

    def serve(app: FastAPI, served: Any) -> None:
        """Add the routes serving the graph ``served`` to ``app``."""
        agent = AAISLangGraphAgent(
            name=name,
            graph=served,
            authority=authority,
            description=description,
            config=config,
            lease_ttl=lease_ttl,
            lease_wait=lease_wait,
            page_tools=page_tools,
        )
        app.include_router(agui_router(agent, security, path=path))
        app.include_router(
            approvals_router(
                served,
                authority,
                security,
                prefix=approvals_prefix,
                config=config,
                poll_interval=poll_interval,
                reauth_interval=websocket_reauth_interval,
            )
        )
        app.include_router(
            websocket_router(
                served,
                authority,
                security,
                prefix=approvals_prefix,
                config=config,
                poll_interval=poll_interval,
                reauth_interval=websocket_reauth_interval,
                max_age=websocket_max_age,
            )
        )
        if inbox:
            app.include_router(
                inbox_router(
                    served, authority, security, agent_path=path, approvals_prefix=approvals_prefix
                )
            )
            app.include_router(standing_router(authority, security))
            app.include_router(deliveries_router(authority, security))
            app.add_api_route("/favicon.ico", _no_icon, include_in_schema=False)
        app.state.aais_agent = agent

    def watching(served: Any) -> Any:
        if not watch_decisions:
            return None
        return watcher_lifespan(served, authority, config=config, lease_ttl=lease_ttl)

    if opens_checkpointer(checkpointer):
        check_takes_checkpointer(graph)  # now, not when the app starts
        lifespan: Any = _opening_lifespan(graph, checkpointer, serve, watching)
        served = None
    else:
        served = served_graph(graph, checkpointer)
        lifespan = watching(served)
    lifespan = with_webhooks(lifespan, authority, webhooks)
    app = FastAPI(
        title="aais-agui",
        description="AG-UI endpoint with AAIS approvals",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    if served is not None:
        serve(app, served)
    if metrics:
        if not isinstance(metrics, ApprovalMetrics):
            metrics = ApprovalMetrics(authority)
        app.include_router(metrics_router(metrics, security))
        app.state.aais_metrics = metrics
    app.add_middleware(DecisionChannelMiddleware, agent_path=path)
    if api_docs:
        _serve_openapi(app)
    app.add_exception_handler(HTTPException, _http_error)  # type: ignore[arg-type]
    app.add_exception_handler(LedgerIntegrityError, _integrity_error)  # type: ignore[arg-type]
    app.state.aais_security = security
    return app


def _opening_lifespan(
    graph: Any,
    opener: AbstractAsyncContextManager[Any],
    serve: Callable[[FastAPI, Any], None],
    watching: Callable[[Any], Any],
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """The lifespan that opens the checkpointer, adds the graph's routes and runs the
    watcher while the app serves; the routes go again when it stops."""
    entered = False

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        nonlocal entered
        if entered:
            raise RuntimeError(
                "checkpointer: its context manager was entered already; an app built "
                "with one serves once (build the app again to serve again)"
            )
        entered = True
        routes = list(app.router.routes)
        async with opener as saver:
            served = served_graph(graph, saver)
            serve(app, served)
            try:
                watcher = watching(served)
                if watcher is None:
                    yield
                else:
                    async with watcher(app):
                        yield
            finally:
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

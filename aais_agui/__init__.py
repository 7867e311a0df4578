"""AAIS approvals surfaced to AG-UI frontends: interrupt mapping, an AG-UI server for
LangGraph graphs, and the AAIS HTTP/SSE presenter profile.

The served process is one :class:`~aais_agui.service.ApprovalService` (its driver,
periodic jobs and lifespan; the watcher, background resumes and ledger upkeep it runs);
the agent side sits here too (the AG-UI agent, the pure mapping, run outcomes, the
re-offer after a refused resume, resume planning); the transports (routers, SSE,
WebSocket, security, hosts, limits, decisions, ``create_app``) sit in
:mod:`aais_agui.http`. The mapping needs only the core dependencies; the server
names below are imported on first use and need the ``server`` extra.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .mapping import (
    interrupt_to_request,
    parse_resume_entry,
    request_to_interrupt,
    resume_entry_for,
    run_agent_input,
)

if TYPE_CHECKING:
    from .agent import AAISLangGraphAgent
    from .http.agui import agui_router
    from .http.app import create_app
    from .http.approvals import approvals_router
    from .http.inbox import inbox_router
    from .http.jwt_tokens import JwtSettings, jwt_authenticator
    from .http.security import (
        Authenticated,
        Authenticator,
        Security,
        bearer_token_authenticator,
        local_development_authenticator,
    )
    from .http.stock_endpoint import stock_endpoint_dependency
    from .http.websocket import websocket_router
    from .service import ApprovalService, ServiceSettings

SERVER_EXTRA = 'pip install "aais-langgraph[server]"'
"""What to run when a server name is used without the ``server`` extra installed."""
AUTH_EXTRA = 'pip install "aais-langgraph[server,auth]"'
"""What to run when the JWT login is used without the ``auth`` extra installed."""

_SERVER_NAMES = {
    "AAISLangGraphAgent": "agent",
    "ApprovalService": "service",
    "Authenticated": "http.security",
    "Authenticator": "http.security",
    "Security": "http.security",
    "agui_router": "http.agui",
    "approvals_router": "http.approvals",
    "bearer_token_authenticator": "http.security",
    "create_app": "http.app",
    "inbox_router": "http.inbox",
    "JwtSettings": "http.jwt_tokens",
    "jwt_authenticator": "http.jwt_tokens",
    "local_development_authenticator": "http.security",
    "ServiceSettings": "service",
    "stock_endpoint_dependency": "http.stock_endpoint",
    "websocket_router": "http.websocket",
}


def __getattr__(name: str) -> Any:
    """Import a server name on first use, naming the extra when its dependencies are missing."""
    module_name = _SERVER_NAMES.get(name)
    if module_name is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    extra = AUTH_EXTRA if module_name == "http.jwt_tokens" else SERVER_EXTRA
    try:
        module = importlib.import_module(f".{module_name}", __name__)
    except ImportError as missing:
        raise ImportError(
            f"aais_agui.{name} needs its extra: {extra}", name=missing.name
        ) from missing
    value = getattr(module, name)
    globals()[name] = value
    return value


__all__ = [
    "AAISLangGraphAgent",
    "ApprovalService",
    "Authenticated",
    "Authenticator",
    "JwtSettings",
    "Security",
    "ServiceSettings",
    "agui_router",
    "approvals_router",
    "bearer_token_authenticator",
    "create_app",
    "inbox_router",
    "interrupt_to_request",
    "jwt_authenticator",
    "local_development_authenticator",
    "parse_resume_entry",
    "request_to_interrupt",
    "resume_entry_for",
    "run_agent_input",
    "stock_endpoint_dependency",
    "websocket_router",
]

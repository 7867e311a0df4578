"""AAIS approvals surfaced to AG-UI frontends: interrupt mapping, an AG-UI server for
LangGraph graphs, and the AAIS HTTP/SSE presenter profile.

The mapping (:mod:`aais_agui.mapping`) needs only the core dependencies; the server
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
    from .agui_router import agui_router
    from .app import create_app
    from .approvals_router import approvals_router
    from .inbox_router import inbox_router
    from .security import (
        Authenticated,
        Authenticator,
        Security,
        bearer_token_authenticator,
        local_development_authenticator,
    )
    from .ws_router import websocket_router

SERVER_EXTRA = 'pip install "aais-langgraph[server]"'
"""What to run when a server name is used without the ``server`` extra installed."""

_SERVER_NAMES = {
    "AAISLangGraphAgent": "agent",
    "Authenticated": "security",
    "Authenticator": "security",
    "Security": "security",
    "agui_router": "agui_router",
    "approvals_router": "approvals_router",
    "bearer_token_authenticator": "security",
    "create_app": "app",
    "inbox_router": "inbox_router",
    "local_development_authenticator": "security",
    "websocket_router": "ws_router",
}


def __getattr__(name: str) -> Any:
    """Import a server name on first use, naming the extra when its dependencies are missing."""
    module_name = _SERVER_NAMES.get(name)
    if module_name is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        module = importlib.import_module(f".{module_name}", __name__)
    except ImportError as missing:
        raise ImportError(
            f"aais_agui.{name} needs the 'server' extra: {SERVER_EXTRA}", name=missing.name
        ) from missing
    value = getattr(module, name)
    globals()[name] = value
    return value


__all__ = [
    "AAISLangGraphAgent",
    "Authenticated",
    "Authenticator",
    "Security",
    "agui_router",
    "approvals_router",
    "bearer_token_authenticator",
    "create_app",
    "inbox_router",
    "interrupt_to_request",
    "local_development_authenticator",
    "parse_resume_entry",
    "request_to_interrupt",
    "resume_entry_for",
    "run_agent_input",
    "websocket_router",
]

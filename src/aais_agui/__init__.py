"""AAIS approvals surfaced to AG-UI frontends: interrupt mapping, an AG-UI server for
LangGraph graphs, and the AAIS HTTP/SSE presenter profile."""

try:  # the AG-UI server is an optional extra; say which one when it is missing
    import ag_ui_langgraph as _ag_ui_langgraph  # noqa: F401
    import fastapi as _fastapi  # noqa: F401
except ImportError as _missing:  # pragma: no cover - depends on the environment
    raise ImportError(
        "aais_agui needs the 'server' extra: pip install 'aais-langgraph[server]'"
    ) from _missing


from .agent import AAISLangGraphAgent
from .agui_router import agui_router
from .app import create_app
from .approvals_router import approvals_router
from .inbox_router import inbox_router
from .mapping import (
    APPROVAL_REASON,
    METADATA_KEY,
    TOOL_CALL_EXTENSION,
    TOOL_CALL_REASON,
    decided_response_schema,
    interrupt_to_request,
    parse_resume_entry,
    request_to_interrupt,
    resume_entry_for,
    run_agent_input,
)
from .resume import ResumeRejected, aresume_recorded, plan_resume
from .security import (
    Authenticated,
    Authenticator,
    Security,
    bearer_token_authenticator,
    local_development_authenticator,
)
from .sse import pending_snapshot
from .watcher import DecisionWatcher, watcher_lifespan
from .ws_router import websocket_router

__all__ = [
    "APPROVAL_REASON",
    "METADATA_KEY",
    "TOOL_CALL_EXTENSION",
    "TOOL_CALL_REASON",
    "AAISLangGraphAgent",
    "Authenticated",
    "Authenticator",
    "DecisionWatcher",
    "ResumeRejected",
    "Security",
    "agui_router",
    "approvals_router",
    "aresume_recorded",
    "bearer_token_authenticator",
    "create_app",
    "decided_response_schema",
    "inbox_router",
    "interrupt_to_request",
    "local_development_authenticator",
    "parse_resume_entry",
    "pending_snapshot",
    "plan_resume",
    "request_to_interrupt",
    "resume_entry_for",
    "run_agent_input",
    "watcher_lifespan",
    "websocket_router",
]

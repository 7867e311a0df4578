"""Tool-call approvals: a gated ToolNode, a ``create_agent`` middleware, and edits.

``ApprovalMiddleware`` needs the ``langchain`` extra and ``approval_deep_agent`` the
``deepagents`` extra; each is imported on first use, so the rest of this package works
with LangGraph alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..protocol.notes import NOTE_EXTENSION, NOTE_MAX_LENGTH, note_of, with_note
from .call_gate import (
    EDIT_EXTENSION,
    EDITABLE_EXTENSION,
    TOOL_CALL_ID_EXTENSION,
    ToolCallGate,
)
from .config import (
    STOP_LABEL,
    InterruptOn,
    SessionScopeDeriver,
    ToolApprovalConfig,
    ToolCallDescriber,
    ToolCallPredicate,
    command_session_scope,
)
from .declared import ACTION_KIND, TOOL_ACTION_METADATA, ToolAction
from .describe import describe_tool_call
from .edits import aedit_tool_call, edit_tool_call
from .messages import EDIT_NOTICE
from .page_tools import (
    PAGE_BINDING_KEY,
    PAGE_TOOL_EXTENSION,
    PageBinding,
    PageToolGate,
    page_tool_arguments,
    registry_revision,
)
from .tool_node import ApprovalToolNode, pending_tool_calls, route_tool_calls, tool_call_router

if TYPE_CHECKING:
    from .deep_agent import approval_deep_agent
    from .middleware import ApprovalMiddleware

__all__ = [
    "ACTION_KIND",
    "EDITABLE_EXTENSION",
    "EDIT_EXTENSION",
    "EDIT_NOTICE",
    "NOTE_EXTENSION",
    "NOTE_MAX_LENGTH",
    "PAGE_BINDING_KEY",
    "PAGE_TOOL_EXTENSION",
    "STOP_LABEL",
    "TOOL_ACTION_METADATA",
    "TOOL_CALL_ID_EXTENSION",
    "ApprovalMiddleware",
    "ApprovalToolNode",
    "InterruptOn",
    "PageBinding",
    "PageToolGate",
    "SessionScopeDeriver",
    "ToolAction",
    "ToolApprovalConfig",
    "ToolCallDescriber",
    "ToolCallGate",
    "ToolCallPredicate",
    "aedit_tool_call",
    "approval_deep_agent",
    "command_session_scope",
    "describe_tool_call",
    "edit_tool_call",
    "note_of",
    "page_tool_arguments",
    "pending_tool_calls",
    "registry_revision",
    "route_tool_calls",
    "tool_call_router",
    "with_note",
]


def __getattr__(name: str) -> Any:
    if name == "ApprovalMiddleware":
        try:
            from .middleware import ApprovalMiddleware
        except ImportError as error:  # pragma: no cover - depends on the environment
            raise ImportError(
                "ApprovalMiddleware needs LangChain: pip install 'aais-langgraph[langchain]'"
            ) from error
        return ApprovalMiddleware
    if name == "approval_deep_agent":
        try:
            from .deep_agent import approval_deep_agent
        except ImportError as error:  # pragma: no cover - depends on the environment
            raise ImportError(
                "approval_deep_agent needs deepagents: pip install 'aais-langgraph[deepagents]'"
            ) from error
        return approval_deep_agent
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

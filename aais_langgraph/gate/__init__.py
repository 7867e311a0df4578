"""Inside a run: pause a node on an AAIS request and continue only on a bound decision.

What drives a paused thread from outside a run (answering, listing, recovery) is
:mod:`aais_langgraph.threads`; its names are still found here for code written
against earlier versions (read lazily, so this layer never imports that one).
"""

from typing import Any

from .execution import (
    ExecutionUnknownError,
    areconcile_execution,
    execution_state,
    reconcile_execution,
    unknown_executions,
)
from .nodes import approval_key, approval_node, is_approved_for, requires_approval
from .request import RejectedResumeError, arequest_approval, request_approval
from .run_context import AUTHORITY_KEY, REQUESTER_KEY, MissingAuthorityError, find_authority

__all__ = [
    "AUTHORITY_KEY",
    "REQUESTER_KEY",
    "ExecutionUnknownError",
    "MissingAuthorityError",
    "RejectedResumeError",
    "approval_key",
    "approval_node",
    "areconcile_execution",
    "arequest_approval",
    "execution_state",
    "find_authority",
    "is_approved_for",
    "reconcile_execution",
    "request_approval",
    "requires_approval",
    "unknown_executions",
]

_DRIVING = frozenset(
    {
        "DEFAULT_LEASE_WAIT",
        "INTEGRITY_ERRORS_EXTENSION",
        "Cancellation",
        "IntegrityProblem",
        "ThreadView",
        "apending_approvals",
        "areconcile_checkpoints",
        "aresume_with_decisions",
        "astranded_threads",
        "pending_approvals",
        "reconcile_checkpoints",
        "resume_with_decisions",
        "run_config",
        "stranded_threads",
        "ThreadDriver",
    }
)


def __getattr__(name: str) -> Any:
    """The names that moved to :mod:`aais_langgraph.threads`."""
    if name in _DRIVING:
        import importlib

        return getattr(importlib.import_module("aais_langgraph.threads"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""Inside a run: pause a node on an AAIS request and continue only on a bound decision.

What drives a paused thread from outside a run (answering, listing, recovery) is
:mod:`aais_langgraph.threads`, a layer above this one.
"""

from .answer_sources import AUTHORIZED_ANSWERS_KEY, AuthorizedAnswer, AuthorizedAnswers
from .execution import (
    ExecutionUnknownError,
    areconcile_execution,
    execution_state,
    reconcile_execution,
    unknown_executions,
)
from .nodes import approval_key, approval_node, is_approved_for, requires_approval
from .request import RejectedResumeError, arequest_approval, request_approval
from .run_context import (
    AUTHORITY_KEY,
    REQUESTER_KEY,
    LedgerMismatchError,
    MissingAuthorityError,
    afind_authority,
    find_authority,
)

__all__ = [
    "AUTHORITY_KEY",
    "AUTHORIZED_ANSWERS_KEY",
    "REQUESTER_KEY",
    "AuthorizedAnswer",
    "AuthorizedAnswers",
    "ExecutionUnknownError",
    "LedgerMismatchError",
    "MissingAuthorityError",
    "RejectedResumeError",
    "afind_authority",
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

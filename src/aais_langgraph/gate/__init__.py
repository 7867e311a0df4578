"""Graph-side approvals: pause a node on an AAIS request, resume on a bound decision."""

from .execution import (
    ExecutionUnknownError,
    areconcile_execution,
    execution_state,
    reconcile_execution,
    unknown_executions,
)
from .inbox import cancel_thread, pending_approvals, resume_resolved, sweep_expired
from .nodes import approval_key, approval_node, is_approved_for, requires_approval
from .reconcile import (
    INTEGRITY_ERRORS_EXTENSION,
    IntegrityProblem,
    areconcile_checkpoints,
    reconcile_checkpoints,
)
from .recovery import resume_stranded, stranded_threads
from .request import RejectedResumeError, arequest_approval, request_approval
from .resume import Cancellation, aresume_with_decisions, resume_with_decisions
from .run_context import AUTHORITY_KEY

__all__ = [
    "AUTHORITY_KEY",
    "INTEGRITY_ERRORS_EXTENSION",
    "Cancellation",
    "ExecutionUnknownError",
    "IntegrityProblem",
    "RejectedResumeError",
    "approval_key",
    "approval_node",
    "areconcile_checkpoints",
    "areconcile_execution",
    "arequest_approval",
    "aresume_with_decisions",
    "cancel_thread",
    "execution_state",
    "is_approved_for",
    "pending_approvals",
    "reconcile_checkpoints",
    "reconcile_execution",
    "request_approval",
    "requires_approval",
    "resume_resolved",
    "resume_stranded",
    "resume_with_decisions",
    "stranded_threads",
    "sweep_expired",
    "unknown_executions",
]

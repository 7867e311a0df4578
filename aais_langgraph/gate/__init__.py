"""Graph-side approvals: pause a node on an AAIS request, resume on a bound decision."""

from .driver import DEFAULT_LEASE_WAIT, adrive, drive, run_config
from .execution import (
    ExecutionUnknownError,
    areconcile_execution,
    execution_state,
    reconcile_execution,
    unknown_executions,
)
from .inbox import (
    apending_approvals,
    aresume_resolved,
    cancel_thread,
    pending_approvals,
    resume_resolved,
    sweep_expired,
)
from .nodes import approval_key, approval_node, is_approved_for, requires_approval
from .reconcile import (
    INTEGRITY_ERRORS_EXTENSION,
    IntegrityProblem,
    areconcile_checkpoints,
    reconcile_checkpoints,
)
from .recovery import aresume_stranded, astranded_threads, resume_stranded, stranded_threads
from .request import RejectedResumeError, arequest_approval, request_approval
from .resume import Cancellation, aresume_with_decisions, resume_with_decisions
from .run_context import AUTHORITY_KEY, MissingAuthorityError, find_authority
from .views import ThreadView

__all__ = [
    "AUTHORITY_KEY",
    "DEFAULT_LEASE_WAIT",
    "INTEGRITY_ERRORS_EXTENSION",
    "Cancellation",
    "ExecutionUnknownError",
    "IntegrityProblem",
    "MissingAuthorityError",
    "RejectedResumeError",
    "ThreadView",
    "adrive",
    "apending_approvals",
    "approval_key",
    "approval_node",
    "areconcile_checkpoints",
    "areconcile_execution",
    "arequest_approval",
    "aresume_resolved",
    "aresume_stranded",
    "aresume_with_decisions",
    "astranded_threads",
    "cancel_thread",
    "drive",
    "execution_state",
    "find_authority",
    "is_approved_for",
    "pending_approvals",
    "reconcile_checkpoints",
    "reconcile_execution",
    "request_approval",
    "requires_approval",
    "resume_resolved",
    "resume_stranded",
    "resume_with_decisions",
    "run_config",
    "stranded_threads",
    "sweep_expired",
    "unknown_executions",
]

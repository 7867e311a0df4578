"""AAIS 1.0 approvals for LangGraph: a node pauses on an ``approval.requested``
interrupt and continues only on a decision bound by digest to the exact action.

The top level holds what a graph author writes first; the rest lives in its layer:
envelope models and builders in :mod:`aais_langgraph.protocol`, ledgers and
``open_ledger`` in :mod:`aais_langgraph.ledger`, constraints, keys and leases in
:mod:`aais_langgraph.authority`, what runs inside a node in
:mod:`aais_langgraph.gate`, what drives paused threads from outside a run
(:class:`ThreadDriver` and its housekeeping and crash recovery methods:
``sweep_expired``, ``cancel_thread``, ``resume_stranded``, ...) in :mod:`aais_langgraph.threads`,
tool middleware in :mod:`aais_langgraph.tools`.
"""

from .authority import (
    ApprovalAuthority,
    ApprovalPolicy,
    LeaseHeldError,
    LedgerIntegrityError,
    PolicyVerdict,
    UnknownRequestError,
)
from .gate import (
    ExecutionUnknownError,
    RejectedResumeError,
    approval_node,
    arequest_approval,
    request_approval,
    requires_approval,
)
from .ledger import InMemoryLedger, Ledger, SqliteLedger
from .protocol import (
    AAISValidationError,
    ApprovalRequested,
    build_decision,
    build_decision_for_request,
)
from .threads import (
    Cancellation,
    ThreadDriver,
    aresume_with_decisions,
    pending_approvals,
    resume_with_decisions,
)

__version__ = "0.1.0"

__all__ = [
    "AAISValidationError",
    "ApprovalAuthority",
    "ApprovalPolicy",
    "ApprovalRequested",
    "Cancellation",
    "ExecutionUnknownError",
    "InMemoryLedger",
    "LeaseHeldError",
    "Ledger",
    "LedgerIntegrityError",
    "PolicyVerdict",
    "RejectedResumeError",
    "SqliteLedger",
    "ThreadDriver",
    "UnknownRequestError",
    "approval_node",
    "arequest_approval",
    "aresume_with_decisions",
    "build_decision",
    "build_decision_for_request",
    "pending_approvals",
    "request_approval",
    "requires_approval",
    "resume_with_decisions",
]

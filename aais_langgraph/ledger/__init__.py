"""The authority's durable state: the ledger contract, its backends and the audit chain.

Backends: :class:`InMemoryLedger` (one process) and :class:`SqliteLedger` (a file
shared by threads and processes; its tables are created on first use), both
standard-library only, and ``postgres.PostgresLedger`` (the ``postgres`` extra;
explicit ``setup()``). The two SQL backends share one implementation (``_sql``).
"""

from .audit import GENESIS_HASH, AuditVerification, chain_hash, verify_audit
from .base import (
    AuditEntry,
    AuditKind,
    Grant,
    JsonDict,
    Lease,
    Ledger,
    LedgerContents,
    PendingRow,
    ResolutionWrite,
    StoredRequest,
    StoredResolution,
)
from .crosscheck import verify_contents
from .executions import Execution, ExecutionState
from .integrity import LedgerIntegrityError
from .memory import InMemoryLedger
from .opening import NotALedgerError, is_postgres_url, open_ledger
from .resume_work import ResumeWork, ResumeWorkState
from .sqlite import SqliteLedger

__all__ = [
    "GENESIS_HASH",
    "AuditEntry",
    "AuditKind",
    "AuditVerification",
    "Execution",
    "ExecutionState",
    "Grant",
    "InMemoryLedger",
    "JsonDict",
    "Lease",
    "Ledger",
    "LedgerContents",
    "LedgerIntegrityError",
    "NotALedgerError",
    "PendingRow",
    "ResolutionWrite",
    "ResumeWork",
    "ResumeWorkState",
    "SqliteLedger",
    "StoredRequest",
    "StoredResolution",
    "chain_hash",
    "is_postgres_url",
    "open_ledger",
    "verify_audit",
    "verify_contents",
]

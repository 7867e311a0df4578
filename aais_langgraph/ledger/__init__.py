"""The authority's durable state: the ledger contract, its backends and the audit chain.

Backends: :class:`InMemoryLedger` (one process) and :class:`SqliteLedger` (a file
shared by threads and processes; its tables are created on first use), both
standard-library only, and ``postgres.PostgresLedger`` (the ``postgres`` extra;
explicit ``setup()``). The two SQL backends share one implementation (``_sql``).
"""

from .audit import GENESIS_HASH, AuditVerification, chain_hash, verify_audit
from .base import Ledger, LedgerVersionError, NotALedgerError
from .crosscheck import verify_contents
from .deliveries import Delivery, DeliveryPlan, DeliveryState, retry_delivery
from .executions import Execution, ExecutionState
from .integrity import LedgerIntegrityError
from .memory import InMemoryLedger
from .opening import is_postgres_url, ledger_location, open_ledger, same_ledger
from .outbox import DELIVERY, FOLLOW_UP, RESUME, Work, WorkState, shown_states
from .records import (
    AuditEntry,
    AuditKind,
    Grant,
    JsonDict,
    Lease,
    LedgerContents,
    PendingRow,
    ResolutionWrite,
    StoredRequest,
    StoredResolution,
    ThreadRecord,
)
from .resume_work import ResumeWork, ResumeWorkState
from .retention import CompactedRequestError, CompactionReport, RetentionPolicy
from .selection import EVERY_ROW, ActionPattern, PendingSelection
from .sqlite import SqliteLedger
from .witness import (
    FileWitness,
    HttpWitness,
    Witness,
    WitnessCheck,
    WitnessedTip,
    WitnessError,
    check_witness,
    check_witnessed,
    open_witness,
    publish_compaction,
    publish_tip,
)

__all__ = [
    "DELIVERY",
    "EVERY_ROW",
    "FOLLOW_UP",
    "GENESIS_HASH",
    "RESUME",
    "ActionPattern",
    "AuditEntry",
    "AuditKind",
    "AuditVerification",
    "CompactedRequestError",
    "CompactionReport",
    "Delivery",
    "DeliveryPlan",
    "DeliveryState",
    "Execution",
    "ExecutionState",
    "FileWitness",
    "Grant",
    "HttpWitness",
    "InMemoryLedger",
    "JsonDict",
    "Lease",
    "Ledger",
    "LedgerContents",
    "LedgerIntegrityError",
    "LedgerVersionError",
    "NotALedgerError",
    "PendingRow",
    "PendingSelection",
    "ResolutionWrite",
    "ResumeWork",
    "ResumeWorkState",
    "RetentionPolicy",
    "SqliteLedger",
    "StoredRequest",
    "StoredResolution",
    "ThreadRecord",
    "Witness",
    "WitnessCheck",
    "WitnessError",
    "WitnessedTip",
    "Work",
    "WorkState",
    "chain_hash",
    "check_witness",
    "check_witnessed",
    "is_postgres_url",
    "ledger_location",
    "open_ledger",
    "open_witness",
    "publish_compaction",
    "publish_tip",
    "retry_delivery",
    "same_ledger",
    "shown_states",
    "verify_audit",
    "verify_contents",
]

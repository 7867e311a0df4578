"""AAIS 1.0 protocol core: typed envelopes, strict parsing and the action digest.

Imports neither LangGraph nor AG-UI.
"""

from .answer_schema import decided_schema
from .base import AAISModel
from .builders import (
    AAIS_VERSION,
    DEFAULT_CHOICES,
    DEFAULT_EXPIRY,
    build_decision,
    build_decision_for_request,
    build_request,
    envelope_document,
    new_id,
)
from .digest import action_digest, canonical_json, same_action, sha256_digest
from .envelopes import (
    AnyEnvelope,
    ApprovalActivity,
    ApprovalDecided,
    ApprovalRequested,
    ApprovalResolved,
    ApprovalSnapshot,
    Envelope,
)
from .errors import AAISValidationError, join_pointer
from .extensions import EXTENSION_NAMESPACE, RESOLVED_BY_EXTENSION, TOOL_CALL_ID_EXTENSION
from .ids import DERIVED_ID_PREFIX, MAX_ID_LENGTH, id_for, is_id
from .ijson import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_DEPTH,
    MAX_SAFE_INTEGER,
    check_ijson,
    check_unique_keys,
    loads_strict,
)
from .notes import decision_note, note_of, with_note
from .parsing import parse_envelope
from .parts import (
    Action,
    Activity,
    Actor,
    Choice,
    Decision,
    DecisionKind,
    Origin,
    Outcome,
    Presentation,
    Request,
    Resolution,
    Risk,
    RiskLevel,
    Scope,
    Snapshot,
)
from .patterns import DIGEST_PATTERN
from .refusals import (
    REFUSALS,
    Refusal,
    RefusalEntry,
    agui_refusal,
    http_refusal,
    ndjson_refusal,
    outcome_refusal,
    websocket_close_code,
    websocket_refusal,
)
from .texts import envelope_text, request_text
from .timestamps import format_timestamp, parse_timestamp, utc_now

__all__ = [
    "AAIS_VERSION",
    "DEFAULT_CHOICES",
    "DEFAULT_EXPIRY",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_DEPTH",
    "DERIVED_ID_PREFIX",
    "DIGEST_PATTERN",
    "EXTENSION_NAMESPACE",
    "MAX_ID_LENGTH",
    "MAX_SAFE_INTEGER",
    "REFUSALS",
    "RESOLVED_BY_EXTENSION",
    "TOOL_CALL_ID_EXTENSION",
    "AAISModel",
    "AAISValidationError",
    "Action",
    "Activity",
    "Actor",
    "AnyEnvelope",
    "ApprovalActivity",
    "ApprovalDecided",
    "ApprovalRequested",
    "ApprovalResolved",
    "ApprovalSnapshot",
    "Choice",
    "Decision",
    "DecisionKind",
    "Envelope",
    "Origin",
    "Outcome",
    "Presentation",
    "Refusal",
    "RefusalEntry",
    "Request",
    "Resolution",
    "Risk",
    "RiskLevel",
    "Scope",
    "Snapshot",
    "action_digest",
    "agui_refusal",
    "build_decision",
    "build_decision_for_request",
    "build_request",
    "canonical_json",
    "check_ijson",
    "check_unique_keys",
    "decided_schema",
    "decision_note",
    "envelope_document",
    "envelope_text",
    "format_timestamp",
    "http_refusal",
    "id_for",
    "is_id",
    "join_pointer",
    "loads_strict",
    "ndjson_refusal",
    "new_id",
    "note_of",
    "outcome_refusal",
    "parse_envelope",
    "parse_timestamp",
    "request_text",
    "same_action",
    "sha256_digest",
    "utc_now",
    "websocket_close_code",
    "websocket_refusal",
    "with_note",
]

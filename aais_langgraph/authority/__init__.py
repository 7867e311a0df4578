"""The approval authority: the AAIS decision state machine, grants, policy and leases."""

from ..ledger import LedgerIntegrityError
from .authority import ApprovalAuthority
from .constraints import KNOWN_KEYS, constraints_match, explain_constraints
from .errors import LeaseHeldError, UnknownRequestError
from .events import EventFollower, ReplyStream
from .keys import AUTHORITY_KEY_FILE_VAR, AUTHORITY_KEY_VAR, load_authority_key
from .leases import DEFAULT_LEASE_TTL, arun_lease, new_holder, run_lease
from .outcomes import DEFAULT_STREAM, TERMINAL
from .policy import ApprovalPolicy, AskEveryTime, PolicyVerdict
from .reads import Clock
from .standing import EventPage, Screening

__all__ = [
    "AUTHORITY_KEY_FILE_VAR",
    "AUTHORITY_KEY_VAR",
    "DEFAULT_LEASE_TTL",
    "DEFAULT_STREAM",
    "KNOWN_KEYS",
    "TERMINAL",
    "ApprovalAuthority",
    "ApprovalPolicy",
    "AskEveryTime",
    "Clock",
    "EventFollower",
    "EventPage",
    "LeaseHeldError",
    "LedgerIntegrityError",
    "PolicyVerdict",
    "ReplyStream",
    "Screening",
    "UnknownRequestError",
    "arun_lease",
    "constraints_match",
    "explain_constraints",
    "load_authority_key",
    "new_holder",
    "run_lease",
]

"""The approval authority: the AAIS decision state machine, grants, policy and leases."""

from ..ledger import LedgerIntegrityError
from ..ledger.holders import HolderOrigin, holder_is_dead, holder_origin, new_holder
from .authority import ApprovalAuthority, Clock
from .constraints import KNOWN_KEYS, constraints_match, explain_constraints
from .errors import LeaseHeldError, UnknownRequestError
from .events import EventFollower, ReplyStream
from .judgement import TERMINAL, Judgement, judge
from .keys import AUTHORITY_KEY_FILE_VAR, AUTHORITY_KEY_VAR, load_authority_key
from .leases import DEFAULT_LEASE_TTL, arun_lease, release_dead_holder, run_lease
from .limits import RequestLimitError, RequestLimits
from .policy import ApprovalPolicy, AskEveryTime, PolicyVerdict
from .resolutions import DEFAULT_STREAM
from .screening import EventPage, Screening

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
    "HolderOrigin",
    "Judgement",
    "LeaseHeldError",
    "LedgerIntegrityError",
    "PolicyVerdict",
    "ReplyStream",
    "RequestLimitError",
    "RequestLimits",
    "Screening",
    "UnknownRequestError",
    "arun_lease",
    "constraints_match",
    "explain_constraints",
    "holder_is_dead",
    "holder_origin",
    "judge",
    "load_authority_key",
    "new_holder",
    "release_dead_holder",
    "run_lease",
]

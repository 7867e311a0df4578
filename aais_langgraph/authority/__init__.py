"""The approval authority: the AAIS decision state machine, grants, policy and leases."""

from typing import TYPE_CHECKING, Any

from ..ledger import LedgerIntegrityError
from ..ledger.holders import HolderOrigin, holder_is_dead, holder_origin, new_holder
from .access import Access
from .access_policy import AccessPolicy, load_access_policy, read_policy_file
from .authority import ApprovalAuthority, Clock
from .authorization import (
    ADMINISTRATOR,
    FORBIDDEN,
    AllowAuthenticated,
    Authorizer,
    Escalations,
    ForbiddenError,
    GroupDecisions,
    Permission,
    Principal,
    Resource,
    Verb,
    ViewSelector,
    checked_principal,
)
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
from .thread_access import HIDDEN_REQUEST, ThreadAccess

if TYPE_CHECKING:
    from .cedar import CedarAuthorizer


def __getattr__(name: str) -> Any:
    """``CedarAuthorizer`` on first use (it needs the ``auth`` extra's ``cedarpy``)."""
    if name == "CedarAuthorizer":
        from .cedar import CedarAuthorizer

        return CedarAuthorizer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ADMINISTRATOR",
    "AUTHORITY_KEY_FILE_VAR",
    "AUTHORITY_KEY_VAR",
    "DEFAULT_LEASE_TTL",
    "DEFAULT_STREAM",
    "FORBIDDEN",
    "HIDDEN_REQUEST",
    "KNOWN_KEYS",
    "TERMINAL",
    "Access",
    "AccessPolicy",
    "AllowAuthenticated",
    "ApprovalAuthority",
    "ApprovalPolicy",
    "AskEveryTime",
    "Authorizer",
    "CedarAuthorizer",
    "Clock",
    "Escalations",
    "EventFollower",
    "EventPage",
    "ForbiddenError",
    "GroupDecisions",
    "HolderOrigin",
    "Judgement",
    "LeaseHeldError",
    "LedgerIntegrityError",
    "Permission",
    "PolicyVerdict",
    "Principal",
    "ReplyStream",
    "RequestLimitError",
    "RequestLimits",
    "Resource",
    "Screening",
    "ThreadAccess",
    "UnknownRequestError",
    "Verb",
    "ViewSelector",
    "arun_lease",
    "checked_principal",
    "constraints_match",
    "explain_constraints",
    "holder_is_dead",
    "holder_origin",
    "judge",
    "load_access_policy",
    "load_authority_key",
    "new_holder",
    "read_policy_file",
    "release_dead_holder",
    "run_lease",
]

"""The approval authority: the AAIS decision state machine, grants, policy and leases."""

from .authority import ApprovalAuthority
from .constraints import KNOWN_KEYS, constraints_match, explain_constraints
from .errors import LeaseHeldError, UnknownRequestError
from .leases import DEFAULT_LEASE_TTL, arun_lease, new_holder, run_lease
from .outcomes import TERMINAL
from .policy import ApprovalPolicy, AskEveryTime, PolicyVerdict
from .standing import EventPage, Screening
from .state_machine import Clock

__all__ = [
    "DEFAULT_LEASE_TTL",
    "KNOWN_KEYS",
    "TERMINAL",
    "ApprovalAuthority",
    "ApprovalPolicy",
    "AskEveryTime",
    "Clock",
    "EventPage",
    "LeaseHeldError",
    "PolicyVerdict",
    "Screening",
    "UnknownRequestError",
    "arun_lease",
    "constraints_match",
    "explain_constraints",
    "new_holder",
    "run_lease",
]

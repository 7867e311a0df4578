"""AAIS outcomes as AAE approval outcomes: a total mapping in which only ``approved`` grants."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = ["AAE_OUTCOMES", "DENIED", "GRANTED", "TIMED_OUT", "aae_outcome"]

GRANTED = "granted"
DENIED = "denied"
TIMED_OUT = "timed_out"

#: The AAIS outcomes that have an AAE counterpart of their own. Every other
#: outcome (``cancelled``, ``stale``, ``conflict``, ``invalid``, and any added
#: later) is a denial: AAE's lifecycle treats a string it does not know as a grant.
AAE_OUTCOMES: Mapping[str, str] = MappingProxyType(
    {"approved": GRANTED, "denied": DENIED, "expired": TIMED_OUT}
)


def aae_outcome(outcome: object) -> str:
    """The AAE outcome (``granted``/``denied``/``timed_out``) of an AAIS resolution outcome.

    Total: anything that is not exactly ``approved`` or ``expired`` maps to ``denied``.
    """
    if type(outcome) is not str:
        return DENIED
    return AAE_OUTCOMES.get(outcome, DENIED)

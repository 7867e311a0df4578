"""The parts of the AAE SDK (``aae-protocol``) the bridge uses, imported in one place.

The SDK is the optional ``aae`` extra (Python >= 3.11, and ``cryptography<46``, so it
cannot share an environment with the ``dev`` extra); importing the bridge without it
says so instead of failing on a bare module name.
"""

from __future__ import annotations

try:
    from aae.errors import ApprovalDeniedError, ApprovalTimeoutError
    from aae.lifecycle import LifecycleClient, LifecycleResult, compute_approved_steps_hash
    from aae.models import BlastRadius, PolicyDecision, Preview, Proposal
except ImportError as _missing:  # pragma: no cover - depends on the environment
    raise ImportError(
        "aais_langgraph.aae needs the 'aae' extra (Python >= 3.11): "
        "pip install 'aais-langgraph[aae]'"
    ) from _missing

__all__ = [
    "ApprovalDeniedError",
    "ApprovalTimeoutError",
    "BlastRadius",
    "LifecycleClient",
    "LifecycleResult",
    "PolicyDecision",
    "Preview",
    "Proposal",
    "compute_approved_steps_hash",
]

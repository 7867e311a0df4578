"""AAE (Accountable Agentic Execution) interop: AAE's APPROVE step through an AAIS authority.

Needs the ``aae`` extra (``aae-protocol``, Python >= 3.11). ``import aais_langgraph``
never imports this package or the AAE SDK.
"""

from .action import ACTION_KIND, aae_request_id, astored_proposal, proposal_action, stored_proposal
from .delivery import CLAIM_PREFIX, AAISApproval, ApprovalAlreadyUsedError, recorded_approver
from .outcomes import AAE_OUTCOMES, DENIED, GRANTED, TIMED_OUT, aae_outcome
from .restart import areattach

__all__ = [
    "AAE_OUTCOMES",
    "ACTION_KIND",
    "CLAIM_PREFIX",
    "DENIED",
    "GRANTED",
    "TIMED_OUT",
    "AAISApproval",
    "ApprovalAlreadyUsedError",
    "aae_outcome",
    "aae_request_id",
    "areattach",
    "astored_proposal",
    "proposal_action",
    "recorded_approver",
    "stored_proposal",
]

"""Re-attaching an AAE execution to its approval after the process that waited is gone.

AAE waits for an approval in memory, inside ``LifecycleClient.execute``; the AAIS
request it waits for is in the ledger and survives a restart, still answerable
(CLI, HTTP, inbox). Running the same proposal again asks for the same request id,
so the new run picks up the recorded resolution, or keeps waiting on the same
request, and never raises a second one.
"""

from __future__ import annotations

from typing import Any

from ..authority import ApprovalAuthority
from ._sdk import LifecycleClient, LifecycleResult
from .action import astored_proposal

__all__ = ["areattach"]


async def areattach(
    client: LifecycleClient,
    authority: ApprovalAuthority,
    request_id: str,
    *,
    extra_context: dict[str, Any] | None = None,
    step_parameters: list[dict[str, Any]] | None = None,
) -> LifecycleResult:
    """Run the proposal of a stored bridge request again, answered by its recorded resolution.

    ``client`` must deliver approvals with :class:`~aais_langgraph.aae.AAISApproval`
    over ``authority``'s ledger. The proposal is rebuilt from the request's
    digest-bound arguments (:func:`~aais_langgraph.aae.stored_proposal`); AAE
    then walks its lifecycle again (preview, policy, approval, re-evaluation,
    token, commit), and its APPROVE step finds the stored request. A grant that
    an earlier run already received raises
    :class:`~aais_langgraph.aae.ApprovalAlreadyUsedError` instead of running twice.

    Args:
        client: the AAE lifecycle client delivering approvals with
            :class:`~aais_langgraph.aae.AAISApproval`.
        authority: the authority whose ledger holds the request.
        request_id: the stored bridge request.
        extra_context: context for AAE's lifecycle, beside the rebuilt proposal.
        step_parameters: AAE's step parameters for the run.
    """
    proposal = await astored_proposal(authority, request_id)
    result: LifecycleResult = await client.execute(
        proposal, extra_context=extra_context, step_parameters=step_parameters
    )
    return result

"""An AAE proposal as an AAIS action, bound by digest to exactly what AAE's token binds.

AAE mints a capability token over the proposal, its ``approved_steps_hash`` and the
granted strictness mode. The AAIS action carries the same three in its arguments,
so the AAIS ``action_digest`` a human approves covers what the token will allow;
the request id is derived from that digest, so running the same proposal again
(after a restart) finds the stored request instead of raising a new one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..authority import ApprovalAuthority, UnknownRequestError
from ..protocol import AAISValidationError, Action, ApprovalRequested, action_digest, same_action
from ._sdk import Proposal, compute_approved_steps_hash

__all__ = [
    "ACTION_KIND",
    "aae_request_id",
    "astored_proposal",
    "proposal_action",
    "stored_proposal",
]

#: ``action.kind`` of every request the bridge raises.
ACTION_KIND = "aae.proposal"
_ID_PREFIX = "aae_"
_STRICTNESS = "strict_literal"


def proposal_action(proposal: Proposal, *, strictness: str = _STRICTNESS) -> Action:
    """The AAIS action a human approves for ``proposal`` under ``strictness``.

    ``arguments`` holds the whole proposal (its JSON form), the
    ``approved_steps_hash`` AAE's token will carry, and the strictness mode the
    token will carry. Raises :class:`AAISValidationError` for a proposal that is
    not I-JSON (AAE refuses such steps too).
    """
    document = proposal.model_dump(mode="json")
    tools = sorted({step.tool for step in proposal.steps})
    summary = f"AAE proposal by {proposal.agent_id}: {proposal.intent}"
    return Action.from_data(
        {
            "kind": ACTION_KIND,
            "name": "aae.execute",
            "summary": summary[:1000] or "AAE proposal",
            "arguments": {
                "proposal": document,
                "approved_steps_hash": str(compute_approved_steps_hash(proposal.steps)),
                "strictness": strictness,
            },
            "resource": f"aae:{proposal.tenant_id}/{proposal.agent_id}/{proposal.proposal_id}"[
                :4096
            ],
            "effects": [f"runs tool {tool}"[:1000] for tool in tools[:100]],
        },
        pointer="/action",
    )


def request_id_for(action: Action) -> str:
    """The deterministic request id of an action: ``aae_`` + the hex of its digest."""
    return _ID_PREFIX + action_digest(action).removeprefix("sha256:")


def aae_request_id(proposal: Proposal, *, strictness: str = _STRICTNESS) -> str:
    """The AAIS request id the bridge uses for ``proposal`` (same proposal, same id)."""
    return request_id_for(proposal_action(proposal, strictness=strictness))


def _proposal_of(requested: ApprovalRequested) -> Proposal:
    request = requested.request
    action = request.action
    if action.kind != ACTION_KIND:
        raise AAISValidationError("/request/action/kind", f"not an AAE request ({ACTION_KIND})")
    arguments: Mapping[str, Any] = action.arguments
    document = arguments.get("proposal")
    if not isinstance(document, Mapping):
        raise AAISValidationError("/request/action/arguments/proposal", "must be an object")
    try:
        proposal: Proposal = Proposal.model_validate(dict(document))
    except ValueError:
        raise AAISValidationError(
            "/request/action/arguments/proposal", "not a valid AAE proposal"
        ) from None
    strictness = arguments.get("strictness")
    if not isinstance(strictness, str):
        raise AAISValidationError("/request/action/arguments/strictness", "must be a string")
    rebuilt = proposal_action(proposal, strictness=strictness)
    if not same_action(request.action_digest, rebuilt) or request_id_for(rebuilt) != request.id:
        raise AAISValidationError(
            "/request/action/arguments", "does not rebuild the request's digest and id"
        )
    return proposal


def stored_proposal(authority: ApprovalAuthority, request_id: str) -> Proposal:
    """The AAE proposal a stored bridge request was raised for, rebuilt from its arguments.

    The proposal is read back from the digest-bound action and checked to rebuild
    the same digest and id, so a restarted host can run it again
    (:func:`~aais_langgraph.aae.areattach`) without keeping proposals of its own.
    """
    requested = authority.get_request(request_id)
    if requested is None:
        raise UnknownRequestError("/request_id")
    return _proposal_of(requested)


async def astored_proposal(authority: ApprovalAuthority, request_id: str) -> Proposal:
    """Async twin of :func:`stored_proposal`."""
    requested = await authority.aget_request(request_id)
    if requested is None:
        raise UnknownRequestError("/request_id")
    return _proposal_of(requested)

"""Screening: settling an action by policy or a standing grant, without asking anyone."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ..ledger import Grant
from ..protocol import Action, ApprovalResolved, action_digest, new_id
from ..protocol.extensions import EXTENSION_NAMESPACE
from .policy import PolicyVerdict
from .resolutions import resolution_audit, resolution_envelope

if TYPE_CHECKING:
    from .authority import ApprovalAuthority


@dataclass(frozen=True)
class Screening:
    """What happens to a new action before any human is asked.

    ``resolved`` is set when policy or a live grant settles the action outright;
    otherwise ``verdict`` carries the policy's risk, choices and expiry for the request.
    """

    resolved: ApprovalResolved | None
    verdict: PolicyVerdict


@dataclass(frozen=True)
class EventPage:
    """Events after a sequence; ``gap`` is True when some were compacted away."""

    events: list[dict[str, Any]]
    gap: bool
    last_sequence: int


@dataclass(frozen=True)
class StandingAction:
    """The id and digest a standing resolution is about (no request is stored)."""

    id: str
    action_digest: str


def standing_resolution(
    authority: ApprovalAuthority,
    action: Action,
    *,
    outcome: Literal["approved", "denied"],
    message: str,
    grant: Grant | None,
) -> ApprovalResolved:
    """Resolve an action without a request: audited, never published as pending.

    The resolution names the grant (or the policy) in its extensions.

    Args:
        authority: the authority that records it.
        action: the action resolved.
        outcome: ``approved`` (a grant or the policy allowed it) or ``denied``.
        message: why, in words that echo no value.
        grant: the grant that covered it, if any.
    """
    now = authority.clock()
    # No request is stored for a standing resolution; it names a fresh id and the digest.
    bound = StandingAction(id=new_id("apr"), action_digest=action_digest(action))
    extensions: dict[str, Any] = {}
    if grant is not None:
        extensions[EXTENSION_NAMESPACE + "grant"] = {
            "grant_id": grant.grant_id,
            "request_id": grant.request_id,
            "scope": grant.scope,
        }
    else:
        extensions[EXTENSION_NAMESPACE + "policy"] = {"verdict": outcome}
    resolved = resolution_envelope(
        bound,
        outcome=outcome,
        message=message[:2000],
        now=now,
        sequence=authority.ledger.last_sequence(),
        stream=authority.stream,
        extensions=extensions,
    )
    authority.ledger.append_audit("resolved", resolution_audit(resolved, action_name=action.name))
    return resolved

"""``AAISApproval``: AAE's APPROVE step answered through an AAIS approval authority.

AAE calls ``request_and_wait`` and waits in memory. The bridge stores an AAIS
request in the authority's ledger (so it appears in ``pending_approvals``, the
CLI, the SSE stream and the inbox like any other, with no LangGraph thread) and
waits for its one recorded resolution. Only an ``approved`` resolution for the
digest of the action computed now grants; the approver is the actor the
authority recorded from the authenticated channel, never something the caller
says. A grant is handed out once: it takes a permanent execution claim in the
ledger, so re-running an execution that already received its grant refuses
instead of running the steps a second time.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from ..authority import ApprovalAuthority, new_holder
from ..gate.run_context import safe_id
from ..protocol import (
    Action,
    ApprovalRequested,
    ApprovalResolved,
    RiskLevel,
    action_digest,
    build_request,
    parse_timestamp,
    same_action,
)
from ._sdk import PolicyDecision, Preview, Proposal
from .action import ACTION_KIND, proposal_action, request_id_for
from .outcomes import DENIED, GRANTED, TIMED_OUT, aae_outcome

__all__ = ["CLAIM_PREFIX", "AAISApproval", "ApprovalAlreadyUsedError", "recorded_approver"]

#: Ledger lease name prefix of the execution claim an AAE grant takes.
CLAIM_PREFIX = "aae-claim:"
#: A claim never expires in practice (a lease needs a finite lifetime): 100 years.
_CLAIM_TTL = 100 * 365.25 * 24 * 3600.0
_EXTENSION = "aais-langgraph.org/aae"
_RISK: Mapping[str, RiskLevel] = {
    "read_only": "low",
    "single_service": "medium",
    "single_host": "medium",
    "multi_host": "high",
    "irreversible": "critical",
}


class ApprovalAlreadyUsedError(RuntimeError):
    """The approval was already handed to an AAE execution; it is not handed out twice.

    The earlier execution may have run its steps or may have died while running
    them: a human reconciles, and a new proposal asks again.
    """

    def __init__(self, request_id: str) -> None:
        super().__init__(
            f"approval {request_id} was already granted to an AAE execution; "
            "not granting it again (raise a new proposal to ask again)"
        )
        self.request_id = request_id


class AAISApproval:
    """An AAE ``ApprovalDelivery`` whose approvals live in an :class:`ApprovalAuthority`.

    ``session_id`` groups the requests in presenters (default: the proposal's
    tenant). ``poll_interval`` is how often the ledger is read while waiting; a
    decision recorded by any process (the HTTP decisions endpoint, the CLI)
    ends the wait. The request expires after AAE's ``timeout_seconds`` by the
    authority's clock, and is then resolved ``expired`` (AAE: ``timed_out``).
    Cancelling the waiting task leaves the request pending: running the same
    proposal again re-attaches to it. The authority's request policy and grants
    are not consulted (AAE's policy already asked for a human); its decision-time
    veto (``ApprovalPolicy.on_decision``) applies as to any decision.
    """

    def __init__(
        self,
        authority: ApprovalAuthority,
        *,
        session_id: str | None = None,
        poll_interval: float = 0.5,
    ) -> None:
        if not poll_interval > 0:
            raise ValueError("poll_interval: must be positive")
        self.authority = authority
        self.session_id = session_id
        self.poll_interval = poll_interval

    async def request_and_wait(
        self,
        *,
        proposal: Proposal,
        preview: Preview,
        decision: PolicyDecision,
        timeout_seconds: int,
    ) -> tuple[str, str | None]:
        """AAE's APPROVE step: ``(outcome, approver_id)`` from the recorded resolution.

        Args:
            proposal: AAE's proposal: what would run.
            preview: AAE's preview of its effect.
            decision: AAE's policy decision that asked for approval.
            timeout_seconds: how long the request stays answerable.
        """
        action = proposal_action(proposal, strictness=str(decision.strictness))
        requested = await asyncio.to_thread(
            self._open, action, proposal, preview, decision, timeout_seconds
        )
        resolved = await self._wait(requested)
        return await asyncio.to_thread(self._verdict, requested, resolved, action)

    # -- steps -----------------------------------------------------------------------

    def _open(
        self,
        action: Action,
        proposal: Proposal,
        preview: Preview,
        decision: PolicyDecision,
        timeout_seconds: int,
    ) -> ApprovalRequested:
        """The stored request for this action, raised now unless a run raised it before."""
        authority = self.authority
        request_id = request_id_for(action)
        stored = authority.get_request(request_id)
        if stored is not None:
            return stored
        if isinstance(timeout_seconds, bool) or not timeout_seconds > 0:
            raise ValueError("timeout_seconds: must be positive")
        blast = str(preview.aggregate_blast_radius.value)
        reasons = [f"AAE blast radius: {blast}"[:1000]]
        if decision.reason:
            reasons.append(f"AAE policy: {decision.reason}"[:1000])
        origin = {
            "harness": authority.harness,
            "session_id": safe_id(self.session_id or proposal.tenant_id, fallback="aae"),
            "agent_id": safe_id(proposal.agent_id),
            "run_id": safe_id(proposal.proposal_id),
        }
        requested = build_request(
            action,
            origin={k: v for k, v in origin.items() if v is not None},
            risk={"level": _RISK.get(blast, "critical"), "reasons": reasons},
            request_id=request_id,
            created_at=authority.clock(),
            expires_in=timedelta(seconds=timeout_seconds),
            extensions={_EXTENSION: _presentation(preview, decision)},
        )
        return authority.add(requested, context={"aae_proposal_id": proposal.proposal_id})

    async def _wait(self, requested: ApprovalRequested) -> ApprovalResolved:
        """The request's recorded resolution, recording ``expired`` once it is due."""
        request = requested.request
        expires_at = parse_timestamp(request.expires_at or request.created_at)
        while True:
            recorded = await self.authority.aget_resolution(request.id)
            if recorded is not None:
                return recorded
            remaining = (expires_at - self.authority.clock()).total_seconds()
            if remaining <= 0:
                # Records ``expired`` unless a decision won meanwhile; returns the winner.
                return await self.authority.aexpire(request.id)
            await asyncio.sleep(min(self.poll_interval, remaining))

    def _verdict(
        self, requested: ApprovalRequested, resolved: ApprovalResolved, action: Action
    ) -> tuple[str, str | None]:
        resolution = resolved.resolution
        outcome = aae_outcome(resolution.outcome)
        if outcome == TIMED_OUT:
            return TIMED_OUT, None
        approver = recorded_approver(self.authority, resolved)
        if outcome == GRANTED:
            digest = action_digest(action)
            if (
                requested.request.action.kind != ACTION_KIND
                or not same_action(requested.request.action_digest, digest)
                or not same_action(resolution.action_digest, digest)
                or approver is None
            ):
                return DENIED, approver
            claim = self.authority.ledger.acquire_lease(
                CLAIM_PREFIX + requested.request.id, new_holder(), ttl=_CLAIM_TTL, now=time.time()
            )
            if claim is None:
                raise ApprovalAlreadyUsedError(requested.request.id)
        return outcome, approver


def _presentation(preview: Preview, decision: PolicyDecision) -> dict[str, Any]:
    """What the reviewer sees beside the bound action: preview and policy (not digest-bound)."""
    effects = []
    for step in preview.step_previews:
        for effect in step.predicted_effects:
            effects.append(
                {"step": step.step_index, "type": str(effect.type), "target": str(effect.target)}
            )
    return {
        "preview_id": str(preview.preview_id),
        "predicted_effects": effects[:100],
        "required_approvers": [str(a) for a in (decision.required_approvers or [])][:20],
        "policy_version": str(decision.policy_version),
    }


def recorded_approver(authority: ApprovalAuthority, resolved: ApprovalResolved) -> str | None:
    """The id of the actor whose decision the authority recorded for ``resolved``.

    That actor is what the authenticated channel said (the authority replaced the
    decision body's actor with it). None for a resolution without a decision
    (cancel, expiry). The decision event is stored right before its resolution;
    when the event stream was compacted, the audit chain names the actor (a scan of
    the chain, so only for compacted history).
    """
    resolution = resolved.resolution
    if resolution.decision_id is None:
        return None
    ledger = authority.ledger
    for event in ledger.events_after(max(resolved.sequence - 2, 0), limit=1):
        decision = event.get("decision")
        if (
            event.get("type") == "approval.decided"
            and isinstance(decision, Mapping)
            and decision.get("id") == resolution.decision_id
            and decision.get("request_id") == resolution.request_id
        ):
            actor = decision.get("actor")
            if isinstance(actor, Mapping) and isinstance(actor.get("id"), str):
                return str(actor["id"])
    for entry in ledger.audit_entries():
        payload = entry.payload
        if (
            entry.kind == "decided"
            and payload.get("decision_id") == resolution.decision_id
            and payload.get("request_id") == resolution.request_id
            and isinstance(payload.get("actor_id"), str)
        ):
            return str(payload["actor_id"])
    return None

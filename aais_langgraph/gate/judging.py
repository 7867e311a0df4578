"""What a gate makes of an answer: resolved while LangGraph validates the resume value
(:func:`resolve_answer`; :func:`prejudge` + :func:`resolve_late` for async gates, whose
ledger work runs in a thread), then checked once more against the action computed now
(:func:`at_time_of_use`). A refusal raised while validating keeps the interrupt pending.
The judgement itself is the authority's one pure :func:`~aais_langgraph.authority.judge`.

A decision the gate records itself is recorded with its execution claim in one ledger
write: a raw one in process with no resume work (the run that records it goes on with
it, and no lease marks it done), one the planner authorized and handed to the run with
its resume work too, due until the run's lease is released (which marks it done), so a
run that dies past that write leaves the approval to the resume work. An action declared
idempotent takes no claim there (it may run again; the lease serializes its runs).
"""

from __future__ import annotations

from ..authority import ApprovalAuthority, ForbiddenError, new_holder
from ..authority.judgement import MESSAGES
from ..authority.resolutions import resolution_envelope
from ..ledger import Execution
from ..ledger.executions import ExecutionChange
from ..protocol import Action, Actor, ApprovalDecided, ApprovalResolved, Request, same_action
from .answer_sources import AuthorizedAnswer, AuthorizedAnswers
from .execution import (
    CLAIMED,
    CLAIMED_MESSAGE,
    Claim,
    ExecutionUnknownError,
    claim_of,
    settle,
)
from .response import BoundAnswer, RefusalCarrier, RejectedResumeError, refuse
from .seams import mark_invalid_resume

__all__ = ["at_time_of_use", "prejudge", "resolve_answer", "resolve_late"]


def resolve_answer(
    authority: ApprovalAuthority,
    request: Request,
    action: Action,
    answer: BoundAnswer,
    known: ApprovalResolved | None = None,
    claim: Claim | None = None,
    authorized: AuthorizedAnswers | None = None,
    unresolved: bool = False,
    actor: Actor | None = None,
) -> ApprovalResolved:
    """The request's resolution for a bound answer, or raise :class:`RefusalCarrier`.

    Runs inside LangGraph's validation of the resume value. A notice is worth
    only the resolution recorded in the ledger; a decision is judged by the
    authority against the action computed now. An ``invalid`` or ``conflict``ing
    decision and a notice with nothing recorded behind it are refused, so the
    interrupt stays pending (and a run that lost a race overwrites nothing).

    Args:
        authority: the authority that records and judges.
        request: the request the gate paused on.
        action: the action as the node computes it now.
        answer: the bound resume value.
        known: the resolution read before the interrupt, if any.
        claim: the execution claim to take with an approval.
        authorized: the answers the planner handed the run (recorded as their actor).
        unresolved: no resolution was recorded when ``known`` was read (just before),
            so the decision's write is not preceded by another look.
        actor: the run's authenticated user (LangGraph Server's), who records a raw
            decision: asked whether they may (refused, nothing recorded, when not).
    """
    claimed: tuple[str, Execution | None] | None = None
    if isinstance(answer, ApprovalResolved):
        # A recorded resolution never changes, so one read before the interrupt will do.
        recorded = known if known is not None else authority.get_resolution(request.id)
        if recorded is None:
            raise refuse("/resolution", "no resolution is recorded for this request")
        resolved = recorded
    else:
        handed = None if authorized is None else authorized.for_answer(answer)
        change = None
        if claim is not None and claim.ttl is not None and not claim.idempotent:
            # Decide and claim in one ledger transaction (one durable write, not two).
            holder = new_holder()
            change = claim_of(request.id, holder, claim)
        try:
            resolved, record = _decide(authority, answer, change, action, handed, unresolved, actor)
        except ForbiddenError as error:
            mark_invalid_resume(error)  # nothing recorded: the interrupt stays pending
            raise RefusalCarrier(error) from None
        if change is not None:
            claimed = (holder, record)
        elif claim is not None and claim.idempotent:
            claim = Claim(None, claim.thread_id, idempotent=True)  # no claim to take
        outcome = resolved.resolution.outcome
        if outcome in ("invalid", "conflict") or (
            outcome == "stale" and authority.get_resolution(request.id) is None
        ):
            raise refuse("/decision", resolved.resolution.message)
    if resolved.approved and claim is not None:
        # The one execution claim (invariants 6 and 10): of two runs resuming the same
        # interrupt at once only one claims, and a re-run after a crash finds the claim
        # and does not run the action again (see :mod:`.execution`).
        return settle(authority, request, resolved, claim, claimed=claimed)
    return resolved


def _decide(
    authority: ApprovalAuthority,
    answer: ApprovalDecided,
    change: ExecutionChange | None,
    action: Action,
    handed: AuthorizedAnswer | None,
    unresolved: bool,
    actor: Actor | None = None,
) -> tuple[ApprovalResolved, Execution | None]:
    """Record a decision in the run (no resume work), as the planner's actor when it
    handed it; a handed answer keeps what the write answered. A handed decision records
    what the person decided about the action they saw, as the planner would have: the
    action computed now is judged at time of use (:func:`at_time_of_use`)."""
    if handed is None:
        return authority.decide_claiming(
            answer, claim=change, current_action=action, unresolved=unresolved, actor=actor
        )
    resolved, record = authority.decide_claiming(
        handed.decided,
        claim=change,
        actor=handed.actor,
        # Recorded with its resume work, due until the lease's release marks it done: a
        # run that dies past this write leaves its approval to the resume work.
        in_run=False,
        stored=handed.stored,
        unresolved=unresolved,
    )
    handed.recorded = resolved
    return resolved, record


def prejudge(
    authority: ApprovalAuthority,
    request: Request,
    recorded: ApprovalResolved | None,
    answer: BoundAnswer,
) -> BoundAnswer:
    """The checks :func:`resolve_answer` makes that need no I/O (async gates resolve the
    answer later, in a thread).

    ``recorded`` is the resolution read before the interrupt. What only the
    ledger can tell (a decision racing another) is judged after the answer is
    accepted; the run then fails closed instead of keeping the interrupt.

    Args:
        authority: the authority that records and judges.
        request: the request the gate paused on.
        recorded: the resolution read before the interrupt, if any.
        answer: the bound resume value.
    """
    if isinstance(answer, ApprovalResolved):
        if recorded is None:
            raise refuse("/resolution", "no resolution is recorded for this request")
        return answer
    decision = answer.decision
    if recorded is not None:
        if recorded.resolution.decision_id != decision.id:
            raise refuse("/decision", MESSAGES["conflict"])
        return answer
    # The policy sees every decision kind, as the authority's decide does.
    objection = authority.policy.on_decision(request, decision)
    if objection is not None:
        raise refuse("/decision", objection[:2000] or "Refused by policy.")
    return answer


def resolve_late(
    authority: ApprovalAuthority,
    request: Request,
    action: Action,
    answer: BoundAnswer,
    claim: Claim | None,
    authorized: AuthorizedAnswers | None = None,
    actor: Actor | None = None,
) -> ApprovalResolved:
    """:func:`resolve_answer` after the answer was accepted: a refusal can only fail closed now.

    Args:
        authority: the authority that records and judges.
        request: the request the gate paused on.
        action: the action as the node computes it now.
        answer: the accepted resume value.
        claim: the execution claim to take with an approval.
        authorized: the answers the planner handed the run (recorded as their actor).
        actor: the run's authenticated user, who records a raw decision.
    """
    try:
        return resolve_answer(
            authority, request, action, answer, claim=claim, authorized=authorized, actor=actor
        )
    except RefusalCarrier as refusal:
        if isinstance(refusal.error, ExecutionUnknownError):
            raise refusal.error from None
        if isinstance(refusal.error, RejectedResumeError) and refusal.error.code == CLAIMED:
            return resolution_envelope(
                request,
                outcome="conflict",
                message=CLAIMED_MESSAGE,
                now=authority.clock(),
                sequence=authority.ledger.last_sequence(),
            )
        if isinstance(answer, ApprovalDecided):
            handed = None if authorized is None else authorized.for_answer(answer)
            if handed is not None:
                handed.recorded = authority.decide(
                    handed.decided, actor=handed.actor, stored=handed.stored
                )
                return handed.recorded
            if not isinstance(refusal.error, ForbiddenError):
                return authority.decide(answer, current_action=action, actor=actor)
        return resolution_envelope(
            request,
            outcome="invalid",
            message=str(refusal.error)[:2000],
            now=authority.clock(),
            sequence=authority.ledger.last_sequence(),
        )


def at_time_of_use(
    authority: ApprovalAuthority, request: Request, resolved: ApprovalResolved, action: Action
) -> ApprovalResolved:
    """An approval stands only for the action the node computes *now*.

    The request is looked up by its deterministic id, so a node whose action
    changed without a new checkpoint (it reads something outside the graph state)
    would otherwise receive the approval of the action the human saw. Such an
    approval is answered ``stale`` here; the recorded resolution is left as it is.

    Args:
        authority: the authority that records and judges.
        request: the request the gate paused on.
        resolved: its recorded resolution.
        action: the action as the node computes it now.
    """
    if not resolved.approved or same_action(resolved.resolution.action_digest, action):
        return resolved
    return resolution_envelope(
        request,
        outcome="stale",
        message=MESSAGES["stale_action"],
        now=authority.clock(),
        sequence=authority.ledger.last_sequence(),
        stream=resolved.stream,
    )

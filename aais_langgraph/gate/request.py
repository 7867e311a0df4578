"""``request_approval``: pause the current node until a digest-bound decision arrives.

The node re-runs from its start when resumed, so everything here is idempotent:
the request id is derived from thread, task namespace and call index, and the
stored request (with its original timestamps) is read back from the ledger.

The answer is judged while LangGraph validates the resume value (see
:mod:`.response`), so a refused answer leaves the interrupt pending and
answerable. After that, the approval is checked once more against the action
the node computes now (time of use).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, cast

from langgraph.types import interrupt

from ..authority import ApprovalAuthority, new_holder
from ..authority.outcomes import MESSAGES, resolution_envelope
from ..ledger import Execution
from ..protocol import (
    Action,
    ApprovalDecided,
    ApprovalRequested,
    ApprovalResolved,
    Choice,
    Request,
    Risk,
    action_digest,
)
from .channel import answer_channel
from .execution import (
    CLAIMED,
    CLAIMED_MESSAGE,
    SKIPPED,
    Claim,
    ExecutionUnknownError,
    RetryAnswerType,
    claim_of,
    execution_state,
    settle,
)
from .response import Answer, AnswerType, Refusal, RejectedResumeError, refuse
from .run_context import (
    RunCoordinates,
    claim_ttl,
    current_coordinates,
    derive_origin,
    find_authority,
)

__all__ = ["RejectedResumeError", "arequest_approval", "request_approval"]


@dataclass(frozen=True)
class _Opened:
    """The stored request of this call, and its resolution if it has one already."""

    requested: ApprovalRequested
    recorded: ApprovalResolved | None


def _open_request(
    authority: ApprovalAuthority,
    action: Action,
    coordinates: RunCoordinates,
    *,
    session_id: str | None,
    graph_id: str | None,
    risk: Risk | Mapping[str, Any] | None,
    choices: Sequence[Choice | Mapping[str, Any]] | None,
    expires_in: timedelta | None,
    context: Mapping[str, Any] | None,
) -> _Opened | ApprovalResolved:
    """The stored request for this call, or a standing resolution from policy or a grant."""
    stored = authority.get_request(coordinates.request_id)
    if stored is not None:
        return _Opened(stored, authority.get_resolution(coordinates.request_id))
    origin = derive_origin(
        coordinates, harness=authority.harness, session_id=session_id, graph_id=graph_id
    )
    screening = authority.screen(action, origin=origin)
    if screening.resolved is not None:
        return screening.resolved
    verdict = screening.verdict
    requested = authority.request(
        action,
        origin=origin,
        risk=risk if risk is not None else verdict.risk,
        choices=choices if choices is not None else verdict.choices,
        expires_in=expires_in if expires_in is not None else verdict.expires_in,
        request_id=coordinates.request_id,
        unseen=True,  # read just above
        thread_id=coordinates.thread_id,
        context={
            "checkpoint_ns": coordinates.checkpoint_ns,
            "node": coordinates.node,
            "call_index": coordinates.call_index,
            **(context or {}),
        },
    )
    return _Opened(requested, None)


def _judge(
    authority: ApprovalAuthority,
    request: Request,
    action: Action,
    answer: Answer,
    known: ApprovalResolved | None = None,
    claim: Claim | None = None,
) -> ApprovalResolved:
    """The request's resolution for a bound answer, or raise :class:`Refusal`.

    Runs inside LangGraph's validation of the resume value. A notice is worth
    only the resolution recorded in the ledger; a decision is judged by the
    authority against the action computed now. An ``invalid`` or ``conflict``ing
    decision and a notice with nothing recorded behind it are refused, so the
    interrupt stays pending (and a run that lost a race overwrites nothing).
    """
    claimed: tuple[str, Execution | None] | None = None
    if isinstance(answer, ApprovalResolved):
        # A recorded resolution never changes, so one read before the interrupt will do.
        recorded = known if known is not None else authority.get_resolution(request.id)
        if recorded is None:
            raise refuse("/resolution", "no resolution is recorded for this request")
        resolved = recorded
    else:
        change = None
        if claim is not None and claim.ttl is not None:
            # Decide and claim in one ledger transaction (one durable write, not two).
            holder = new_holder()
            change = claim_of(request.id, holder, claim)
        resolved, record = authority.decide_claiming(answer, claim=change, current_action=action)
        if change is not None:
            claimed = (holder, record)
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


def _prejudge(
    authority: ApprovalAuthority,
    request: Request,
    recorded: ApprovalResolved | None,
    answer: Answer,
) -> Answer:
    """The checks :func:`_judge` makes that need no I/O (async gates judge later, in a thread).

    ``recorded`` is the resolution read before the interrupt. What only the
    ledger can tell (a decision racing another) is judged after the answer is
    accepted; the run then fails closed instead of keeping the interrupt.
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
    if decision.decision == "approve":
        objection = authority.policy.on_decision(request, decision)
        if objection is not None:
            raise refuse("/decision", objection[:2000] or "Refused by policy.")
    return answer


def _judge_late(
    authority: ApprovalAuthority,
    request: Request,
    action: Action,
    answer: Answer,
    claim: Claim | None,
) -> ApprovalResolved:
    """:func:`_judge` after the answer was accepted: a refusal can only fail closed now."""
    try:
        return _judge(authority, request, action, answer, claim=claim)
    except Refusal as refusal:
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
            return authority.decide(answer, current_action=action)
        return resolution_envelope(
            request,
            outcome="invalid",
            message=str(refusal.error)[:2000],
            now=authority.clock(),
            sequence=authority.ledger.last_sequence(),
        )


def _at_time_of_use(
    authority: ApprovalAuthority, request: Request, resolved: ApprovalResolved, action: Action
) -> ApprovalResolved:
    """An approval stands only for the action the node computes *now*.

    The request is looked up by its deterministic id, so a node whose action
    changed without a new checkpoint (it reads something outside the graph state)
    would otherwise receive the approval of the action the human saw. Such an
    approval is answered ``stale`` here; the recorded resolution is left as it is.
    """
    if not resolved.approved or resolved.resolution.action_digest == action_digest(action):
        return resolved
    return resolution_envelope(
        request,
        outcome="stale",
        message=MESSAGES["stale_action"],
        now=authority.clock(),
        sequence=authority.ledger.last_sequence(),
        stream=resolved.stream,
    )


def _claim_for(coordinates: RunCoordinates, idempotent: bool) -> Claim:
    """The execution claim this call takes if its answer approves (none for a replay)."""
    ttl = claim_ttl() if coordinates.answer_is_fresh else None
    return Claim(ttl, coordinates.thread_id, idempotent)


def _retry_context(
    context: Mapping[str, Any] | None, retry_of: str | None
) -> Mapping[str, Any] | None:
    return context if retry_of is None else {**(context or {}), "retry_of": retry_of}


def _answer_type(request: Request, settle: Any, retry_of: str | None) -> AnswerType:
    """The response schema of this call (a retry's skips the replaced request's answer)."""
    if retry_of is None:
        return AnswerType(request, settle)
    return RetryAnswerType(request, settle, retry_of)


def _ask(opened: _Opened, answer_type: AnswerType) -> Any:
    """Raise the interrupt, or return the judged answer; refusals raise their error."""
    try:
        return interrupt(opened.requested.to_json(), response_schema=cast(Any, answer_type))
    except Refusal as refusal:
        raise refusal.error from None


def request_approval(
    action: Action | Mapping[str, Any],
    *,
    authority: ApprovalAuthority | None = None,
    risk: Risk | Mapping[str, Any] | None = None,
    choices: Sequence[Choice | Mapping[str, Any]] | None = None,
    expires_in: timedelta | None = None,
    session_id: str | None = None,
    graph_id: str | None = None,
    context: Mapping[str, Any] | None = None,
    idempotent: bool = False,
    _retry_of: str | None = None,
) -> ApprovalResolved:
    """Ask a human to approve ``action``; returns the resolution, approved or not.

    Call it inside a LangGraph node or functional-API task. Policy and live
    grants are consulted first (no interrupt when they settle it). Otherwise the
    request is persisted and the run pauses with the complete
    ``approval.requested`` envelope as the interrupt value. Resume with
    ``Command(resume={interrupt_id: approval_decided_envelope})`` or with
    :func:`~aais_langgraph.gate.resume_with_decisions`. Only an ``approved``
    outcome for the action as it is *now* may execute: check ``resolution.approved``.

    An answer for another request or digest, or with a choice that was not
    offered, raises ``pydantic.ValidationError``; one the authority refuses
    (policy, a conflicting decision) raises :class:`RejectedResumeError`. Either
    way the interrupt stays pending.

    An approved action runs at most once, even across crashes: if a run that was
    executing it died, the re-run raises :class:`ExecutionUnknownError` (the
    interrupt stays pending until a human reconciles it), or gets a result that is
    not approved when the action is known to have run. ``idempotent=True`` runs it
    again instead: key its effect by ``resolved.resolution.request_id``.
    """
    action_model = Action.from_data(action, pointer="/action")
    found = find_authority(authority)
    coordinates = current_coordinates(retry_of=_retry_of)
    opened = _open_request(
        found,
        action_model,
        coordinates,
        session_id=session_id,
        graph_id=graph_id,
        risk=risk,
        choices=choices,
        expires_in=expires_in,
        context=_retry_context(context, _retry_of),
    )
    if isinstance(opened, ApprovalResolved):
        return opened
    request = opened.requested.request
    while True:
        judge = functools.partial(
            _judge,
            found,
            request,
            action_model,
            known=opened.recorded,
            claim=_claim_for(coordinates, idempotent),
        )
        # The run's answer channel decides whose raw decision counts (invariant 7).
        resolved: ApprovalResolved = _ask(
            opened, _answer_type(request, answer_channel().guard(judge), _retry_of)
        )
        if resolved is not SKIPPED:
            break
        coordinates = current_coordinates(retry_of=_retry_of)  # the next slot
    if execution_state(resolved) == "retry":
        # A reviewer asked for this action to be approved again: a fresh request.
        return request_approval(
            action_model,
            authority=found,
            risk=risk,
            choices=choices,
            expires_in=expires_in,
            session_id=session_id,
            graph_id=graph_id,
            context=context,
            idempotent=idempotent,
            _retry_of=request.id,
        )
    return _at_time_of_use(found, request, resolved, action_model)


async def arequest_approval(
    action: Action | Mapping[str, Any],
    *,
    authority: ApprovalAuthority | None = None,
    risk: Risk | Mapping[str, Any] | None = None,
    choices: Sequence[Choice | Mapping[str, Any]] | None = None,
    expires_in: timedelta | None = None,
    session_id: str | None = None,
    graph_id: str | None = None,
    context: Mapping[str, Any] | None = None,
    idempotent: bool = False,
    _retry_of: str | None = None,
) -> ApprovalResolved:
    """Async twin of :func:`request_approval`; ledger work runs in a worker thread.

    The answer's shape, binding, policy and any resolution recorded before the
    run resumed are checked while LangGraph validates it (refusals keep the
    interrupt pending, as in the sync gate). The authority then judges it in a
    thread; a decision that lost a race with another one in that window is not
    refused but fails closed (the node sees ``conflict``).
    """
    action_model = Action.from_data(action, pointer="/action")
    found = find_authority(authority)
    coordinates = current_coordinates(retry_of=_retry_of)
    opened = await asyncio.to_thread(
        _open_request,
        found,
        action_model,
        coordinates,
        session_id=session_id,
        graph_id=graph_id,
        risk=risk,
        choices=choices,
        expires_in=expires_in,
        context=_retry_context(context, _retry_of),
    )
    if isinstance(opened, ApprovalResolved):
        return opened
    request = opened.requested.request
    check = functools.partial(_prejudge, found, request, opened.recorded)
    guarded = answer_channel().guard(check)
    answer: Answer = _ask(opened, _answer_type(request, guarded, _retry_of))
    while answer is SKIPPED:
        coordinates = current_coordinates(retry_of=_retry_of)  # the next slot
        answer = _ask(opened, _answer_type(request, guarded, _retry_of))
    resolved = await asyncio.to_thread(
        _judge_late,
        found,
        request,
        action_model,
        answer,
        _claim_for(coordinates, idempotent),
    )
    if execution_state(resolved) == "retry":
        return await arequest_approval(
            action_model,
            authority=found,
            risk=risk,
            choices=choices,
            expires_in=expires_in,
            session_id=session_id,
            graph_id=graph_id,
            context=context,
            idempotent=idempotent,
            _retry_of=request.id,
        )
    return _at_time_of_use(found, request, resolved, action_model)

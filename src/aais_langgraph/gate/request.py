"""``request_approval``: pause the current node until a digest-bound decision arrives.

The node re-runs from its start when resumed, so everything here is idempotent:
the request id is derived from thread, task namespace and call index, and the
stored request (with its original timestamps) is read back from the ledger.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from langgraph.types import interrupt

from ..authority import ApprovalAuthority
from ..authority.outcomes import MESSAGES, resolution_envelope
from ..protocol import (
    AAISValidationError,
    Action,
    ApprovalDecided,
    ApprovalRequested,
    ApprovalResolved,
    Choice,
    Request,
    Risk,
    action_digest,
)
from .response import response_type
from .run_context import RunCoordinates, current_coordinates, derive_origin, find_authority


class RejectedResumeError(AAISValidationError):
    """The resume value cannot answer this request; the interrupt stays pending."""


def _mark_invalid_resume(error: BaseException) -> None:
    """Tell LangGraph this is a bad resume value, so it saves nothing and keeps the interrupt."""
    try:
        from langgraph.errors import _mark_invalid_resume as mark
    except ImportError:  # pragma: no cover - older langgraph keeps the interrupt anyway
        return
    mark(error)


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
) -> ApprovalRequested | ApprovalResolved:
    """The stored request for this call, or a standing resolution from policy or a grant."""
    stored = authority.get_request(coordinates.request_id)
    if stored is not None:
        return stored
    origin = derive_origin(
        coordinates, harness=authority.harness, session_id=session_id, graph_id=graph_id
    )
    screening = authority.screen(action, origin=origin)
    if screening.resolved is not None:
        return screening.resolved
    verdict = screening.verdict
    return authority.request(
        action,
        origin=origin,
        risk=risk if risk is not None else verdict.risk,
        choices=choices if choices is not None else verdict.choices,
        expires_in=expires_in if expires_in is not None else verdict.expires_in,
        request_id=coordinates.request_id,
        thread_id=coordinates.thread_id,
        context={
            "checkpoint_ns": coordinates.checkpoint_ns,
            "node": coordinates.node,
            "call_index": coordinates.call_index,
            **(context or {}),
        },
    )


def _reject(pointer: str, reason: str) -> RejectedResumeError:
    error = RejectedResumeError(pointer, reason)
    _mark_invalid_resume(error)
    return error


def _settle(
    authority: ApprovalAuthority, requested: ApprovalRequested, action: Action, answer: Any
) -> ApprovalResolved:
    """Turn a validated resume value into the request's resolution, time-of-use checked.

    A resume value that cannot settle the request (no recorded resolution behind a
    notice, an ``invalid`` or unrecorded ``stale`` decision, or a decision that
    ``conflict``s with the recorded one) raises :class:`RejectedResumeError`, marked
    as an invalid resume: LangGraph saves nothing and the interrupt stays pending,
    so a run that lost a race never overwrites the winner's checkpoint.
    """
    request = requested.request
    if isinstance(answer, ApprovalResolved):
        recorded = authority.get_resolution(request.id)
        if recorded is None:
            raise _reject("/resolution", "no resolution is recorded for this request")
        return _at_time_of_use(authority, request, recorded, action)
    decided = answer if isinstance(answer, ApprovalDecided) else ApprovalDecided.from_data(answer)
    resolved = authority.decide(decided, current_action=action)
    outcome = resolved.resolution.outcome
    if outcome in ("invalid", "conflict") or (
        outcome == "stale" and authority.get_resolution(request.id) is None
    ):
        raise _reject("/decision", resolved.resolution.message)
    return _at_time_of_use(authority, request, resolved, action)


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
) -> ApprovalResolved:
    """Ask a human to approve ``action``; returns the resolution, approved or not.

    Call it inside a LangGraph node or functional-API task. Policy and live
    grants are consulted first (no interrupt when they settle it). Otherwise the
    request is persisted and the run pauses with the complete
    ``approval.requested`` envelope as the interrupt value. Resume with
    ``Command(resume={interrupt_id: approval_decided_envelope})``. Only an
    ``approved`` outcome for the action as it is *now* may execute: check
    ``resolution.approved``.
    """
    action_model = Action.from_data(action, pointer="/action")
    found = find_authority(authority)
    coordinates = current_coordinates()
    opened = _open_request(
        found,
        action_model,
        coordinates,
        session_id=session_id,
        graph_id=graph_id,
        risk=risk,
        choices=choices,
        expires_in=expires_in,
        context=context,
    )
    if isinstance(opened, ApprovalResolved):
        return opened
    answer = interrupt(opened.to_json(), response_schema=response_type(opened.request))
    return _settle(found, opened, action_model, answer)


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
) -> ApprovalResolved:
    """Async twin of :func:`request_approval`; ledger work runs in a worker thread."""
    import asyncio

    action_model = Action.from_data(action, pointer="/action")
    found = find_authority(authority)
    coordinates = current_coordinates()
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
        context=context,
    )
    if isinstance(opened, ApprovalResolved):
        return opened
    answer = interrupt(opened.to_json(), response_schema=response_type(opened.request))
    return await asyncio.to_thread(_settle, found, opened, action_model, answer)

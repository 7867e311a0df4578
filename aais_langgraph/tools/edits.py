"""Edits by supersession: AAIS has no approve-with-edits, so an edit replaces the request.

The answer format is a call, not a resume value::

    successor = edit_tool_call(graph, config, request_id, {"to": "bob@example.com"},
                               actor=reviewer, action_digest=shown_digest)
    resume_with_decisions(graph, config,
                          build_decision(successor, decision="approve", actor=reviewer),
                          actor=reviewer)

Under the thread's run lease, :func:`edit_tool_call`:

1. checks the request is a pending tool-call request of this thread, still
   paused in the graph, that offered edits (and, if ``action_digest`` is given,
   that it is the action the editor saw);
2. cancels it (``cancelled``, "Superseded by an edited request.");
3. stores the successor request: same tool, origin, risk and choices, the edited
   arguments (so a new digest), a fresh expiry of the same length, and the
   extension ``aais-langgraph.org/edit`` = ``{"supersedes", "edited_by"}``;
4. resumes the run, which pauses again on the successor.

The original call never runs; the edited one runs only once the successor is
approved, through the same digest checks as any call. Replaying the same edit
returns the same successor; a different edit of a superseded request is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

from langchain_core.runnables import RunnableConfig

from ..authority import DEFAULT_LEASE_TTL, ApprovalAuthority, UnknownRequestError
from ..authority.authorization import requester_of
from ..gate.run_context import RunCoordinates, find_authority
from ..ledger import StoredRequest
from ..protocol import (
    AAISValidationError,
    Action,
    Actor,
    ApprovalRequested,
    build_request,
    canonical_json,
    parse_timestamp,
    same_action,
)
from ..threads.driver import adrive, drive
from ..threads.runs import DEFAULT_LEASE_WAIT, thread_of
from ..threads.views import ThreadView
from .call_gate import (
    EDIT_EXTENSION,
    EDITABLE_EXTENSION,
    TOOL_CALL_ID_EXTENSION,
    request_context,
    requester_extension,
)
from .config import offered_for
from .describe import summarize_call

EDIT_REASON = "Superseded by an edited request."


def _editable(authority: ApprovalAuthority, thread_id: str, request_id: str) -> StoredRequest:
    """The stored request, if it is a tool-call request of this thread that offered edits."""
    stored = authority.get_stored_request(request_id)
    if stored is None:
        raise UnknownRequestError("/request_id")
    if stored.thread_id != thread_id:
        raise AAISValidationError("/request_id", "request belongs to another thread")
    extensions = ApprovalRequested.from_data(stored.envelope).request.extensions or {}
    if TOOL_CALL_ID_EXTENSION not in extensions or "call_index" not in stored.context:
        raise AAISValidationError("/request_id", "not a tool-call request")
    if extensions.get(EDITABLE_EXTENSION) is not True:
        raise AAISValidationError("/request_id", "edits were not offered for this request")
    return stored


def _successor_coordinates(stored: StoredRequest) -> RunCoordinates:
    """Where the gate will look for the successor: the next gate call of the same task."""
    return RunCoordinates(
        thread_id=str(stored.thread_id),
        checkpoint_ns=str(stored.context["checkpoint_ns"]),
        node=stored.context.get("node"),
        run_id=None,
        call_index=int(stored.context["call_index"]) + 1,
    )


def _supersede(
    authority: ApprovalAuthority,
    thread_id: str,
    request_id: str,
    arguments: Mapping[str, Any],
    editor: Actor,
    shown_digest: str | None,
    summary: str | None,
    interrupts: Mapping[str, str],
) -> tuple[ApprovalRequested, dict[str, Any]]:
    """Cancel the request and store its successor; returns it and the resume map."""
    stored = _editable(authority, thread_id, request_id)
    original = ApprovalRequested.from_data(stored.envelope).request
    if shown_digest is not None and not same_action(original.action_digest, shown_digest):
        raise AAISValidationError("/action_digest", "does not match the request's action digest")
    action = Action.from_data(
        {
            **original.action.to_json(),
            "arguments": dict(arguments),
            "summary": summary
            or summarize_call(original.action.name, arguments, original.action.resource)
            + " (arguments edited by a reviewer)",
        },
        pointer="/action",
    )
    coordinates = _successor_coordinates(stored)
    existing = authority.get_stored_request(coordinates.request_id)
    if existing is not None and existing.context.get("supersedes") == request_id:
        successor = ApprovalRequested.from_data(existing.envelope)
        if canonical_json(successor.request.action.arguments) != canonical_json(action.arguments):
            raise AAISValidationError("/request_id", "already superseded by a different edit")
        return successor, {}
    recorded = authority.get_resolution(request_id)
    if recorded is not None:
        raise AAISValidationError(
            "/request_id", f"already resolved ({recorded.resolution.outcome}); nothing to edit"
        )
    interrupt_id = interrupts.get(request_id)
    if interrupt_id is None:
        raise AAISValidationError("/request_id", "the call is no longer waiting in this thread")
    cancelled = authority.cancel(request_id, reason=EDIT_REASON, actor=editor)
    if cancelled.resolution.outcome != "cancelled":
        raise AAISValidationError("/request_id", "resolved before the edit could supersede it")
    lifetime = (
        parse_timestamp(original.expires_at) - parse_timestamp(original.created_at)
        if original.expires_at is not None
        else authority.default_expiry
    )
    tool_call_id = str((original.extensions or {})[TOOL_CALL_ID_EXTENSION])
    requester = requester_of(original) or stored.context.get("requester")
    requester = requester if isinstance(requester, str) else None
    requested = build_request(
        action,
        origin=original.origin,
        risk=original.risk,
        choices=offered_for(original.choices, action),
        request_id=coordinates.request_id,
        created_at=authority.clock(),
        expires_in=max(lifetime, timedelta(seconds=1)),
        extensions={
            TOOL_CALL_ID_EXTENSION: tool_call_id,
            EDITABLE_EXTENSION: True,
            EDIT_EXTENSION: {"supersedes": request_id, "edited_by": editor.to_json()},
            # The edited call is still the run's: it keeps its requester.
            **requester_extension(requester),
        },
    )
    successor = authority.add(
        requested,
        thread_id=thread_id,
        context=request_context(
            coordinates,
            tool_call_id,
            supersedes=request_id,
            edited_by=editor.id,
            **({"requester": requester} if requester else {}),
        ),
    )
    return successor, {interrupt_id: cancelled.to_json()}


def _edit_plan(
    authority: ApprovalAuthority,
    thread_id: str,
    request_id: str,
    arguments: Mapping[str, Any],
    actor: Actor | Mapping[str, Any],
    shown_digest: str | None,
    summary: str | None,
) -> Callable[[ThreadView], tuple[dict[str, Any], ApprovalRequested]]:
    editor = Actor.from_data(actor, pointer="/actor")

    def plan(view: ThreadView) -> tuple[dict[str, Any], ApprovalRequested]:
        successor, resume = _supersede(
            authority,
            thread_id,
            request_id,
            arguments,
            editor,
            shown_digest,
            summary,
            view.interrupts,
        )
        return resume, successor

    return plan


def edit_tool_call(
    graph: Any,
    config: RunnableConfig,
    request_id: str,
    arguments: Mapping[str, Any],
    *,
    actor: Actor | Mapping[str, Any],
    authority: ApprovalAuthority | None = None,
    action_digest: str | None = None,
    summary: str | None = None,
    context: Any = None,
    lease_ttl: float = DEFAULT_LEASE_TTL,
    lease_wait: float = DEFAULT_LEASE_WAIT,
) -> ApprovalRequested:
    """Supersede a paused tool call with edited ``arguments``; returns the new request.

    ``actor`` is the authenticated editor, recorded on the successor.
    ``action_digest`` (recommended) is the digest the editor was shown; a
    mismatch refuses the edit. ``summary`` replaces the default summary of the
    edited call. Raises :class:`~aais_langgraph.AAISValidationError` (value-free)
    when the request cannot be edited; nothing changes then.
    """
    found = find_authority(authority, config, context=context)
    return drive(
        graph,
        config,
        _edit_plan(found, thread_of(config), request_id, arguments, actor, action_digest, summary),
        authority=found,
        context=context,
        lease_ttl=lease_ttl,
        lease_wait=lease_wait,
    )


async def aedit_tool_call(
    graph: Any,
    config: RunnableConfig,
    request_id: str,
    arguments: Mapping[str, Any],
    *,
    actor: Actor | Mapping[str, Any],
    authority: ApprovalAuthority | None = None,
    action_digest: str | None = None,
    summary: str | None = None,
    context: Any = None,
    lease_ttl: float = DEFAULT_LEASE_TTL,
    lease_wait: float = DEFAULT_LEASE_WAIT,
) -> ApprovalRequested:
    """Async twin of :func:`edit_tool_call`."""
    found = find_authority(authority, config, context=context)
    return await adrive(
        graph,
        config,
        _edit_plan(found, thread_of(config), request_id, arguments, actor, action_digest, summary),
        authority=found,
        context=context,
        lease_ttl=lease_ttl,
        lease_wait=lease_wait,
    )

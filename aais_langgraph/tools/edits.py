"""Edits by supersession: AAIS has no approve-with-edits, so an edit replaces the request.

One reviewer action edits and approves (HumanInTheLoopMiddleware's ``edit``)::

    edit_tool_call(graph, config, request_id, {"to": "bob@example.com"},
                   actor=reviewer, action_digest=shown_digest)

Under the thread's run lease, :func:`edit_tool_call`:

1. checks the request is a pending tool-call request of this thread, still
   paused in the graph, that offered edits (and, if ``action_digest`` is given,
   that it is the action the editor saw), and that the editor may cancel it and
   (with ``approve``, the default) approve its successor, before anything changes;
2. cancels it (``cancelled``, "Superseded by an edited request.");
3. stores the successor request: same tool, origin, risk and choices, the edited
   arguments (so a new digest), a fresh expiry of the same length, and the
   extension ``aais-langgraph.org/edit`` = ``{"supersedes", "edited_by"}``;
4. with ``approve``, records the editor's *approve once* of the successor (an
   ordinary decision: judged, authorized and audited as any other);
5. resumes the run, which runs the edited call (or, with ``approve=False``, pauses
   on the successor until someone approves it).

The original call never runs; the edited one runs only through the same digest
checks as any call. Replaying the same edit returns the same successor; a
different edit of a superseded request is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import timedelta
from typing import Any

from langchain_core.runnables import RunnableConfig

from ..authority import DEFAULT_LEASE_TTL, ApprovalAuthority, UnknownRequestError
from ..authority.authorization import (
    ForbiddenError,
    Principal,
    as_principal,
    checked_principal,
    requester_of,
)
from ..gate.run_context import RunCoordinates, afind_authority, find_authority
from ..ledger import StoredRequest
from ..protocol import (
    AAISValidationError,
    Action,
    Actor,
    ApprovalRequested,
    Choice,
    Request,
    build_decision,
    build_request,
    canonical_json,
    parse_timestamp,
    same_action,
)
from ..protocol.extensions import SUBAGENT_EXTENSION
from ..threads.answers import AnswerPlanner, Cancellation
from ..threads.driver import ThreadDriver
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


def _successor_choices(original: Request, action: Action) -> list[Choice]:
    """The successor's choices: the original's that cover the edited action, plus *approve
    once* when the original offered no approval (edits were its only way to run)."""
    choices = list(offered_for(original.choices, action))
    if not any(choice.decision == "approve" for choice in choices):
        choices.insert(0, Choice(decision="approve", scope="once", label="Approve once"))
    return choices


def _may_approve(
    authority: ApprovalAuthority, editor: Principal, thread_id: str, successor: Request
) -> None:
    """Refuse (before anything changes) an editor who may not approve the successor."""
    principal = checked_principal(editor)
    if principal is None:
        return
    resource = replace(
        authority.request_resource(successor, decision="approve"), thread_id=thread_id
    )
    permission = authority.permits(principal, "decide", resource)
    if not permission.allowed:
        raise ForbiddenError("decide", permission.reason)


def _approve(authority: ApprovalAuthority, successor: ApprovalRequested, editor: Principal) -> None:
    """Record the editor's *approve once* of the successor, unless it already resolved."""
    if authority.get_resolution(successor.request.id) is not None:
        return
    decided = build_decision(successor, decision="approve", scope="once", actor=editor.actor)
    AnswerPlanner(authority).record_decision(decided, editor)


def _supersede(
    authority: ApprovalAuthority,
    thread_id: str,
    request_id: str,
    arguments: Mapping[str, Any],
    editor: Principal,
    shown_digest: str | None,
    summary: str | None,
    interrupts: Mapping[str, str],
    approve: bool,
) -> tuple[ApprovalRequested, dict[str, Any]]:
    """Cancel the request, store its successor and (``approve``) approve it; returns the
    successor and the resume map."""
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
        if approve:
            _may_approve(authority, editor, thread_id, successor.request)
            _approve(authority, successor, editor)
        return successor, {}
    recorded = authority.get_resolution(request_id)
    if recorded is not None:
        raise AAISValidationError(
            "/request_id", f"already resolved ({recorded.resolution.outcome}); nothing to edit"
        )
    interrupt_id = interrupts.get(request_id)
    if interrupt_id is None:
        raise AAISValidationError("/request_id", "the call is no longer waiting in this thread")
    lifetime = (
        parse_timestamp(original.expires_at) - parse_timestamp(original.created_at)
        if original.expires_at is not None
        else authority.default_expiry
    )
    tool_call_id = str((original.extensions or {})[TOOL_CALL_ID_EXTENSION])
    # The call's stable key (its id, or its place for a call sent with an empty id).
    call_key = str(stored.context.get("tool_call_id", tool_call_id))
    requester = requester_of(original) or stored.context.get("requester")
    requester = requester if isinstance(requester, str) else None
    requested = build_request(
        action,
        origin=original.origin,
        risk=original.risk,
        choices=_successor_choices(original, action),
        request_id=coordinates.request_id,
        created_at=authority.clock(),
        expires_in=max(lifetime, timedelta(seconds=1)),
        extensions={
            TOOL_CALL_ID_EXTENSION: tool_call_id,
            EDITABLE_EXTENSION: True,
            EDIT_EXTENSION: {"supersedes": request_id, "edited_by": editor.actor.to_json()},
            # The edited call is still the run's: it keeps its requester and its subagent.
            **requester_extension(requester),
            **{
                key: value
                for key, value in (original.extensions or {}).items()
                if key == SUBAGENT_EXTENSION
            },
        },
    )
    # Every refusal comes before anything changes: the original stays answerable.
    authority.require(editor, "cancel", request_id, decision="cancel", stored=stored)
    if approve:
        _may_approve(authority, editor, thread_id, requested.request)
    cancelled = AnswerPlanner(authority).record_cancel(
        Cancellation(request_id, EDIT_REASON), editor, stored=stored
    )
    if cancelled.resolution.outcome != "cancelled":
        raise AAISValidationError("/request_id", "resolved before the edit could supersede it")
    successor = authority.add(
        requested,
        thread_id=thread_id,
        context=request_context(
            coordinates,
            call_key,
            supersedes=request_id,
            edited_by=editor.actor.id,
            **({"requester": requester} if requester else {}),
        ),
    )
    if approve:
        _approve(authority, successor, editor)
    return successor, {interrupt_id: cancelled.to_json()}


def _edit_plan(
    authority: ApprovalAuthority,
    thread_id: str,
    request_id: str,
    arguments: Mapping[str, Any],
    actor: Principal | Actor | Mapping[str, Any],
    shown_digest: str | None,
    summary: str | None,
    approve: bool,
) -> Callable[[ThreadView], tuple[dict[str, Any], ApprovalRequested]]:
    editor = as_principal(actor)

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
            approve,
        )
        return resume, successor

    return plan


def edit_tool_call(
    graph: Any,
    config: RunnableConfig,
    request_id: str,
    arguments: Mapping[str, Any],
    *,
    actor: Principal | Actor | Mapping[str, Any],
    authority: ApprovalAuthority | None = None,
    action_digest: str | None = None,
    summary: str | None = None,
    approve: bool = True,
    context: Any = None,
    lease_ttl: float = DEFAULT_LEASE_TTL,
    lease_wait: float = DEFAULT_LEASE_WAIT,
) -> ApprovalRequested:
    """Run a paused tool call with edited ``arguments``, in one reviewer action.

    Supersedes the request with one for the edited call and, with ``approve``, approves
    that one as ``actor``; then resumes the run, which runs the edited call. Returns the
    successor request. An approval the policy objects to is not recorded: the successor
    then waits, pending, like any request.

    Args:
        graph: The compiled graph whose thread is paused on the call.
        config: The run config naming the thread.
        request_id: The pending tool-call request to edit.
        arguments: The edited arguments (all of them; they replace the model's).
        actor: The authenticated editor (a principal, an actor, or its JSON), recorded
            on the successor and as the approver; authorization applies to both the
            cancel of the original and the approval of the successor.
        authority: The approval authority (default: found in ``config`` or ``context``).
        action_digest: The digest the editor was shown (recommended); a mismatch
            refuses the edit.
        summary: Replaces the default summary of the edited call.
        approve: False to only propose the edit: the successor then waits for its own
            approval, by anyone who may give it.
        context: The runtime context passed to the graph.
        lease_ttl: Seconds the thread's run lease lives without renewal.
        lease_wait: Seconds to wait for another holder of the lease.

    Raises :class:`~aais_langgraph.AAISValidationError` (value-free) when the request
    cannot be edited and :class:`~aais_langgraph.authority.ForbiddenError` when the
    editor may not do it; nothing changes then.
    """
    found = find_authority(authority, config, context=context)
    plan = _edit_plan(
        found, thread_of(config), request_id, arguments, actor, action_digest, summary, approve
    )
    driver = ThreadDriver(graph, found, lease_ttl=lease_ttl, lease_wait=lease_wait)
    with driver.leased(config) as thread:
        successor = driver.drive(config, plan, context=context, thread=thread)
        if approve:
            # The run now waits on the successor, which already holds its approval.
            follow = driver.recorded_plan(only=(successor.request.id,))
            driver.drive(config, follow, context=context, thread=thread)
    return successor


async def aedit_tool_call(
    graph: Any,
    config: RunnableConfig,
    request_id: str,
    arguments: Mapping[str, Any],
    *,
    actor: Principal | Actor | Mapping[str, Any],
    authority: ApprovalAuthority | None = None,
    action_digest: str | None = None,
    summary: str | None = None,
    approve: bool = True,
    context: Any = None,
    lease_ttl: float = DEFAULT_LEASE_TTL,
    lease_wait: float = DEFAULT_LEASE_WAIT,
) -> ApprovalRequested:
    """Async twin of :func:`edit_tool_call`."""
    found = await afind_authority(authority, config, context=context)
    plan = _edit_plan(
        found, thread_of(config), request_id, arguments, actor, action_digest, summary, approve
    )
    driver = ThreadDriver(graph, found, lease_ttl=lease_ttl, lease_wait=lease_wait)
    async with driver.aleased(config) as thread:
        successor = await driver.adrive(config, plan, context=context, thread=thread)
        if approve:
            follow = driver.recorded_plan(only=(successor.request.id,))
            await driver.adrive(config, follow, context=context, thread=thread)
    return successor

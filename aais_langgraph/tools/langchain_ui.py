"""LangChain's UIs on the server side: an ``edit`` made inside the run that answers it, and
Agent Chat UI's "Mark as Resolved".

**Edit.**
Agent Chat UI sends ``{"decisions": [{"type": "edit", "edited_action": {...}}]}`` and
Agent Inbox ``[{"type": "edit", "args": {...}}]`` as the resume value of the call's
interrupt. The gate reads them (:mod:`aais_langgraph.gate.langchain_ui`) and calls
:func:`supersede_in_run`, which does what :func:`~aais_langgraph.tools.edit_tool_call`
does from outside a run, through the same steps and the one planner: the original
request is cancelled ("Superseded by an edited request.") by the editor, a successor
request for the edited call is stored, and the editor's *approve once* of it is
recorded. Every check comes first (the request is pending and offered edits, the editor
may cancel it and approve the successor), so a refused edit changes nothing. The gate
then runs the edited call under the successor's approval, without a second pause.

**Mark as Resolved.** Agent Chat UI's button submits ``command: {goto: "__end__"}`` with
no answer. LangGraph (1.2) ignores that write for a thread paused in a task: nothing
runs, and the approval would wait until it expires. :func:`acancel_marked_resolved`,
called from LangGraph Server's ``@auth.on.threads.create_run`` handler, cancels every
pending request of that thread as the authenticated user, with the reason
:data:`MARK_RESOLVED_REASON`, through the one planner (authorization applies), and
turns the run's command into the resume with those recorded cancellations, so each
paused call ends ``cancelled`` and runs nothing::

    @auth.on.threads.create_run
    async def on_run(ctx: Auth.types.AuthContext, value: Auth.types.RunsCreate) -> None:
        await acancel_marked_resolved(ctx.user, value)
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, MutableMapping
from typing import Any

from ..authority import ApprovalAuthority, UnknownRequestError
from ..authority.authorization import as_principal
from ..gate.answer_sources import actor_from_langgraph_user
from ..gate.seams import interrupt_id_for
from ..protocol import Actor, ApprovalResolved, Request
from ..server_env import authority_from_env
from ..threads.answers import AnswerPlanner, Cancellation
from .edits import _supersede

__all__ = [
    "MARK_RESOLVED_REASON",
    "acancel_marked_resolved",
    "cancel_marked_resolved",
    "is_mark_resolved",
    "supersede_in_run",
]

END = "__end__"
MARK_RESOLVED_REASON = (
    "Marked as resolved in Agent Chat UI: the run was sent to its end without an answer."
)
"""The message of a request cancelled by Agent Chat UI's "Mark as Resolved"."""

IN_RUN = "in-run"
"""The interrupt id handed to the supersession: the run answering is the one paused."""


def supersede_in_run(
    authority: ApprovalAuthority, request: Request, arguments: Mapping[str, Any], actor: Actor
) -> ApprovalResolved:
    """Supersede ``request`` with the call edited to ``arguments``, approved by ``actor``;
    returns the original's ``cancelled`` resolution. Raises what
    :func:`~aais_langgraph.tools.edit_tool_call` raises, before anything changes.

    Args:
        authority: the authority that records the cancel, the successor and its approval.
        request: the pending tool-call request the answering run is paused on.
        arguments: the edited arguments (all of them).
        actor: the authenticated editor, who cancels and approves.
    """
    stored = authority.get_stored_request(request.id)
    if stored is None or stored.thread_id is None:
        raise UnknownRequestError("/request_id")
    _supersede(
        authority,
        stored.thread_id,
        request.id,
        arguments,
        as_principal(actor),
        request.action_digest,
        None,
        {request.id: IN_RUN},
        True,
    )
    cancelled = authority.get_resolution(request.id)
    if cancelled is None:  # pragma: no cover - _supersede records it or raises
        raise UnknownRequestError("/request_id")
    return cancelled


def is_mark_resolved(command: Any) -> bool:
    """True for Agent Chat UI's "Mark as Resolved" command: ``goto`` the end, no resume."""
    if not isinstance(command, Mapping) or command.get("resume") is not None:
        return False
    goto = command.get("goto")
    targets = goto if isinstance(goto, list) else [goto]
    return END in targets


def cancel_marked_resolved(
    authority: ApprovalAuthority, thread_id: str, actor: Actor
) -> dict[str, Any]:
    """Cancel every pending request of ``thread_id`` as ``actor`` (reason
    :data:`MARK_RESOLVED_REASON`); returns the resume map of the recorded cancellations,
    by interrupt id. Raises :class:`~aais_langgraph.authority.ForbiddenError` (nothing
    recorded for that request) when ``actor`` may not cancel one."""
    planner = AnswerPlanner(authority)
    resume: dict[str, Any] = {}
    for stored in authority.ledger.list_pending(thread_id=thread_id):
        cancelled = planner.record_cancel(
            Cancellation(stored.request_id, MARK_RESOLVED_REASON), actor, stored=stored
        )
        namespace = stored.context.get("checkpoint_ns")
        index = stored.context.get("call_index")
        cancelled_here = cancelled.resolution.outcome == "cancelled"
        if cancelled_here and isinstance(namespace, str) and isinstance(index, int):
            resume[interrupt_id_for(namespace, index)] = cancelled.to_json()
    return resume


async def acancel_marked_resolved(
    user: Any, value: MutableMapping[str, Any], authority: ApprovalAuthority | None = None
) -> None:
    """In LangGraph Server's ``@auth.on.threads.create_run`` handler: when the run is
    "Mark as Resolved" (:func:`is_mark_resolved`), cancel the thread's pending requests
    as ``user`` and resume the run with the recorded cancellations instead (see the
    module). Any other run is left as it is.

    Args:
        user: the handler's ``ctx.user`` (the custom auth's user).
        value: the handler's ``value`` (the run being created; its command is replaced).
        authority: the approval authority (default: the environment's, as the gate's).
    """
    kwargs = value.get("kwargs")
    thread_id = value.get("thread_id")
    if not isinstance(kwargs, MutableMapping) or thread_id is None:
        return
    if not is_mark_resolved(kwargs.get("command")):
        return
    actor = actor_from_langgraph_user(user)
    if actor is None:
        return  # the server's auth refuses the run; nothing is cancelled
    if authority is None:
        authority = await asyncio.to_thread(authority_from_env)
    resume = await asyncio.to_thread(cancel_marked_resolved, authority, str(thread_id), actor)
    if resume:
        kwargs["command"] = {"resume": resume}

"""A LangChain UI's ``edit`` of a gated tool call, made inside the run that answers it.

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
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..authority import ApprovalAuthority, UnknownRequestError
from ..authority.authorization import as_principal
from ..protocol import Actor, ApprovalResolved, Request
from .edits import _supersede

__all__ = ["supersede_in_run"]

IN_RUN = "in-run"
"""The interrupt id handed to the supersession: the run answering is the one paused."""


def supersede_in_run(
    authority: ApprovalAuthority, request: Request, arguments: Mapping[str, Any], actor: Actor
) -> ApprovalResolved:
    """Supersede ``request`` with the call edited to ``arguments``, approved by ``actor``;
    returns the original's ``cancelled`` resolution. Raises what
    :func:`~aais_langgraph.tools.edit_tool_call` raises, before anything changes."""
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

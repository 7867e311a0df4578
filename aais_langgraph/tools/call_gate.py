"""The per-call approval gate that ``ApprovalToolNode`` and ``ApprovalMiddleware`` share.

A gated tool call runs in its own LangGraph task and raises its own AAIS
request (kind ``tool.call``), so a decision binds to it by request id and
digest, never by position. The task re-runs from the top on every resume, so
each step is idempotent:

1. If this call already has a request (its id is deterministic), that request
   stands: ``when`` is not asked again and the summary is read back from it.
   Otherwise ``when`` is asked once, policy and grants are consulted, and a
   request carrying the exact arguments is stored before anyone can see it.
2. :func:`~aais_langgraph.gate.request_approval` pauses until it resolves.
3. A cancellation that an edit superseded continues with the edited request:
   approved by the editor in the same action, or waiting for its own approval
   (see :mod:`.edits`).
4. Only an approval whose digest equals the digest of the call about to run,
   recomputed right before it runs (arguments, and the kind and resource the
   tool declares, see :mod:`.declared`), executes it; every other outcome returns an
   error ``ToolMessage``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_core.messages import ToolMessage
from langgraph.config import get_config
from langgraph.types import Command

from ..authority import ApprovalAuthority
from ..gate import ExecutionUnknownError, arequest_approval, execution_state, request_approval
from ..gate.execution import finish
from ..gate.langchain_ui import LangChainUI
from ..gate.nodes import APPROVAL_KEY, key_of, run_approved
from ..gate.quorum import Quorum
from ..gate.run_context import (
    RunCoordinates,
    afind_authority,
    derive_origin,
    find_authority,
    peek_coordinates,
    subagent_extension,
)
from ..gate.seams import interrupt_will_pause
from ..ledger import StoredRequest
from ..protocol import (
    AAISValidationError,
    Action,
    Actor,
    ApprovalRequested,
    ApprovalResolved,
    Request,
    build_request,
    same_action,
)
from ..protocol.builders import DEFAULT_RISK
from ..protocol.extensions import EXTENSION_NAMESPACE, REPLY_EXTENSION, REQUESTER_EXTENSION
from ..protocol.extensions import TOOL_CALL_ID_EXTENSION as TOOL_CALL_ID_EXTENSION
from ..protocol.notes import note_of
from .config import ToolCallDescriber, ToolRule, offered_for
from .declared import declared_action, declares_same
from .describe import summary_for
from .messages import (
    EDIT_NOTICE,
    not_run_message,
    refusal_message,
    reply_message,
    time_of_use_message,
    unpresentable_message,
    with_edit_notice,
)

if TYPE_CHECKING:
    from langgraph.prebuilt.tool_node import ToolCallRequest

EDITABLE_EXTENSION = EXTENSION_NAMESPACE + "editable"
"""Request extension: True when a reviewer may supersede the call with edited arguments."""
ANSWER_WAITING = "answer_waiting"
"""Request context: True when the request was raised while an answer already waited for
its task (nobody had been shown it), so LangChain's UIs' unbound answers are refused."""
EDIT_EXTENSION = EXTENSION_NAMESPACE + "edit"
"""Request extension of an edited request: ``{"supersedes": id, "edited_by": actor}``."""

ToolResult = ToolMessage | Command[Any]
Handler = Callable[["ToolCallRequest"], ToolResult]
AsyncHandler = Callable[["ToolCallRequest"], Awaitable[ToolResult]]


@dataclass(frozen=True)
class GatedCall:
    """A call at the gate: the action it would run and, if already settled, how."""

    action: Action
    resolved: ApprovalResolved | None = None
    edited: bool = False
    shown: bool = True
    """False when the request was raised while an answer already waited for its task."""


def request_context(coordinates: RunCoordinates, tool_call_id: str, **extra: Any) -> dict[str, Any]:
    """The ledger context of a tool-call request: where its task pauses, which call, and
    who the run acts for (its requester, when the run names one)."""
    return {
        "checkpoint_ns": coordinates.checkpoint_ns,
        "node": coordinates.node,
        "call_index": coordinates.call_index,
        "tool_call_id": tool_call_id,
        **({"requester": coordinates.requester} if coordinates.requester else {}),
        **extra,
    }


def requester_extension(requester: str | None) -> dict[str, Any]:
    """The request extension naming who the run acts for (empty when nobody is named)."""
    return {REQUESTER_EXTENSION: {"id": requester}} if requester else {}


def call_key(request: ToolCallRequest, coordinates: RunCoordinates) -> str:
    """The stable key of a gated call: its id, or, for a call the model sent with an empty
    id, its place in the model's message (``<message id>#<index>``), or failing that its task.

    The key matches the requests raised for one call across resumes and state edits; a
    call without any id (None) cannot have its result matched to it and is refused.
    """
    call = request.tool_call
    call_id = call.get("id")
    if call_id is None:
        raise ValueError(
            f"Tool call `{call['name']}` has no ID, so its approval and its result can't be "
            "matched to it. Make sure the chat model returns tool call IDs."
        )
    if call_id:
        return call_id
    state = request.state
    messages = state.get("messages") if isinstance(state, Mapping) else None
    for message in reversed(messages or []):
        calls = getattr(message, "tool_calls", None)
        if not calls:
            continue
        same = [
            index
            for index, other in enumerate(calls)
            if not other.get("id")
            and other["name"] == call["name"]
            and other["args"] == call["args"]
        ]
        if len(same) == 1 and getattr(message, "id", None):
            return f"{message.id}#{same[0]}"
        break
    # Identical calls without ids in one message: only their tasks tell them apart.
    return f"task:{coordinates.checkpoint_ns}"


class ToolCallGate:
    """Asks for approval of gated tool calls and runs only approved ones.

    Args:
        rules: tool name -> how its calls are gated.
        authority: the authority (default: the one in the run's ``configurable``).
        describe: makes the ``action.summary`` of a call (default: the tool's name and
            arguments).
        graph_id: names the graph in each request's origin.
        edit_notice: the text a tool message carries when a reviewer edited its call (None:
            none).
    """

    def __init__(
        self,
        rules: Mapping[str, ToolRule],
        *,
        authority: ApprovalAuthority | None = None,
        describe: ToolCallDescriber | None = None,
        graph_id: str | None = None,
        edit_notice: str | None = EDIT_NOTICE,
    ) -> None:
        self.rules = dict(rules)
        self.authority = authority
        self.describe = describe
        self.graph_id = graph_id
        self.edit_notice = edit_notice

    def gates(self, tool_name: str) -> bool:
        """True if calls to this tool go through approval."""
        return tool_name in self.rules

    # -- the two entry points -------------------------------------------------------

    def wrap(self, request: ToolCallRequest, handler: Handler) -> ToolResult:
        """``wrap_tool_call``: gate the call, then run it through ``handler`` if approved."""
        rule = self.rules.get(request.tool_call["name"])
        if rule is None:
            return handler(request)
        authority = find_authority(self.authority)
        try:
            gated = self._open(authority, rule, request)
        except AAISValidationError as error:
            return unpresentable_message(request.tool_call, str(error))
        if gated is None:
            return handler(request)
        asked = peek_coordinates().request_id
        resolved = gated.resolved
        ui = _CallUI(authority, rule, gated.shown)
        try:
            while resolved is None:
                resolved = request_approval(
                    gated.action,
                    authority=authority,
                    idempotent=rule.idempotent,
                    langchain_ui=ui.offer(),
                    _take_recorded=ui.edited,
                )
                successor = self._successor(authority, resolved)
                if successor is not None:
                    gated, resolved = successor, None
                    asked = peek_coordinates().request_id
        except ExecutionUnknownError as unknown:
            return not_run_message(request.tool_call, "unknown", unknown.request_id)
        checked = self._checked(request, gated, resolved, rule)
        if isinstance(checked, ToolMessage):
            return checked
        key = key_of(asked, resolved)
        result = run_approved(key, lambda: handler(checked))
        finish(authority, key)
        return self._annotated(result, checked, gated)

    async def awrap(self, request: ToolCallRequest, handler: AsyncHandler) -> ToolResult:
        """``awrap_tool_call``: the async twin of :meth:`wrap` (ledger work in a thread)."""
        rule = self.rules.get(request.tool_call["name"])
        if rule is None:
            return await handler(request)
        authority = await afind_authority(self.authority)
        try:
            gated = await asyncio.to_thread(self._open, authority, rule, request)
        except AAISValidationError as error:
            return unpresentable_message(request.tool_call, str(error))
        if gated is None:
            return await handler(request)
        asked = peek_coordinates().request_id
        resolved = gated.resolved
        ui = _CallUI(authority, rule, gated.shown)
        try:
            while resolved is None:
                resolved = await arequest_approval(
                    gated.action,
                    authority=authority,
                    idempotent=rule.idempotent,
                    langchain_ui=ui.offer(),
                    _take_recorded=ui.edited,
                )
                successor = await asyncio.to_thread(self._successor, authority, resolved)
                if successor is not None:
                    gated, resolved = successor, None
                    asked = peek_coordinates().request_id
        except ExecutionUnknownError as unknown:
            return not_run_message(request.tool_call, "unknown", unknown.request_id)
        checked = self._checked(request, gated, resolved, rule)
        if isinstance(checked, ToolMessage):
            return checked
        key = key_of(asked, resolved)
        token = APPROVAL_KEY.set(key)
        try:
            result = await handler(checked)
        finally:
            APPROVAL_KEY.reset(token)
        await asyncio.to_thread(finish, authority, key)
        return self._annotated(result, checked, gated)

    # -- steps ------------------------------------------------------------------------

    def _open(
        self, authority: ApprovalAuthority, rule: ToolRule, request: ToolCallRequest
    ) -> GatedCall | None:
        """The call's standing at the gate; None when ``when`` lets it run ungated."""
        call = request.tool_call
        coordinates = peek_coordinates()
        call_id = call_key(request, coordinates)
        stored = authority.get_stored_request(coordinates.request_id)
        if stored is not None:
            # The request stands as raised: its summary, and no second opinion from `when`.
            shown = ApprovalRequested.from_data(stored.envelope).request.action
            action = Action.from_data(
                {**shown.to_json(), "name": call["name"], "arguments": call["args"]},
                pointer="/action",
            )
            return GatedCall(action, shown=not stored.context.get(ANSWER_WAITING))
        earlier = self._earlier(authority, coordinates, call_id)
        if rule.when is not None and not earlier and not rule.when(request):
            return None
        for record in earlier:
            # The state was edited while the call waited: what was shown is gone.
            authority.supersede(record.request_id)
        fields: dict[str, Any] = {
            **declared_action(request.tool).fields(),  # kind (default tool.call), resource...
            "name": call["name"],
            "summary": summary_for(request, rule, self.describe),
            "arguments": call["args"],
        }
        if rule.presentation is not None:
            fields["presentation"] = rule.presentation.to_json()
        action = Action.from_data(fields, pointer="/action")
        origin = derive_origin(coordinates, harness=authority.harness, graph_id=self.graph_id)
        screening = authority.screen(action, origin=origin, requester=coordinates.requester)
        if screening.resolved is not None:
            return GatedCall(action, screening.resolved)
        verdict = screening.verdict
        offered = rule.choices_for(request, action)
        if offered is None and verdict.choices is not None:
            offered = offered_for(verdict.choices, action)
        risk = rule.risk if rule.risk is not None else verdict.risk
        # A call that needs several approvers asks each one for this call only.
        quorum = Quorum.first_for(authority, action, risk if risk is not None else DEFAULT_RISK)
        if quorum is not None and offered is not None:
            offered = tuple(choice for choice in offered if choice.scope == "once")
        requested = build_request(
            action,
            origin=origin,
            risk=risk,
            choices=offered,
            expires_in=rule.expires_in or verdict.expires_in or authority.default_expiry,
            request_id=coordinates.request_id,
            created_at=authority.clock(),
            extensions={
                TOOL_CALL_ID_EXTENSION: call["id"],  # as the model sent it, to pair the result
                EDITABLE_EXTENSION: rule.editable,
                **subagent_extension(coordinates),
                **requester_extension(coordinates.requester),
                **({} if quorum is None else quorum.extension()),
            },
        )
        # An answer already waiting for this new task was sent before anyone saw it.
        waiting = not interrupt_will_pause(get_config()["configurable"])
        authority.add(
            requested,
            thread_id=coordinates.thread_id,
            context=request_context(
                coordinates,
                call_id,
                when=rule.when is not None,
                **({ANSWER_WAITING: True} if waiting else {}),
            ),
        )
        return GatedCall(action, shown=not waiting)

    @staticmethod
    def _earlier(
        authority: ApprovalAuthority, coordinates: RunCoordinates, call_id: str
    ) -> list[StoredRequest]:
        """Pending requests for the same tool call raised by a task that no longer exists."""
        return [
            record
            for record in authority.ledger.list_pending(thread_id=coordinates.thread_id)
            if record.context.get("tool_call_id") == call_id
            and record.context.get("checkpoint_ns") != coordinates.checkpoint_ns
        ]

    @staticmethod
    def _successor(authority: ApprovalAuthority, resolved: ApprovalResolved) -> GatedCall | None:
        """The edited request that superseded a cancelled one, if an edit did."""
        if resolved.resolution.outcome != "cancelled":
            return None
        stored = authority.get_stored_request(peek_coordinates().request_id)
        if stored is None or stored.context.get("supersedes") != resolved.resolution.request_id:
            return None
        action = ApprovalRequested.from_data(stored.envelope).request.action
        return GatedCall(action, edited=True)

    @staticmethod
    def _checked(
        request: ToolCallRequest, gated: GatedCall, resolved: ApprovalResolved, rule: ToolRule
    ) -> ToolCallRequest | ToolMessage:
        """Time of use: the call to run, with exactly the approved name and arguments."""
        call = request.tool_call
        state = execution_state(resolved)
        if state is not None:
            return not_run_message(call, state, resolved.resolution.request_id, resolved)
        if not resolved.approved:
            extensions = resolved.resolution.extensions or {}
            reply = note_of(resolved)
            if extensions.get(REPLY_EXTENSION) is True and reply is not None:
                return reply_message(call, resolved, reply)
            note = reply if rule.reviewer_note else None
            return refusal_message(call, resolved, note=note)
        arguments = gated.action.to_json()["arguments"]  # a fresh copy nobody else holds
        current = Action.from_data({**gated.action.to_json(), "arguments": arguments})
        if (
            gated.action.name != call["name"]
            or not declares_same(gated.action, getattr(request, "tool", None))
            or not same_action(resolved.resolution.action_digest, current)
        ):
            return time_of_use_message(call, resolved.resolution.request_id)
        return request.override(tool_call={**call, "args": arguments})

    def _annotated(
        self, result: ToolResult, request: ToolCallRequest, gated: GatedCall
    ) -> ToolResult:
        if not gated.edited:
            return result
        return with_edit_notice(result, request.tool_call["id"] or "", self.edit_notice)


class _CallUI:
    """One gated call's offer to LangChain's approval UIs: its decisions, and an edit that
    supersedes the call's request in the answer itself (then the edited request, already
    approved by its editor, is taken without a second pause)."""

    def __init__(self, authority: ApprovalAuthority, rule: ToolRule, shown: bool) -> None:
        self.authority = authority
        self.rule = rule
        self.shown = shown
        self.edited = False

    def offer(self) -> LangChainUI:
        return LangChainUI(
            allowed=self.rule.allowed,
            edit=self._edit if self.rule.editable else None,
            shown=self.shown,
        )

    def _edit(
        self, request: Request, arguments: Mapping[str, Any], actor: Actor
    ) -> ApprovalResolved:
        from .langchain_ui import supersede_in_run

        cancelled = supersede_in_run(self.authority, request, arguments, actor)
        self.edited = True
        return cancelled

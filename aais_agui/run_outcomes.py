"""AG-UI 1.0 run outcomes ag-ui-langgraph does not give: ``cancelled``, ``subagentRunId``,
and the AAIS code of a run that an AAIS refusal stopped.

Both are read from what the approvals' ledger rows record about where they were
raised (``context``: ``checkpoint_ns``, ``node``, ``tool_call_id``), never from
the client.

- An interrupt raised inside a subgraph (its checkpoint namespace has a parent,
  ``archive:<task>|archive_file:<task>``) carries ``subagentRunId``: the AAIS id
  of the parent namespace (:func:`~aais_langgraph.protocol.id_for`, injective), so
  one subgraph invocation keeps one id across the pause, a reconnect and the
  resume, and two invocations never share one. Answering still goes by
  ``Interrupt.id``.
- A resume whose every entry cancels an open approval, from a client that declares
  AG-UI 1.0 (``RunAgentInput.protocolVersion``), ends ``RUN_FINISHED`` with
  ``outcome: {"type": "cancelled"}`` when nothing else ran: the run would end
  with success (no interrupt, no error), no node ran but those on the cancelled
  approvals' namespaces, no text, reasoning or tool call was streamed beyond the
  cancelled tool calls' results, and the only messages the run added to the
  thread answer the tool calls those approvals gated. Anything more (an
  ``on_reject`` reply, the model running again) is a ``success``.
- A run stopped by an AAIS refusal raised inside it (a request over a bound of
  :class:`~aais_langgraph.authority.RequestLimits`, a forbidden step) ends with
  ``RUN_ERROR`` whose ``code`` is the refusal's (``aais.limit_exceeded``,
  ``aais.forbidden``), as the refusals before a run do.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ag_ui.core import BaseEvent, EventType, Interrupt, ResumeEntry, RunErrorEvent
from ag_ui.core.events import RunFinishedCancelledOutcome, RunFinishedInterruptOutcome

from aais_langgraph.authority import ApprovalAuthority, ForbiddenError, RequestLimitError
from aais_langgraph.protocol import agui_refusal, id_for

from .mapping import METADATA_KEY, is_approval_request

logger = logging.getLogger(__name__)

__all__ = [
    "CancelWatch",
    "aattribute_interrupts",
    "acancel_watch",
    "refusal_event",
    "run_error_for",
    "settle_outcome",
    "speaks_cancelled",
    "subagent_run_id",
]

#: Events that show the run produced something (a reply, a tool call, reasoning, activity).
_CONTENT = frozenset(
    {
        EventType.TEXT_MESSAGE_START,
        EventType.TEXT_MESSAGE_CHUNK,
        EventType.TOOL_CALL_START,
        EventType.TOOL_CALL_CHUNK,
        EventType.REASONING_START,
        EventType.REASONING_MESSAGE_START,
        EventType.REASONING_MESSAGE_CHUNK,
        EventType.ACTIVITY_SNAPSHOT,
        EventType.ACTIVITY_DELTA,
    }
)


def speaks_cancelled(protocol_version: str | None) -> bool:
    """Whether a client declaring ``protocol_version`` (``RunAgentInput.protocolVersion``)
    reads the ``cancelled`` outcome: 1.0 or later. Clients before 1.0 declare nothing, and
    some reject an outcome they do not know (CopilotKit 1.74's @ag-ui/core 0.0.59 fails
    the run on it), so they get ``success``, which is what such a run was before."""
    major, _, _ = (protocol_version or "").partition(".")
    return major.isdigit() and int(major) >= 1


def refusal_event(code: str, message: str) -> RunErrorEvent:
    """The ``RUN_ERROR`` of refusal ``code`` (:data:`~aais_langgraph.protocol.REFUSALS`);
    ``message`` names fields and rules, never a value."""
    fields = agui_refusal(code, message)
    return RunErrorEvent(type=EventType.RUN_ERROR, message=fields["message"], code=fields["code"])


def run_error_for(error: BaseException) -> RunErrorEvent | None:
    """The ``RUN_ERROR`` with the AAIS code for a refusal that stopped a run; None for any
    other exception (ag-ui-langgraph reports it). The message never holds a value."""
    if isinstance(error, RequestLimitError):
        return refusal_event(error.code, str(error))
    if isinstance(error, ForbiddenError):
        return refusal_event(error.code, f"forbidden: {error.reason}")
    return None


def subagent_run_id(checkpoint_ns: str) -> str | None:
    """The ``subagentRunId`` of an approval raised at ``checkpoint_ns``; None at the top level."""
    parent, separator, _ = checkpoint_ns.rpartition("|")
    return id_for(parent) if separator and parent else None


async def aattribute_interrupts(event: BaseEvent, authority: ApprovalAuthority) -> BaseEvent:
    """``event`` with ``subagentRunId`` on each approval interrupt of an interrupt outcome
    raised inside a subgraph (one ag-ui-langgraph left unattributed)."""
    outcome = getattr(event, "outcome", None)
    if not isinstance(outcome, RunFinishedInterruptOutcome):
        return event
    interrupts: list[Interrupt] = []
    changed = False
    for item in outcome.interrupts:
        owner = None
        if item.subagent_run_id is None:
            try:
                context = await _context_of(authority, item)
            except Exception:
                logger.exception("reading where an approval was raised failed; no subagentRunId")
                context = {}
            owner = subagent_run_id(str(context.get("checkpoint_ns", "")))
        if owner is None:
            interrupts.append(item)
        else:
            interrupts.append(item.model_copy(update={"subagent_run_id": owner}))
            changed = True
    if not changed:
        return event
    return event.model_copy(
        update={"outcome": outcome.model_copy(update={"interrupts": interrupts})}
    )


@dataclass(frozen=True)
class CancelWatch:
    """What a resume that cancels every open approval may leave behind and still be
    ``cancelled``: the nodes on the approvals' namespaces, results for the tool calls
    they gated, and the messages the thread held before."""

    nodes: frozenset[str]
    tool_call_ids: frozenset[str]
    messages_before: frozenset[str]

    def allows(self, event: BaseEvent) -> bool:
        """False once ``event`` shows the run did more than close the cancelled approvals."""
        if event.type in _CONTENT:
            return False
        if event.type == EventType.STEP_STARTED:
            return str(getattr(event, "step_name", "")) in self.nodes
        if event.type == EventType.TOOL_CALL_RESULT:
            return str(getattr(event, "tool_call_id", "")) in self.tool_call_ids
        return True

    def added_only_cancellations(self, state: Any) -> bool:
        """True when every message added since the watch answers a cancelled tool call."""
        for message in _messages(state):
            if getattr(message, "id", None) in self.messages_before:
                continue
            if getattr(message, "type", None) != "tool":
                return False
            if getattr(message, "tool_call_id", None) not in self.tool_call_ids:
                return False
        return True


async def acancel_watch(
    graph: Any,
    authority: ApprovalAuthority,
    config: Mapping[str, Any],
    pending: Mapping[str, Any],
    entries: Sequence[ResumeEntry],
    *,
    protocol_version: str | None,
) -> CancelWatch | None:
    """The watch for a resume that cancels every open interrupt, all AAIS approvals, from
    a client that declares AG-UI 1.0 or later (``protocol_version``); None for any other
    resume (its outcome is ag-ui-langgraph's).

    Args:
        graph: the graph.
        authority: the authority.
        config: the run config naming the thread.
        pending: interrupt id -> value of the thread's open interrupts.
        entries: the run's ``resume[]`` entries.
        protocol_version: the AG-UI version the client declares (None: none).
    """
    if not speaks_cancelled(protocol_version):
        return None
    if not entries or any(entry.status != "cancelled" for entry in entries):
        return None
    if not pending or not all(is_approval_request(value) for value in pending.values()):
        return None
    try:
        return await _awatch(graph, authority, config, pending)
    except Exception:
        logger.exception("reading the cancelled approvals failed; the outcome stays success")
        return None


async def _awatch(
    graph: Any, authority: ApprovalAuthority, config: Mapping[str, Any], pending: Mapping[str, Any]
) -> CancelWatch | None:
    nodes: set[str] = set()
    tool_calls: set[str] = set()
    for value in pending.values():
        stored = await authority.aget_stored_request(str(value["request"]["id"]))
        if stored is None:
            return None
        context = stored.context
        namespace = str(context.get("checkpoint_ns", ""))
        nodes.update(segment.split(":")[0] for segment in namespace.split("|") if segment)
        if isinstance(context.get("node"), str):
            nodes.add(context["node"])
        if isinstance(context.get("tool_call_id"), str):
            tool_calls.add(context["tool_call_id"])
    before = await graph.aget_state(config)
    ids = frozenset(str(m.id) for m in _messages(before) if getattr(m, "id", None))
    return CancelWatch(frozenset(nodes), frozenset(tool_calls), ids)


async def settle_outcome(
    events: AsyncIterator[BaseEvent], watch: CancelWatch | None, graph: Any, config: Any
) -> AsyncIterator[BaseEvent]:
    """``events``, with a successful ``RUN_FINISHED`` made ``cancelled`` when ``watch``
    saw nothing but the cancellation (the state is read before that event is sent).

    Args:
        events: the run's AG-UI events.
        watch: the cancellation watch (None: events pass unchanged).
        graph: the graph whose state is read.
        config: the run config.
    """
    quiet = watch is not None
    async for event in events:
        if watch is not None and quiet and not watch.allows(event):
            quiet = False
        if (
            watch is not None
            and quiet
            and event.type == EventType.RUN_FINISHED
            and getattr(getattr(event, "outcome", None), "type", "success") == "success"
            and await _added_only_cancellations(watch, graph, config)
        ):
            event = event.model_copy(update={"outcome": RunFinishedCancelledOutcome()})
        yield event


async def _added_only_cancellations(watch: CancelWatch, graph: Any, config: Any) -> bool:
    try:
        return watch.added_only_cancellations(await graph.aget_state(config))
    except Exception:
        logger.exception("reading the thread after a cancel failed; the outcome stays success")
        return False


def _messages(state: Any) -> list[Any]:
    values = getattr(state, "values", None)
    found = values.get("messages") if isinstance(values, Mapping) else None
    return list(found) if isinstance(found, list) else []


async def _context_of(authority: ApprovalAuthority, item: Interrupt) -> Mapping[str, Any]:
    metadata = item.metadata if isinstance(item.metadata, Mapping) else {}
    envelope = metadata.get(METADATA_KEY)
    request = envelope.get("request") if isinstance(envelope, Mapping) else None
    if not isinstance(request, Mapping):
        return {}
    stored = await authority.aget_stored_request(str(request.get("id")))
    return stored.context if stored is not None else {}

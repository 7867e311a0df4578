"""Gated frontend tools over AG-UI: hold a page tool call's events until it is released.

The graph asks for approval of a gated page tool call in
:class:`~aais_langgraph.tools.PageToolGate`; this module is the server's half:

- every run carries the :class:`~aais_langgraph.tools.PageBinding` of the page
  it serves (the request's ``Origin`` header, or the gate's declared origin, and
  the registry revision of ``RunAgentInput.tools``) in
  ``configurable[PAGE_BINDING_KEY]``;
- :class:`PageToolRelay` drops the model's ``TOOL_CALL_*`` events for gated page
  tools and takes such calls out of ``MESSAGES_SNAPSHOT`` and of the ``messages`` of
  ``STATE_SNAPSHOT``, unless an earlier run released them; it sends no ``RAW`` events
  or ``rawEvent`` copies (they carry the model's output unfiltered). The calls this
  run released are streamed right before ``RUN_FINISHED`` as ``TOOL_CALL_START`` /
  ``ARGS`` / ``END``, so a client that runs frontend tools on those events sees and
  runs only approved calls;
- :func:`plan_page_resume` resolves ``stale`` (recorded in the ledger) a page tool
  request answered from a page whose origin or tools differ from the ones the
  request binds; the graph then answers the model that the call did not run.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Mapping, Sequence
from typing import Any

from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    EventType,
    MessagesSnapshotEvent,
    ResumeEntry,
    RunAgentInput,
    StateSnapshotEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    ToolMessage,
)
from langchain_core.messages import AIMessage
from langchain_core.messages import ToolMessage as LangChainToolMessage

from aais_langgraph.authority import ApprovalAuthority, Principal
from aais_langgraph.protocol import Actor, ApprovalRequested, same_action
from aais_langgraph.threads import AnswerPlanner
from aais_langgraph.tools import (
    PAGE_BINDING_KEY,
    PAGE_TOOL_EXTENSION,
    PageBinding,
    PageToolGate,
    page_tool_arguments,
)

from .mapping import is_approval_request

_RELEASED = ("executed", "done")
_HELD_FOLLOWERS = (
    EventType.TOOL_CALL_ARGS,
    EventType.TOOL_CALL_END,
    EventType.TOOL_CALL_RESULT,
    EventType.TOOL_CALL_CHUNK,
)
_THREAD_REQUESTS = 10_000


def page_binding(input: RunAgentInput, *, origin: str | None, gate: PageToolGate) -> PageBinding:
    """The page a run serves: ``origin`` (the request's ``Origin`` header) or the gate's
    declared origin, and the registry revision of the tools the client declared."""
    tools = [tool.model_dump(mode="json", exclude_none=True) for tool in input.tools or []]
    return PageBinding.of(tools, origin=origin or gate.origin)


def with_page(config: Mapping[str, Any], page: PageBinding) -> dict[str, Any]:
    """``config`` with the page binding in ``configurable`` (what the gate reads)."""
    configurable = {**(config.get("configurable") or {}), PAGE_BINDING_KEY: page.to_json()}
    return {**config, "configurable": configurable}


def released_calls(authority: ApprovalAuthority, thread_id: str) -> set[str]:
    """Tool call ids of the thread's page tool calls the gate released (recorded executed)."""
    released: set[str] = set()
    for stored in authority.ledger.requests_of_thread(thread_id, limit=_THREAD_REQUESTS):
        if not stored.context.get("page_tool"):
            continue
        execution = authority.execution(stored.request_id)
        call_id = stored.context.get("tool_call_id")
        if execution is not None and execution.state in _RELEASED and isinstance(call_id, str):
            released.add(call_id)
    return released


class PageToolRelay:
    """One run's filter of AG-UI events: held page tool calls out, released ones in.

    Args:
        gate: the graph's page tool gate (which tool names are gated).
        graph: the served graph (read for the released calls' arguments).
        authority: the authority whose ledger records releases.
        config: the run's config (``configurable.thread_id`` names the thread).
        released_before: tool call ids released by earlier runs (shown as they are).
    """

    def __init__(
        self,
        gate: PageToolGate,
        graph: Any,
        authority: ApprovalAuthority,
        config: Mapping[str, Any],
        released_before: set[str],
    ) -> None:
        self.gate = gate
        self.graph = graph
        self.authority = authority
        self.config = config
        self.released_before = released_before
        self.held: set[str] = set()

    async def relay(
        self, events: AsyncIterable[BaseEvent] | Iterable[BaseEvent]
    ) -> AsyncIterator[BaseEvent]:
        """``events`` without held calls, with the calls released in this run before
        ``RUN_FINISHED``."""
        if isinstance(events, AsyncIterable):
            async for event in events:
                for out in await self._filtered(event):
                    yield out
        else:
            for event in events:
                for out in await self._filtered(event):
                    yield out

    async def _filtered(self, event: BaseEvent) -> list[BaseEvent]:
        kind = event.type
        if kind == EventType.RAW:
            return []
        if getattr(event, "raw_event", None) is not None:
            event = event.model_copy(update={"raw_event": None})
        if kind in (EventType.TOOL_CALL_START, EventType.TOOL_CALL_CHUNK):
            name = getattr(event, "tool_call_name", None)
            call_id = getattr(event, "tool_call_id", None)
            if name is not None and self.gate.gates(name) and call_id not in self.released_before:
                self.held.add(str(call_id))
                return []
        if kind in _HELD_FOLLOWERS and getattr(event, "tool_call_id", None) in self.held:
            return []
        if kind == EventType.MESSAGES_SNAPSHOT:
            assert isinstance(event, MessagesSnapshotEvent)
            return [self._snapshot(event)]
        if kind == EventType.STATE_SNAPSHOT:
            assert isinstance(event, StateSnapshotEvent)
            return [self._state_snapshot(event)]
        if kind == EventType.RUN_FINISHED:
            return [*await self._released_now(), event]
        return [event]

    def _hidden(self, name: Any, call_id: Any) -> bool:
        return (
            isinstance(name, str) and self.gate.gates(name) and call_id not in self.released_before
        )

    def _held_call(self, call: Any, hidden: set[str]) -> bool:
        """True (and noted in ``hidden``) for a tool call (LangChain's dict) to hold."""
        if isinstance(call, Mapping) and self._hidden(call.get("name"), call.get("id")):
            hidden.add(str(call.get("id")))
            return True
        return False

    def _snapshot(self, event: MessagesSnapshotEvent) -> MessagesSnapshotEvent:
        """The snapshot without calls no earlier run released (and their answers)."""
        hidden: set[str] = set()
        messages: list[Any] = []
        for message in event.messages:
            if isinstance(message, AssistantMessage) and message.tool_calls:
                kept = []
                for call in message.tool_calls:
                    if self._hidden(call.function.name, call.id):
                        hidden.add(call.id)
                    else:
                        kept.append(call)
                if not kept and not message.content:
                    continue  # a message that only carried held calls
                message = message.model_copy(update={"tool_calls": kept or None})
            elif isinstance(message, ToolMessage) and message.tool_call_id in hidden:
                continue
            messages.append(message)
        return event.model_copy(update={"messages": messages})

    def _state_snapshot(self, event: StateSnapshotEvent) -> StateSnapshotEvent:
        """The state snapshot whose message list (LangChain's JSON) has the same calls
        taken out as :meth:`_snapshot` takes out."""
        snapshot = event.snapshot
        key = self.gate.messages_key
        if not isinstance(snapshot, Mapping) or not isinstance(snapshot.get(key), list):
            return event
        hidden: set[str] = set()
        messages: list[Any] = []
        for message in snapshot[key]:
            if isinstance(message, AIMessage) and message.tool_calls:
                kept = [call for call in message.tool_calls if not self._held_call(call, hidden)]
                if not kept and not message.content:
                    continue
                message = message.model_copy(update={"tool_calls": kept})
            elif isinstance(message, Mapping) and message.get("tool_calls"):
                kept = [call for call in message["tool_calls"] if not self._held_call(call, hidden)]
                if not kept and not message.get("content"):
                    continue
                message = {**message, "tool_calls": kept}
            elif (isinstance(message, LangChainToolMessage) and message.tool_call_id in hidden) or (
                isinstance(message, Mapping) and message.get("tool_call_id") in hidden
            ):
                continue
            messages.append(message)
        return event.model_copy(update={"snapshot": {**snapshot, key: messages}})

    async def _released_now(self) -> list[BaseEvent]:
        """``TOOL_CALL_*`` events of the calls this run released, as the model made them."""
        thread_id = str(self.config["configurable"]["thread_id"])
        released = await asyncio.to_thread(released_calls, self.authority, thread_id)
        fresh = released - self.released_before
        if not fresh:
            return []
        state = await self.graph.aget_state({"configurable": {"thread_id": thread_id}})
        messages = (state.values or {}).get(self.gate.messages_key) or []
        answered = {m.tool_call_id for m in messages if isinstance(m, LangChainToolMessage)}
        events: list[BaseEvent] = []
        for message in messages:
            if not isinstance(message, AIMessage):
                continue
            for call in message.tool_calls:
                call_id = call.get("id")
                if call_id not in fresh or call_id in answered:
                    continue
                events += [
                    ToolCallStartEvent(
                        type=EventType.TOOL_CALL_START,
                        tool_call_id=call_id,
                        tool_call_name=call["name"],
                        parent_message_id=message.id,
                    ),
                    ToolCallArgsEvent(
                        type=EventType.TOOL_CALL_ARGS,
                        tool_call_id=call_id,
                        delta=json.dumps(call["args"]),
                    ),
                    ToolCallEndEvent(type=EventType.TOOL_CALL_END, tool_call_id=call_id),
                ]
        self.released_before |= fresh
        return events


def plan_page_resume(
    authority: ApprovalAuthority,
    pending: Mapping[str, Any],
    entries: Sequence[ResumeEntry],
    *,
    actor: Principal | Actor | Mapping[str, Any] | None,
    page: PageBinding | None,
    plan: Any,
) -> dict[str, Any]:
    """``plan(authority, pending, entries, actor=actor)``, after resolving ``stale`` each
    answered page tool request whose origin or registry revision is not ``page``'s.

    Only an authenticated actor who may decide a request makes it stale; anyone else's
    answer, and any cancellation, goes to ``plan`` as it is (and is judged there). A
    stale request resumes the graph with its recorded resolution, so the model is told
    the call did not run.

    Args:
        authority: the authority that records the answers.
        pending: interrupt id -> value of the thread's open interrupts (an approval's
            value may be its validated ``ApprovalRequested`` already).
        entries: the run's ``resume[]`` entries.
        actor: the authenticated actor (None: refused as unauthenticated).
        page: the page's binding (origin, registry revision) of this run (None: no page).
        plan: the planner the answers go to (:func:`~aais_agui.resume_plan.plan_resume`).
    """
    stale: dict[str, Any] = {}
    for entry in entries if actor is not None else ():
        value = pending.get(entry.interrupt_id)
        if entry.status == "cancelled":
            continue  # a cancellation runs nothing either way: it is recorded as sent
        if isinstance(value, ApprovalRequested):
            request = value.request
        elif isinstance(value, Mapping) and is_approval_request(value):
            request = ApprovalRequested.from_data(value).request
        else:
            continue
        if not (request.extensions or {}).get(PAGE_TOOL_EXTENSION):
            continue
        shown = request.action.to_json()
        now = {**shown, "arguments": page_tool_arguments(shown["arguments"]["arguments"], page)}
        if same_action(request.action_digest, now):
            continue
        superseded = AnswerPlanner(authority).supersede(request.id, actor)
        if superseded is not None:
            stale[entry.interrupt_id] = superseded.to_json()
    if not stale:
        return dict(plan(authority, pending, entries, actor=actor))
    rest = {key: value for key, value in pending.items() if key not in stale}
    answered = [entry for entry in entries if entry.interrupt_id not in stale]
    planned = plan(authority, rest, answered, actor=actor) if rest or answered else {}
    return {**planned, **stale}


async def arelay_for(
    gate: PageToolGate | None, graph: Any, authority: ApprovalAuthority, config: Mapping[str, Any]
) -> PageToolRelay | None:
    """The relay of a run on the thread ``config`` names (None when no page tool is gated).

    Args:
        gate: the graph's page tool gate (None: none).
        graph: the graph.
        authority: the authority.
        config: the run config naming the thread.
    """
    if gate is None:
        return None
    thread_id = str(config["configurable"]["thread_id"])
    released = await asyncio.to_thread(released_calls, authority, thread_id)
    return PageToolRelay(gate, graph, authority, config, released)


def held(
    relay: PageToolRelay | None, events: AsyncIterable[BaseEvent] | Iterable[BaseEvent]
) -> AsyncIterator[BaseEvent]:
    """``events`` through ``relay`` (as they are without one)."""
    if relay is not None:
        return relay.relay(events)
    return _as_async(events)


async def _as_async(
    events: AsyncIterable[BaseEvent] | Iterable[BaseEvent],
) -> AsyncIterator[BaseEvent]:
    if isinstance(events, AsyncIterable):
        async for event in events:
            yield event
    else:
        for event in events:
            yield event

"""What an AG-UI stream or read of a thread carries for one viewer: what they may see, nothing more.

A thread is shown to whoever may read it (who started it, who posted to it, the
groups a policy lets in) and followed by whoever may view one of its requests
(:class:`~aais_langgraph.authority.ThreadAccess`). This module cuts every event of
a run, a reconnect or a re-offer, and every thread read, to that:

- a viewer who may read the thread gets its messages and the requests they may
  view; a request they may not view appears as an interrupt saying
  :data:`~aais_langgraph.authority.HIDDEN_REQUEST` (no envelope, no schema), its tool
  call's arguments and result are replaced by the same words, and what may hold
  any value of it is withheld: the state events, RAW and CUSTOM events, activity
  events and every event's ``raw_event`` copy;
- a viewer who only follows requests gets the run's start, its end and its
  error, with the interrupts of the requests they may view, and nothing else of
  the thread (no messages, no state, no streamed text or tool call).

A run streams its own output (its text and tool calls, as they are produced) to
whoever sent it, as long as they may read the thread.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    EventType,
    Interrupt,
    Message,
    MessagesSnapshotEvent,
    RunFinishedEvent,
    ToolMessage,
)

from aais_langgraph.authority import HIDDEN_REQUEST, ApprovalAuthority, Principal, ThreadAccess

from .mapping import APPROVAL_REASON, is_approval_request

__all__ = ["ThreadEventFilter", "hidden_interrupt", "visible_messages"]

HIDDEN_ARGUMENTS = json.dumps({"hidden": HIDDEN_REQUEST})
"""The arguments a tool call of a hidden request shows (JSON text, as AG-UI carries them)."""

_LIFECYCLE = frozenset({EventType.RUN_STARTED, EventType.RUN_FINISHED, EventType.RUN_ERROR})
_WITHHELD = frozenset(
    {
        EventType.STATE_SNAPSHOT,
        EventType.STATE_DELTA,
        EventType.RAW,
        EventType.CUSTOM,
        EventType.ACTIVITY_SNAPSHOT,
        EventType.ACTIVITY_DELTA,
    }
)
_TOOL_CALL_EVENTS = frozenset(
    {
        EventType.TOOL_CALL_START,
        EventType.TOOL_CALL_ARGS,
        EventType.TOOL_CALL_END,
        EventType.TOOL_CALL_CHUNK,
        EventType.TOOL_CALL_RESULT,
    }
)


def hidden_interrupt(interrupt: Interrupt) -> Interrupt:
    """``interrupt`` as a viewer who may not view its request sees it: its id, nothing else."""
    return Interrupt(id=interrupt.id, reason=APPROVAL_REASON, message=HIDDEN_REQUEST)


class ThreadEventFilter:
    """Cuts the AG-UI events of one thread to what one viewer may see (the module docs).

    Requests raised after ``access`` was read (by the run being streamed) are asked
    about when their interrupts are offered (:meth:`afilter`)."""

    def __init__(
        self,
        access: ThreadAccess,
        authority: ApprovalAuthority | None = None,
        viewer: Principal | None = None,
    ) -> None:
        self.access = access
        self._authority = authority
        self._viewer = viewer

    async def afilter(self, event: BaseEvent) -> BaseEvent | None:
        """:meth:`__call__`, after asking about the requests of an outcome's interrupts that
        were raised since the access was read."""
        if self.access.trusted or self._authority is None:
            return self(event)
        outcome = getattr(event, "outcome", None) if isinstance(event, RunFinishedEvent) else None
        known = self.access.shown | self.access.hidden
        new = [
            request_id
            for request_id in map(_request_id_of, getattr(outcome, "interrupts", None) or ())
            if request_id is not None and request_id not in known
        ]
        if new:
            seen = await self._authority.access.avisible(self._viewer, new)
            self.access = replace(
                self.access,
                shown=self.access.shown | seen,
                hidden=self.access.hidden | (set(new) - seen),
            )
        return self(event)

    def __call__(self, event: BaseEvent) -> BaseEvent | None:
        """The event as the viewer may receive it, or None when they may not."""
        if self.access.trusted:
            return event
        kind = event.type
        if not self.access.content and kind not in _LIFECYCLE:
            return None
        if kind in _WITHHELD:
            return None
        if kind in _TOOL_CALL_EVENTS:
            call = getattr(event, "tool_call_id", None)
            if call in self.access.hidden_tool_calls:
                return None
        update: dict[str, Any] = {"raw_event": None}
        if isinstance(event, MessagesSnapshotEvent):
            update["messages"] = visible_messages(event.messages, self.access)
        if isinstance(event, RunFinishedEvent) and event.outcome is not None:
            interrupts = getattr(event.outcome, "interrupts", None)
            if interrupts is not None:
                outcome = event.outcome.model_copy(
                    update={"interrupts": self.interrupts(interrupts)}
                )
                update["outcome"] = outcome
        return event.model_copy(update=update)

    def interrupts(self, interrupts: Iterable[Interrupt]) -> list[Interrupt]:
        """The interrupts the viewer is offered: those of requests they may view, the rest
        as :func:`hidden_interrupt` (left out entirely for a viewer who only follows)."""
        shown: list[Interrupt] = []
        for interrupt in interrupts:
            if self._may_see(interrupt):
                shown.append(interrupt)
            elif self.access.content:
                shown.append(hidden_interrupt(interrupt))
        return shown

    def _may_see(self, interrupt: Interrupt) -> bool:
        if self.access.trusted:
            return True
        request_id = _request_id_of(interrupt)
        if request_id is None:
            return self.access.content  # a plain interrupt's value is the thread's content
        return request_id in self.access.shown


def _request_id_of(interrupt: Interrupt) -> str | None:
    """The request id of an AAIS interrupt (None for a plain one)."""
    envelope = (interrupt.metadata or {}).get("aais")
    if not is_approval_request(envelope):
        return None
    assert isinstance(envelope, dict)
    found = envelope.get("request", {}).get("id")
    return found if isinstance(found, str) else None


def visible_messages(messages: Iterable[Message], access: ThreadAccess) -> list[Message]:
    """``messages`` with the tool calls of hidden requests (their arguments and results)
    replaced by :data:`~aais_langgraph.authority.HIDDEN_REQUEST`; none at all for a viewer
    who may not read the thread."""
    if not access.content:
        return []
    hidden = access.hidden_tool_calls
    if not hidden:
        return list(messages)
    shown: list[Message] = []
    for message in messages:
        if isinstance(message, AssistantMessage) and message.tool_calls:
            calls = [
                call.model_copy(
                    update={
                        "function": call.function.model_copy(update={"arguments": HIDDEN_ARGUMENTS})
                    }
                )
                if call.id in hidden
                else call
                for call in message.tool_calls
            ]
            message = message.model_copy(update={"tool_calls": calls})
        elif isinstance(message, ToolMessage) and message.tool_call_id in hidden:
            message = message.model_copy(update={"content": HIDDEN_REQUEST})
        shown.append(message)
    return shown

"""After a refused resume, offer the thread's still-open interrupts again in the same stream.

A refused resume ends its run with ``RUN_ERROR`` (AG-UI: a run that failed),
and clients drop the interrupts they were showing when a new run starts
(CopilotKit's ``useInterrupt`` clears them on ``RUN_STARTED``). So the stream
goes on with what a reconnect would return: a second run that reads the
checkpoint, runs nothing, and finishes with the interrupt outcome carrying every
interrupt still open. AG-UI 1.0 allows a new ``RUN_STARTED`` after ``RUN_ERROR``
in one stream. Nothing is re-offered when an answer may no longer apply: the
thread is busy elsewhere, the caller is unauthenticated, or one of the
approvals was already resolved (its recorded answer resumes the thread instead).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from ag_ui.core import (
    BaseEvent,
    EventType,
    Interrupt,
    RunFinishedEvent,
    RunStartedEvent,
)
from ag_ui.core.events import RunFinishedInterruptOutcome

from aais_langgraph.authority import ApprovalAuthority

from .mapping import is_approval_request

logger = logging.getLogger(__name__)

__all__ = ["NOT_REOFFERED", "reoffer_events"]

NOT_REOFFERED = frozenset({"aais.thread_busy", "aais.unauthenticated", "aais.internal"})
"""Refusal codes after which the open interrupts are not offered again."""


async def reoffer_events(
    graph: Any,
    authority: ApprovalAuthority,
    *,
    thread_id: str,
    code: str,
    configurable: Mapping[str, Any],
    to_agui: Callable[[list[Any]], list[Interrupt]],
) -> list[BaseEvent]:
    """``RUN_STARTED`` + ``RUN_FINISHED`` (interrupt outcome) for the open interrupts, or ``[]``.

    ``to_agui`` maps LangGraph interrupts as the agent does for any run.

    Args:
        graph: the graph whose thread is read.
        authority: the authority.
        thread_id: the thread.
        code: the refusal code the run ended with (some are not re-offered).
        configurable: the run's ``configurable``.
        to_agui: maps LangGraph interrupts to AG-UI ones.
    """
    if code in NOT_REOFFERED:
        return []
    try:
        state = await graph.aget_state({"configurable": {**configurable, "thread_id": thread_id}})
        pending = [item for task in state.tasks or () for item in task.interrupts or ()]
        for item in pending:
            if is_approval_request(item.value):
                request_id = item.value.get("request", {}).get("id")
                if await authority.aget_resolution(str(request_id)) is not None:
                    return []
        interrupts = to_agui(pending) if pending else []
    except Exception:
        logger.exception("reading the open interrupts after a refused resume failed")
        return []
    if not interrupts:
        return []
    run_id = f"run_{uuid.uuid4().hex}"
    return [
        RunStartedEvent(type=EventType.RUN_STARTED, thread_id=thread_id, run_id=run_id),
        RunFinishedEvent(
            type=EventType.RUN_FINISHED,
            thread_id=thread_id,
            run_id=run_id,
            outcome=RunFinishedInterruptOutcome(type="interrupt", interrupts=interrupts),
        ),
    ]

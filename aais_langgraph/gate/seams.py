"""Every private LangGraph detail the gate relies on, in one place (pinned by one test).

``tests/gate/test_langgraph_seams.py`` checks each of them against the installed
LangGraph. A seam LangGraph moved fails here, at import, naming the tested
range, never silently at run time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

TESTED_RANGE = "langgraph >=1.2,<1.3 (tested with 1.2.24)"

try:
    from langgraph._internal._constants import (
        CONFIG_KEY_RESUME_MAP,
        CONFIG_KEY_SCRATCHPAD,
        INTERRUPT,
    )
    from langgraph.errors import _mark_invalid_resume
    from langgraph.types import _interrupt_id
except ImportError as error:  # pragma: no cover - only on an untested langgraph
    raise ImportError(
        f"aais_langgraph.gate relies on private LangGraph details ({error}); "
        f"this langgraph does not have them. Supported: {TESTED_RANGE}."
    ) from error

__all__ = [
    "INTERRUPT_CHANNEL",
    "RESUME_MAP_KEY",
    "SCRATCHPAD_KEY",
    "TESTED_RANGE",
    "interrupt_id_for",
    "mark_invalid_resume",
    "resume_map",
    "saved_answers",
    "scratchpad",
]

RESUME_MAP_KEY: str = CONFIG_KEY_RESUME_MAP
"""``configurable`` key holding the current ``Command(resume={id: value})`` map."""

SCRATCHPAD_KEY: str = CONFIG_KEY_SCRATCHPAD
"""``configurable`` key of the per-execution scratchpad of the running task."""

INTERRUPT_CHANNEL: str = INTERRUPT
"""The channel name of interrupt writes in a checkpoint's ``pending_writes``."""


def scratchpad(configurable: Mapping[str, Any]) -> object | None:
    """The running task's scratchpad: one object per execution of the task."""
    found: object | None = configurable.get(SCRATCHPAD_KEY)
    return found


def saved_answers(configurable: Mapping[str, Any]) -> Sequence[Any]:
    """The answers the running task already consumed (its scratchpad's ``resume`` list)."""
    return getattr(scratchpad(configurable), "resume", None) or ()


def resume_map(configurable: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The id-keyed resume map of this run, if it was resumed with one."""
    found = configurable.get(RESUME_MAP_KEY)
    return found if isinstance(found, Mapping) else None


def interrupt_id_for(checkpoint_ns: str, slot: int) -> str:
    """The id LangGraph gives the interrupt filling answer slot ``slot`` of a task."""
    return str(_interrupt_id(checkpoint_ns, slot))


def mark_invalid_resume(error: BaseException) -> None:
    """Tell LangGraph ``error`` is a bad resume value, so it keeps the interrupt pending."""
    _mark_invalid_resume(error)

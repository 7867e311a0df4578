"""Bounds on client input: ASCII decimal numbers and the length of every client-chosen id.

``str.isdigit()`` accepts ``²`` and other Unicode digits that ``int()`` refuses
(or reads as something else), so numbers from headers and query parameters are
parsed here, by ASCII rules, with a bounded length. Ids chosen by clients
(thread, run, message, tool call, interrupt and request ids) share the AAIS id
bound, so a 200k-character thread id is refused before it reaches a ledger.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from ag_ui.core import RunAgentInput

__all__ = ["MAX_CLIENT_ID_LENGTH", "ascii_decimal", "id_too_long", "oversized_id"]

#: The longest client-chosen id accepted (the AAIS id bound).
MAX_CLIENT_ID_LENGTH = 200

_DECIMAL = re.compile(r"[0-9]+")


def ascii_decimal(raw: str, *, max_digits: int) -> int | None:
    """``raw`` as a non-negative integer when it is 1..``max_digits`` ASCII digits, else None."""
    if not 0 < len(raw) <= max_digits or _DECIMAL.fullmatch(raw) is None:
        return None
    return int(raw)


def id_too_long(value: Any) -> bool:
    """True when a client-chosen id (a run input field, a URL path segment) exceeds the bound."""
    return isinstance(value, str) and len(value) > MAX_CLIENT_ID_LENGTH


def _run_input_ids(run_input: RunAgentInput) -> Iterator[tuple[str, Any]]:
    """(JSON pointer, value) of every client-chosen id in a run input (wire names)."""
    yield "/threadId", run_input.thread_id
    yield "/runId", run_input.run_id
    yield "/parentRunId", run_input.parent_run_id
    for index, entry in enumerate(run_input.resume or ()):
        yield f"/resume/{index}/interruptId", entry.interrupt_id
    for index, message in enumerate(run_input.messages):
        yield f"/messages/{index}/id", message.id
        yield f"/messages/{index}/subagentRunId", getattr(message, "subagent_run_id", None)
        yield f"/messages/{index}/toolCallId", getattr(message, "tool_call_id", None)
        for call, tool_call in enumerate(getattr(message, "tool_calls", None) or ()):
            yield f"/messages/{index}/toolCalls/{call}/id", tool_call.id


def oversized_id(run_input: RunAgentInput) -> str | None:
    """The JSON pointer of the first id longer than :data:`MAX_CLIENT_ID_LENGTH`, or None."""
    for pointer, value in _run_input_ids(run_input):
        if id_too_long(value):
            return pointer
    return None

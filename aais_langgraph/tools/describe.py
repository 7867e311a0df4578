"""The ``action.summary`` of a tool-call request: what the reviewer reads first.

The summary is part of the digested action, so it is computed once, when the
request is raised, and read back from the stored request afterwards: a
describer that is not deterministic cannot make an approval stale.

A describer takes the ``ToolCallRequest``; one written for
HumanInTheLoopMiddleware, ``(tool_call, state, runtime)`` (three positional
parameters, or ``*args``), is called that way, with the graph's ``Runtime``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .config import ToolCallDescriber, ToolRule
from .declared import declared_action

if TYPE_CHECKING:
    from langgraph.prebuilt.tool_node import ToolCallRequest

SUMMARY_LIMIT = 1000


def summarize_call(name: str, arguments: Mapping[str, Any], resource: str | None = None) -> str:
    """A value-free summary, as a person would write it: the tool, its argument names in
    the call's order, and the resource it declares (``send_email (to, subject, body)``,
    ``deploy (target) on https://ci.example.com/app``); never an argument's value."""
    text = name
    if arguments:
        text += " (" + ", ".join(str(key) for key in arguments) + ")"
    if resource is not None:
        text += f" on {resource}"
    return _fit(text)


def describe_tool_call(request: ToolCallRequest) -> str:
    """The default describer: tool name, declared resource and argument names, never values."""
    call = request.tool_call
    resource = declared_action(getattr(request, "tool", None)).resource
    return summarize_call(call["name"], call.get("args") or {}, resource)


def summary_for(request: ToolCallRequest, rule: ToolRule, default: ToolCallDescriber | None) -> str:
    """The summary for a new request: the rule's description, else the default describer."""
    source = rule.description if rule.description is not None else default
    if source is None:
        return describe_tool_call(request)
    text = source if isinstance(source, str) else _described(source, request)
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"description of tool {rule.tool!r}: the describer must return text")
    return _fit(text)


def takes_call_state_runtime(describer: Callable[..., Any]) -> bool:
    """True for a HumanInTheLoopMiddleware describer: ``(tool_call, state, runtime)``."""
    try:
        parameters = inspect.signature(describer).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: ours
        return False
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 3 or any(p.kind is p.VAR_POSITIONAL for p in parameters)


def _described(describer: Callable[..., Any], request: ToolCallRequest) -> Any:
    if not takes_call_state_runtime(describer):
        return describer(request)
    from langgraph.runtime import get_runtime

    return describer(request.tool_call, request.state, get_runtime())


def _fit(text: str) -> str:
    # action.summary is limited to 1000 characters by the AAIS schema.
    return text if len(text) <= SUMMARY_LIMIT else text[: SUMMARY_LIMIT - 1] + "…"

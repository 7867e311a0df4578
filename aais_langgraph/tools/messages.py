"""What the model is told about a gated call: refusals it can act on, and edit notices.

Every text here is value-free: it names the tool, the outcome and the request
id, never an argument value, so it is safe in transcripts and logs.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.messages.tool import ToolCall
from langgraph.types import Command

from ..protocol import ApprovalResolved
from ..protocol.extensions import EXTENSION_NAMESPACE

EDIT_NOTICE = (
    "Note: a reviewer edited the arguments of this tool call, and the edited call was "
    "approved and run. The result below is for the edited call, not the one in your "
    "message. Do not re-issue your original call."
)
"""Default text put before the result of a call that ran with edited arguments."""

_REFUSALS: dict[str, str] = {
    "denied": (
        "The reviewer denied this call to '{tool}'; it was not executed. Do not retry it "
        "unless the user asks you to."
    ),
    "cancelled": (
        "The approval request for this call to '{tool}' was cancelled; it was not executed. "
        "Do not retry it unless the user asks you to."
    ),
    "expired": (
        "No decision arrived before the approval request for this call to '{tool}' "
        "expired; it was not executed. Ask the user before trying again."
    ),
    "stale": (
        "This call to '{tool}' changed after it was shown for approval, so it was not "
        "executed. Ask the user before trying again."
    ),
    "invalid": (
        "The decision on this call to '{tool}' was not one the request offered; it was "
        "not executed."
    ),
    "conflict": (
        "The approval request for this call to '{tool}' was already resolved differently; "
        "it was not executed."
    ),
}


def _blocked(call: ToolCall, content: str, resolved: ApprovalResolved | None) -> ToolMessage:
    artifact = None if resolved is None else {"aais": resolved.to_json()}
    return ToolMessage(
        content=content,
        name=call["name"],
        tool_call_id=call["id"] or "",
        status="error",
        artifact=artifact,
    )


def refusal_message(call: ToolCall, resolved: ApprovalResolved) -> ToolMessage:
    """The error ``ToolMessage`` for any outcome other than an approval.

    The recorded ``approval.resolved`` envelope travels in ``artifact["aais"]``
    (not shown to the model) for presenters and audits.
    """
    outcome = resolved.resolution.outcome
    template = _REFUSALS.get(outcome, _REFUSALS["invalid"])
    content = template.format(tool=call["name"])
    if EXTENSION_NAMESPACE + "policy" in (resolved.resolution.extensions or {}):
        # Settled by policy, not by a person: policy reasons are value-free by contract.
        content = (
            f"Policy does not allow this call to '{call['name']}'; it was not executed. "
            f"Reason: {resolved.resolution.message}"
        )
    return _blocked(
        call, f"{content} (approval request {resolved.resolution.request_id})", resolved
    )


_NOT_RUN: dict[str, str] = {
    "unknown": (
        "The outcome of this approved call to '{tool}' is unknown: the run executing it "
        "stopped before it finished. It was not run again. Do not retry it; tell the user "
        "so they can check whether it took effect."
    ),
    "executed": (
        "This approved call to '{tool}' already ran, but its result was lost when the run "
        "stopped. It was not run again."
    ),
    "done": (
        "A reviewer confirmed this approved call to '{tool}' already took effect; it was not "
        "run again."
    ),
}


def not_run_message(
    call: ToolCall, state: str, request_id: str, resolved: ApprovalResolved | None = None
) -> ToolMessage:
    """An approved call the gate did not run after a crash: its outcome is unknown or known."""
    content = _NOT_RUN.get(state, _NOT_RUN["unknown"]).format(tool=call["name"])
    return _blocked(call, f"{content} (approval request {request_id})", resolved)


def time_of_use_message(call: ToolCall, request_id: str) -> ToolMessage:
    """The call about to run does not match the approved digest: refuse it as stale."""
    content = _REFUSALS["stale"].format(tool=call["name"])
    return _blocked(call, f"{content} (approval request {request_id})", None)


def unpresentable_message(call: ToolCall, reason: str) -> ToolMessage:
    """The arguments cannot be put in an AAIS request (e.g. not I-JSON)."""
    return _blocked(
        call,
        f"This call to '{call['name']}' cannot be sent for approval ({reason}); it was not "
        "executed. Fix the arguments and call again.",
        None,
    )


def _noticed(message: ToolMessage, notice: str) -> ToolMessage:
    content: Any = message.content
    if isinstance(content, str):
        updated: Any = f"{notice}\n\n{content}" if content else notice
    else:
        block: Any = (
            notice
            if all(isinstance(b, str) for b in content)
            else {
                "type": "text",
                "text": notice,
            }
        )
        updated = [block, *content]
    return message.model_copy(update={"content": updated})


def with_edit_notice(
    result: ToolMessage | Command[Any], call_id: str, notice: str | None
) -> ToolMessage | Command[Any]:
    """Put ``notice`` before the result of an edited call (in a ``Command`` update too)."""
    if not notice:
        return result
    if isinstance(result, ToolMessage):
        return _noticed(result, notice)
    update = result.update
    if not isinstance(update, dict) or not isinstance(update.get("messages"), list):
        return result
    messages = [
        _noticed(m, notice) if isinstance(m, ToolMessage) and m.tool_call_id == call_id else m
        for m in update["messages"]
    ]
    return replace(result, update={**update, "messages": messages})

"""What the model is told about a gated call: refusals it can act on, and edit notices.

Every text here is value-free: it names the tool, the outcome and the request
id, never an argument value, so it is safe in transcripts and logs. The one
exception is a reviewer's note on a denial, shown only for a tool configured with
``reviewer_note=True``. A denial reads as HumanInTheLoopMiddleware's reject, and
every refusal carries its ``additional_kwargs`` markers (``lc_source``,
``lc_data``: not sent to the model); the AAIS resolution is in ``artifact["aais"]``.
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

DECISION_SOURCE = "hitl_interrupt_decision"
"""``additional_kwargs["lc_source"]`` of a message written in place of a tool's result
(HumanInTheLoopMiddleware's value, so code that reads it keeps working)."""

DENIED = (
    "User rejected the tool call for `{tool}` with id {call_id}. The tool was not executed. "
    "Do not retry this tool call unless the user explicitly requests it."
)
"""What the model reads for a denied call (HumanInTheLoopMiddleware's reject text)."""

DENIED_WITH_NOTE = "User rejected the tool call for `{tool}` with reason: {note}"
"""What the model reads for a denied call with a reviewer's note, when the tool opts in."""

_REFUSALS: dict[str, str] = {
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


def _blocked(
    call: ToolCall, content: str, resolved: ApprovalResolved | None, *, refused: bool = True
) -> ToolMessage:
    artifact = None if resolved is None else {"aais": resolved.to_json()}
    markers = {"lc_source": DECISION_SOURCE, "lc_data": {"decision": "reject"}}
    return ToolMessage(
        content=content,
        name=call["name"],
        tool_call_id=call["id"] or "",
        status="error",
        artifact=artifact,
        additional_kwargs=markers if refused else {},
    )


def refusal_message(
    call: ToolCall, resolved: ApprovalResolved, *, note: str | None = None
) -> ToolMessage:
    """The error ``ToolMessage`` for any outcome other than an approval.

    ``note`` is the reviewer's note on a denial (only for a tool that opted in). The
    recorded ``approval.resolved`` envelope travels in ``artifact["aais"]`` (not shown
    to the model) for presenters and audits.
    """
    outcome = resolved.resolution.outcome
    if EXTENSION_NAMESPACE + "policy" in (resolved.resolution.extensions or {}):
        # Settled by policy, not by a person: policy reasons are value-free by contract.
        content = (
            f"Policy does not allow this call to '{call['name']}'; it was not executed. "
            f"Reason: {resolved.resolution.message}"
        )
    elif outcome == "denied":
        template = DENIED if note is None else DENIED_WITH_NOTE
        return _blocked(
            call, template.format(tool=call["name"], call_id=call["id"], note=note), resolved
        )
    else:
        content = _REFUSALS.get(outcome, _REFUSALS["invalid"]).format(tool=call["name"])
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


def reply_message(call: ToolCall, resolved: ApprovalResolved, reply: str) -> ToolMessage:
    """A reviewer answered for the tool (HumanInTheLoopMiddleware's ``respond``, a deny
    carrying the reply flag): their text is the tool's result, with status ``success``;
    the tool did not run. The recorded resolution travels in ``artifact["aais"]``."""
    return ToolMessage(
        content=reply,
        name=call["name"],
        tool_call_id=call["id"] or "",
        status="success",
        artifact={"aais": resolved.to_json()},
        additional_kwargs={"lc_source": DECISION_SOURCE, "lc_data": {"decision": "respond"}},
    )


def not_run_message(
    call: ToolCall, state: str, request_id: str, resolved: ApprovalResolved | None = None
) -> ToolMessage:
    """An approved call the gate did not run after a crash: its outcome is unknown or known.

    Args:
        call: the approved tool call.
        state: its execution record's state (``unknown``, ``executed``, ...).
        request_id: the approval's request.
        resolved: the gate's not-run resolution, for the artifact.
    """
    content = _NOT_RUN.get(state, _NOT_RUN["unknown"]).format(tool=call["name"])
    return _blocked(call, f"{content} (approval request {request_id})", resolved, refused=False)


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
    """``message`` with ``notice`` first, once (a retried handler may return it again), in
    the shape of its content: text before text, a plain string before plain strings, else
    a text block."""
    content: Any = message.content
    if isinstance(content, str):
        if notice in content:
            return message
        updated: Any = f"{notice}\n\n{content}" if content else notice
    else:
        if any(notice in str(block) for block in content):
            return message
        plain = bool(content) and all(isinstance(b, str) for b in content)
        block: Any = notice if plain else {"type": "text", "text": notice}
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

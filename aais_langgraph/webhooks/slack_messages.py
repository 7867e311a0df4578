"""What a Slack app channel posts: Block Kit messages of a request and of its resolution.

:func:`request_message` shows the summary, the risk, the kind and name of the action,
its resource, the harness and the requester (SPEC §7), the expiry, its place in a
quorum ("approval 2 of 2, approved by ..."), an opaque binding
when the action carries one (SPEC §6: a presenter MUST show it), the arguments only
when the channel shows them and its principal may view the request, and one button
per offered approve or deny choice (SPEC §4.2: only offered pairs). A button's value
(:class:`ButtonValue`) carries the request id, the action digest the message showed
and the choice, so a click answers exactly what was shown; a session or persistent
choice asks for confirmation, naming its scope and the authority's own words for it
(SPEC §9). :func:`resolved_message` is the same message rewritten once the request is
resolved: the outcome, who decided, and no buttons.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..authority.authorization import requester_of
from ..protocol import (
    AAISValidationError,
    ApprovalRequested,
    ApprovalResolved,
    loads_strict,
    parse_timestamp,
)
from ..protocol.extensions import QUORUM_EXTENSION
from ..protocol.parts import Choice
from .plain_text import escape_mrkdwn as _escape
from .plain_text import one_line as _plain

__all__ = ["ButtonValue", "request_message", "resolved_message"]

_ARGUMENTS_SHOWN = 1500
"""How many characters of the arguments a message shows at most."""
_BUTTON_TEXT = 75
"""Slack's longest button text."""
_CONFIRM_TEXT = 300
_VALUE_KEYS = {"r", "d", "c", "s"}
MAX_BUTTON_VALUE = 2000
"""Slack's longest button value (characters)."""
_OUTCOMES = {
    "approved": "Approved",
    "denied": "Denied",
    "cancelled": "Cancelled",
    "expired": "Expired",
    "stale": "Stale",
    "invalid": "Invalid",
    "conflict": "Conflict",
}


@dataclass(frozen=True)
class ButtonValue:
    """What one button answers: the request, the digest shown, the decision and scope."""

    request_id: str
    action_digest: str
    decision: str
    scope: str

    def encode(self) -> str:
        """The button's ``value``: compact JSON."""
        document = {"r": self.request_id, "d": self.action_digest, "c": self.decision}
        document["s"] = self.scope
        return json.dumps(document, separators=(",", ":"))

    @classmethod
    def decode(cls, value: object) -> ButtonValue:
        """A button's value read strictly; ``ValueError`` names the field, never a value."""
        if not isinstance(value, str) or len(value) > MAX_BUTTON_VALUE:
            raise ValueError("/actions/0/value: must be a button value of this app")
        try:
            document = loads_strict(value)
        except AAISValidationError:
            raise ValueError("/actions/0/value: not the JSON of a button of this app") from None
        if not isinstance(document, dict) or set(document) != _VALUE_KEYS:
            raise ValueError("/actions/0/value: not a button of this app")
        if not all(isinstance(document[key], str) and document[key] for key in _VALUE_KEYS):
            raise ValueError("/actions/0/value: every member must be a non-empty string")
        return cls(document["r"], document["d"], document["c"], document["s"])


def request_message(requested: ApprovalRequested, *, include_arguments: bool) -> dict[str, Any]:
    """The ``text`` and ``blocks`` of a pending request, with its buttons."""
    request = requested.request
    headline = f"Approval requested ({request.risk.level} risk): {request.action.summary}"
    blocks = _facts(requested, include_arguments=include_arguments, headline=headline)
    buttons = [
        _button(requested, choice) for choice in request.choices if choice.decision != "cancel"
    ]
    if buttons:
        blocks.append({"type": "actions", "block_id": "aais_choices", "elements": buttons})
    return {"text": _escape(headline), "blocks": blocks}


def resolved_message(
    requested: ApprovalRequested,
    resolved: ApprovalResolved,
    *,
    decided_by: str | None,
    include_arguments: bool,
) -> dict[str, Any]:
    """The message of a resolved request: its outcome, who decided, no buttons.

    Args:
        requested: the request the message showed.
        resolved: its resolution.
        decided_by: who decided it (None: the authority, an expiry).
        include_arguments: show the action's arguments (the channel allows it and its
            principal may view them).
    """
    resolution = resolved.resolution
    outcome = _OUTCOMES.get(resolution.outcome, resolution.outcome)
    request = requested.request
    headline = f"{outcome} ({request.risk.level} risk): {request.action.summary}"
    blocks = _facts(requested, include_arguments=include_arguments, headline=headline)
    who = f"by `{_escape(decided_by)}`" if decided_by else "by the authority"
    scope = f", scope {resolution.effective_scope}" if resolution.effective_scope else ""
    said = f"*{outcome}* {who}{scope}: {_escape(resolution.message)}"
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": said}]})
    text = f"{headline} ({'by ' + decided_by if decided_by else 'by the authority'})"
    return {"text": _escape(text), "blocks": blocks}


def _facts(
    requested: ApprovalRequested, *, include_arguments: bool, headline: str
) -> list[dict[str, Any]]:
    request = requested.request
    action = request.action
    lines = [f"*{_escape(headline)}*", f"`{_escape(action.kind)}` `{_escape(action.name)}`"]
    presentation = action.presentation
    if presentation is not None and presentation.redacted:
        hint = presentation.binding_hint or "an opaque reference"
        lines.append(f"Bound to: {_escape(hint)} (secret omitted)")
    if include_arguments:
        shown = json.dumps(action.arguments, ensure_ascii=False, sort_keys=True)
        if len(shown) > _ARGUMENTS_SHOWN:
            shown = shown[:_ARGUMENTS_SHOWN] + "…"
        lines.append(f"```{_escape(shown.replace('```', '` ` `'))}```")
    if action.resource is not None:
        lines.append(f"Resource: `{_escape(action.resource)}`")
    who = f"from `{_escape(request.origin.harness)}`"
    requester = requester_of(request)
    if requester is not None:
        who += f" for `{_escape(requester)}`"
    context = f"{who} · request `{_escape(request.id)}` · digest `{request.action_digest[:19]}…`"
    quorum = _quorum(request.extensions)
    if quorum:
        context += f" · {quorum}"
    if request.expires_at is not None:
        expiry = str(request.expires_at)
        moment = int(parse_timestamp(expiry).timestamp())
        # Slack shows the moment in each reader's own time zone; the fallback is UTC.
        context += f" · expires <!date^{moment}^{{date_short_pretty}} {{time}}|{_escape(expiry)}>"
    return [
        {"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(lines)}},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": context}]},
    ]


def _quorum(extensions: Mapping[str, Any] | None) -> str | None:
    """ "approval 2 of 2, approved by `alice`" for a request of a quorum (its extension)."""
    value = (extensions or {}).get(QUORUM_EXTENSION)
    if not isinstance(value, Mapping):
        return None
    index, of = value.get("index"), value.get("of")
    if not isinstance(index, int) or not isinstance(of, int) or not 1 <= index <= of:
        return None
    said = f"approval {index} of {of}"
    approved = value.get("approved_by")
    names = [a for a in approved if isinstance(a, str)] if isinstance(approved, list) else []
    if names:
        said += ", approved by " + ", ".join(f"`{_escape(name)}`" for name in names)
    return said


def _button(requested: ApprovalRequested, choice: Choice) -> dict[str, Any]:
    request = requested.request
    value = ButtonValue(request.id, request.action_digest, choice.decision, choice.scope)
    button: dict[str, Any] = {
        "type": "button",
        "action_id": f"aais_{choice.decision}_{choice.scope}",
        "text": {"type": "plain_text", "text": _cut(_plain(choice.label), _BUTTON_TEXT)},
        "value": value.encode(),
        "style": "primary" if choice.decision == "approve" else "danger",
    }
    if choice.scope != "once":
        explained = f"{choice.label} (scope {choice.scope}): covers later matching actions "
        explained += "as the authority's constraints for this choice say."
        button["confirm"] = {
            "title": {"type": "plain_text", "text": f"Approve for the {choice.scope}?"[:100]},
            "text": {"type": "plain_text", "text": _cut(_plain(explained), _CONFIRM_TEXT)},
            "confirm": {"type": "plain_text", "text": "Approve"},
            "deny": {"type": "plain_text", "text": "Back"},
        }
    return button


def _cut(text: str, most: int) -> str:
    return text if len(text) <= most else text[: most - 1] + "…"

"""Presenter rules for a terminal: escape control characters, show complete values."""

from __future__ import annotations

import json
import unicodedata
from datetime import datetime, timezone
from typing import Any

from ..authority import explain_constraints
from ..ledger import Grant
from ..protocol import Request

_INVISIBLE = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})
_LAYOUT = frozenset({"\n"})


def escape(text: str, *, keep: frozenset[str] = frozenset()) -> str:
    """Make control, format (e.g. bidi overrides) and unassigned characters visible."""
    return "".join(
        f"\\u{ord(ch):04x}" if unicodedata.category(ch) in _INVISIBLE and ch not in keep else ch
        for ch in text
    )


def show_value(value: Any) -> str:
    """A complete JSON rendering of a value with every invisible character escaped."""
    # json.dumps escapes control characters inside strings; the newlines left are layout.
    return escape(json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True), keep=_LAYOUT)


def request_line(request: Request) -> str:
    """One line of the pending list."""
    expires = request.expires_at or "-"
    return (
        f"{request.id}  {request.risk.level:<8}  expires {expires}  "
        f"{escape(request.origin.harness)}/{escape(request.origin.session_id)}  "
        f"{escape(request.action.summary)}"
    )


def request_details(request: Request) -> str:
    """Everything a human needs before deciding: origin, action, risk, choices, digest."""
    action = request.action
    lines = [
        f"request   {request.id}",
        f"created   {request.created_at}",
        f"expires   {request.expires_at or '-'}",
        f"origin    {show_value(request.origin.to_json())}",
        f"action    {escape(action.kind)} {escape(action.name)}",
        f"summary   {escape(action.summary)}",
        f"arguments {show_value(action.arguments)}",
    ]
    if action.resource is not None:
        lines.append(f"resource  {escape(action.resource)}")
    if action.working_directory is not None:
        lines.append(f"directory {escape(action.working_directory)}")
    for effect in action.effects or []:
        lines.append(f"effect    {escape(effect)}")
    if action.presentation is not None and action.presentation.redacted:
        hint = action.presentation.binding_hint or ""
        lines.append(f"REDACTED  values are opaque references; binding hint: {escape(hint)}")
    lines.append(f"risk      {request.risk.level}: " + "; ".join(map(escape, request.risk.reasons)))
    lines.append("choices")
    for choice in request.choices:
        lines.append(f"  - {choice.decision}/{choice.scope}: {escape(choice.label)}")
        for line in explain_constraints(choice.scope_constraints or {}):
            lines.append(f"      covers {escape(line)}")
    lines.append(f"digest    {request.action_digest}")
    return "\n".join(lines)


def grant_line(grant: Grant) -> str:
    """One line of the grant list."""
    state = "revoked" if grant.revoked_at is not None else "live"
    constraints = escape(json.dumps(grant.constraints, ensure_ascii=False, sort_keys=True))
    return (
        f"{grant.grant_id}  {state:<7}  {grant.scope:<10}  session {escape(grant.session_id)}  "
        f"{escape(grant.action_name)}  {constraints}"
    )


def unknown_line(entry: dict[str, Any]) -> str:
    """One line of the unknown-outcome list."""
    return (
        f"{entry['request_id']}  since {entry['since']}  thread {escape(str(entry['thread_id']))}  "
        f"{escape(str(entry['summary']))}"
    )


def _moment(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def resume_state(work: dict[str, Any]) -> str:
    """How an answered request's resume stands: since, attempts, last error, lease holder."""
    parts = [f"{work['state']} since {_moment(work['since'])}", f"attempts {work['attempts']}"]
    if work.get("last_error"):
        parts.append(f"last error: {escape(str(work['last_error']))}")
    if work.get("lease_holder"):
        parts.append(f"lease held by {escape(str(work['lease_holder']))}")
    return ", ".join(parts)


def resuming_line(work: dict[str, Any]) -> str:
    """One line of ``pending`` for an answer whose thread still has to be resumed."""
    return (
        f"RESUMING {escape(work['request_id'])} thread {escape(work['thread_id'])} "
        f"{escape(str(work.get('outcome')))}: {resume_state(work)}"
    )

"""What a webhook POST carries: the AAIS envelope in a Standard Webhooks body, or Slack JSON.

- :func:`aais_body` (``format = "aais"``): ``{"type", "timestamp", "data"}`` as the
  Standard Webhooks spec recommends, with ``data`` the AAIS envelope itself
  (``approval.requested`` or ``approval.resolved``; ``approval.expiring``,
  ``approval.reminder`` and ``approval.escalated`` carry the ``approval.requested``
  envelope of the request still waiting, ``approval.requester_notice`` the
  ``approval.resolved`` one). The envelope is
  the one presenters see: secrets are already opaque references (SPEC's redaction).
- :func:`slack_body` (``format = "slack"``): a Slack incoming-webhook message with
  the summary, the risk, the outcome and a link to the inbox; the action's
  arguments only when the subscription allows them.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

from ..ledger.deliveries import DeliveryNotice
from ..protocol import ApprovalRequested, ApprovalResolved, format_timestamp
from .plain_text import escape_mrkdwn

__all__ = ["aais_body", "escape_mrkdwn", "slack_body"]

_ARGUMENTS_SHOWN = 1500
"""How many characters of the arguments a Slack message shows at most."""


def aais_body(
    notice: DeliveryNotice,
    requested: ApprovalRequested,
    resolved: ApprovalResolved | None,
    now: float,
) -> dict[str, Any]:
    """The Standard Webhooks body of ``notice``: its type, the moment, the AAIS envelope.

    Args:
        notice: what the delivery announces.
        requested: the request it is about.
        resolved: its resolution, for a resolved notice or a requester notice.
        now: the moment (epoch seconds).
    """
    told_resolved = notice in ("approval.resolved", "approval.requester_notice")
    envelope = resolved if told_resolved and resolved is not None else requested
    return {
        "type": notice,
        "timestamp": format_timestamp(datetime.fromtimestamp(now, tz=timezone.utc)),
        "data": envelope.model_dump(mode="json", exclude_none=True),
    }


def slack_body(
    notice: DeliveryNotice,
    requested: ApprovalRequested,
    resolved: ApprovalResolved | None,
    *,
    inbox_url: str | None,
    include_arguments: bool,
) -> dict[str, Any]:
    """A Slack incoming-webhook message for ``notice`` (``text`` plus ``blocks``).

    Args:
        notice: what the delivery announces.
        requested: the request it is about.
        resolved: its resolution, for a resolved notice.
        inbox_url: a link to the approval inbox (None: no link).
        include_arguments: show the action's arguments (redacted values stay redacted).
    """
    request = requested.request
    summary = escape_mrkdwn(request.action.summary)
    risk = request.risk.level
    if notice == "approval.requested":
        headline = f"Approval requested ({risk} risk): {summary}"
    elif notice == "approval.expiring":
        headline = f"Approval expires soon ({risk} risk): {summary}"
    elif notice == "approval.reminder":
        headline = f"Reminder: approval waiting ({risk} risk): {summary}"
    elif notice == "approval.escalated":
        headline = f"Escalated: approval waiting ({risk} risk): {summary}"
    else:
        outcome = resolved.resolution.outcome if resolved is not None else "resolved"
        headline = f"Approval {outcome} ({risk} risk): {summary}"
    kind, name = escape_mrkdwn(request.action.kind), escape_mrkdwn(request.action.name)
    lines = [headline, f"`{kind}` `{name}`"]
    if include_arguments:
        shown = json.dumps(request.action.arguments, ensure_ascii=False, sort_keys=True)
        if len(shown) > _ARGUMENTS_SHOWN:
            shown = shown[:_ARGUMENTS_SHOWN] + "…"
        lines.append(f"```{escape_mrkdwn(shown.replace('```', '` ` `'))}```")
    if inbox_url:
        lines.append(f"<{escape_mrkdwn(inbox_url)}|Open the approval inbox>")
    text = "\n".join(lines)
    return {
        "text": headline,
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": text}}],
    }

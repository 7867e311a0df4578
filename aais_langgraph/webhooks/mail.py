"""Email notices: the message a subscription of ``format = "email"`` sends, and its SMTP send.

Sent with the standard library's :mod:`smtplib` and :mod:`email` (kept with Python
itself, no dependency; the sender runs each attempt in a worker thread, so a
blocking client fits). The message is plain text: the request's summary, action
kind and name, risk, expiry and outcome, the action's arguments only when the
subscription allows them (the envelope's values, secrets already opaque references),
and a link that opens the request's card in the inbox after sign-in
(``INBOX#request=ID``). It carries no link that decides anything: mail scanners and
link previews open every link in a message, so a link that approved would approve
unread.
"""

from __future__ import annotations

import json
import smtplib
import ssl
from dataclasses import dataclass, field
from email.message import EmailMessage
from email.utils import formatdate
from urllib.parse import quote

from ..ledger.deliveries import DeliveryNotice
from ..protocol import ApprovalRequested, ApprovalResolved

__all__ = ["MailSettings", "email_message", "inbox_link", "send_mail"]

_ARGUMENTS_SHOWN = 4000
"""How many characters of the arguments a message shows at most."""


@dataclass(frozen=True)
class MailSettings:
    """Where an email subscription sends and as whom (see the ``[[webhooks]]`` docs)."""

    to: tuple[str, ...]
    sender: str
    host: str
    port: int = 587
    starttls: bool = True
    username: str | None = None
    password: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        for address in (*self.to, self.sender):
            if not _is_address(address):
                raise ValueError("to, from: each must be an email address")
        if not self.host:
            raise ValueError("smtp_host: must be a host name")
        if not 0 < self.port < 65536:
            raise ValueError("smtp_port: must be a port number")
        if (self.username is None) != (self.password is None):
            raise ValueError("username_env, password_env: give both or neither")


def _is_address(text: str) -> bool:
    local, at, domain = text.partition("@")
    return bool(at and local and domain) and not any(c in text for c in "\r\n,;<> \t")


def inbox_link(inbox_url: str, request_id: str) -> str:
    """The inbox address that opens ``request_id``'s card (after sign-in, if needed)."""
    return f"{inbox_url.split('#', 1)[0]}#request={quote(request_id, safe='')}"


def email_message(
    notice: DeliveryNotice,
    requested: ApprovalRequested,
    resolved: ApprovalResolved | None,
    *,
    sender: str,
    to: tuple[str, ...],
    message_id: str,
    inbox_url: str | None,
    include_arguments: bool,
) -> EmailMessage:
    """The plain-text message of ``notice``.

    Args:
        notice: what the delivery announces.
        requested: the request it is about.
        resolved: its resolution, if it has one.
        sender: the ``From`` address.
        to: the recipients.
        message_id: the delivery's stable id: the ``Message-ID``, so a resent message
            is recognisably the same.
        inbox_url: the inbox the message links to (the request's card), if any.
        include_arguments: show the action's arguments.
    """
    request = requested.request
    summary = _line(request.action.summary)
    risk = request.risk.level
    outcome = resolved.resolution.outcome if resolved is not None else None
    subjects = {
        "approval.requested": f"Approval requested ({risk} risk): {summary}",
        "approval.expiring": f"Approval expires soon ({risk} risk): {summary}",
        "approval.reminder": f"Reminder: approval waiting ({risk} risk): {summary}",
        "approval.escalated": f"Escalated to you: approval waiting ({risk} risk): {summary}",
        "approval.resolved": f"Approval {outcome} ({risk} risk): {summary}",
        "approval.requester_notice": f"Your approval request was {outcome}: {summary}",
    }
    lines = [
        subjects[notice],
        "",
        f"Action: {_line(request.action.kind)} {_line(request.action.name)}",
        f"Risk: {risk}",
        f"Request: {request.id}",
    ]
    if request.expires_at is not None and outcome is None:
        lines.append(f"Expires: {request.expires_at}")
    if outcome is not None:
        lines.append(f"Outcome: {outcome}")
    if include_arguments:
        shown = json.dumps(request.action.arguments, ensure_ascii=False, sort_keys=True, indent=2)
        if len(shown) > _ARGUMENTS_SHOWN:
            shown = shown[:_ARGUMENTS_SHOWN] + "…"
        lines += ["", "Arguments:", shown]
    if inbox_url:
        lines += ["", f"Open it in the approval inbox: {inbox_link(inbox_url, request.id)}"]
    lines += [
        "",
        "This message decides nothing: answer in the inbox, where you sign in first.",
    ]
    message = EmailMessage()
    message["Subject"] = subjects[notice][:200]
    message["From"] = sender
    message["To"] = ", ".join(to)
    message["Date"] = formatdate(localtime=False)
    message["Message-ID"] = f"<{message_id}@{sender.rpartition('@')[2]}>"
    message["Auto-Submitted"] = "auto-generated"
    message.set_content("\n".join(lines))
    return message


def send_mail(settings: MailSettings, message: EmailMessage, *, timeout: float) -> None:
    """Send ``message`` by SMTP (STARTTLS first when ``settings.starttls``; log in when
    given a user); raises :class:`smtplib.SMTPException` or :class:`OSError` on failure."""
    with smtplib.SMTP(settings.host, settings.port, timeout=timeout) as client:
        if settings.starttls:
            client.starttls(context=ssl.create_default_context())
        if settings.username is not None and settings.password is not None:
            client.login(settings.username, settings.password)
        client.send_message(message)


def _line(text: str) -> str:
    """``text`` on one line: its control characters shown as spaces."""
    return "".join(" " if ord(char) < 32 or 127 <= ord(char) < 160 else char for char in text)

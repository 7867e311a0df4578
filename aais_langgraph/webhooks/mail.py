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

The request's text enters the headers and the body only through
:mod:`.plain_text` (one line, no encoded word), and the message is checked as it will
be sent: parsed back, it must hold exactly the headers written, or it is
:class:`MessageNotBuilt` (the sender counts that as a failed attempt, so the delivery
ends ``dead`` after its attempts rather than waiting for ever).
"""

from __future__ import annotations

import email
import email.policy
import smtplib
import ssl
from dataclasses import dataclass, field
from email.errors import MessageError
from email.message import EmailMessage
from email.utils import formatdate
from urllib.parse import quote

from ..ledger.deliveries import DeliveryNotice
from ..protocol import ApprovalRequested, ApprovalResolved
from .plain_text import header_text, json_lines, one_line

__all__ = ["MailSettings", "MessageNotBuilt", "email_message", "inbox_link", "send_mail"]

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


class MessageNotBuilt(ValueError):
    """The message cannot be built as it must be sent (a recipient that is no plain
    address, a header that would not read back as written); says which part, no value."""


def _is_address(text: str) -> bool:
    local, at, domain = text.partition("@")
    return (
        bool(at and local and domain)
        and header_text(text) == text
        and not any(c in text for c in ',;<> \t"()')
    )


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
    summary = header_text(request.action.summary)
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
        f"Action: {one_line(request.action.kind)} {one_line(request.action.name)}",
        f"Risk: {risk}",
        f"Request: {request.id}",
    ]
    if request.expires_at is not None and outcome is None:
        lines.append(f"Expires: {request.expires_at}")
    if outcome is not None:
        lines.append(f"Outcome: {outcome}")
    if include_arguments:
        shown = json_lines(request.action.arguments)
        if len(shown) > _ARGUMENTS_SHOWN:
            shown = shown[:_ARGUMENTS_SHOWN] + "…"
        lines += ["", "Arguments:", shown]
    if inbox_url:
        lines += ["", f"Open it in the approval inbox: {inbox_link(inbox_url, request.id)}"]
    lines += [
        "",
        "This message decides nothing: answer in the inbox, where you sign in first.",
    ]
    for part, addresses in (("from", (sender,)), ("to", to)):
        if not addresses or not all(_is_address(address) for address in addresses):
            raise MessageNotBuilt(f"{part}: must be plain email addresses")
    headers = {
        "Subject": subjects[notice][:200],
        "From": sender,
        "To": ", ".join(to),
        "Date": formatdate(localtime=False),
        "Message-ID": f"<{header_text(message_id)}@{sender.rpartition('@')[2]}>",
        "Auto-Submitted": "auto-generated",
    }
    message = EmailMessage()
    try:
        for name, value in headers.items():
            message[name] = value
        message.set_content("\n".join(lines))
    except (ValueError, MessageError):
        raise MessageNotBuilt("the message's headers or body cannot be written") from None
    _check_headers(message, list(headers))
    return message


def _check_headers(message: EmailMessage, written: list[str]) -> None:
    """Raise :class:`MessageNotBuilt` unless ``message``, written as SMTP sends it and
    parsed back, holds exactly the headers ``written`` and the MIME ones
    :meth:`~email.message.EmailMessage.set_content` adds: a value that folded into a
    header line (or a body) of its own is caught here, whatever the Python."""
    try:
        sent = message.as_bytes(policy=email.policy.SMTP)
    except (ValueError, MessageError):
        raise MessageNotBuilt("the message cannot be written") from None
    parsed = email.message_from_bytes(sent, policy=email.policy.SMTP)
    expected = [*written, "Content-Type", "Content-Transfer-Encoding", "MIME-Version"]
    if sorted(name.lower() for name in parsed) != sorted(n.lower() for n in expected):
        raise MessageNotBuilt("a header value would be read as another header")
    if parsed.defects or parsed.get_content().splitlines() != message.get_content().splitlines():
        raise MessageNotBuilt("the message's body would not read back as written")


def send_mail(settings: MailSettings, message: EmailMessage, *, timeout: float) -> None:
    """Send ``message`` by SMTP (STARTTLS first when ``settings.starttls``; log in when
    given a user); raises :class:`smtplib.SMTPException` or :class:`OSError` on failure."""
    with smtplib.SMTP(settings.host, settings.port, timeout=timeout) as client:
        if settings.starttls:
            client.starttls(context=ssl.create_default_context())
        if settings.username is not None and settings.password is not None:
            client.login(settings.username, settings.password)
        client.send_message(message)

"""A real SMTP server on loopback (``aiosmtpd``) that keeps every message it accepts."""

from __future__ import annotations

import email
import ssl
import threading
from email.message import Message
from types import TracebackType
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

from .receivers import free_port


class _Keeper:
    def __init__(self, box: Mailbox) -> None:
        self.box = box

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        message = email.message_from_bytes(envelope.content)
        with self.box.lock:
            if self.box.refuse_first > 0:
                self.box.refuse_first -= 1
                return "451 try again later"
            self.box.messages.append((tuple(envelope.rcpt_tos), message))
            self.box.over_tls.append(session.ssl is not None)
        return "250 OK"


class Mailbox:
    """An SMTP server on 127.0.0.1: ``messages`` holds (recipients, message) of each
    accepted mail; ``refuse_first`` answers 451 to the first messages; with ``login``
    (user, password) it asks clients to log in as that user (AUTH, without TLS: loopback);
    with ``tls`` (a certificate chain file and its key) it offers STARTTLS and requires it
    before anything else (``over_tls`` says, for each accepted mail, whether it came over TLS)."""

    def __init__(
        self,
        *,
        refuse_first: int = 0,
        login: tuple[str, str] | None = None,
        tls: tuple[str, str] | None = None,
    ) -> None:
        self.lock = threading.Lock()
        self.refuse_first = refuse_first
        self.messages: list[tuple[tuple[str, ...], Message]] = []
        self.over_tls: list[bool] = []
        self.logins: list[str] = []
        self.port = free_port()
        options: dict[str, Any] = {}
        if login is not None:
            options = {
                "authenticator": self._authenticator(login),
                "auth_require_tls": tls is not None,
                "auth_required": True,
            }
        if tls is not None:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(*tls)
            options.update(tls_context=context, require_starttls=True)
        self._controller = Controller(
            _Keeper(self), hostname="127.0.0.1", port=self.port, **options
        )

    def _authenticator(self, login: tuple[str, str]) -> Any:
        def check(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> Any:
            ok = (
                isinstance(data, LoginPassword)
                and (
                    data.login.decode(),
                    data.password.decode(),
                )
                == login
            )
            if ok:
                self.logins.append(login[0])
            return AuthResult(success=ok)

        return check

    def __enter__(self) -> Mailbox:
        self._controller.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._controller.stop()

    def bodies(self) -> list[str]:
        """The text of each accepted message, in order."""
        with self.lock:
            found = [message.get_payload(decode=True) for _, message in self.messages]
        return [part.decode() if isinstance(part, bytes) else str(part) for part in found]

"""Who is asking, and may this request change anything: authentication, Origin, CSRF, body size.

The actor of every decision comes from ``authenticate(request)``, never from a
request body. State-changing requests (every ``POST``) must also:

- carry ``Content-Type: application/json`` (415 otherwise), so a cross-site page
  cannot send one without a CORS preflight, which this server never grants;
- not come from a foreign ``Origin`` or a cross-site ``Sec-Fetch-Site`` (403);
- for cookie sessions, echo the CSRF cookie in the ``X-AAIS-CSRF`` header (403);
- fit in ``max_body_bytes`` (413).

Every authenticated request must also name this server by a well-formed
``Host`` (400 otherwise; parsed by :mod:`aais_agui.http.hosts`), and an ``Origin``
is compared as a parsed (scheme, host, port), never as text.
"""

from __future__ import annotations

import hmac
import inspect
import ipaddress
import logging
import secrets
import sys
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Union

from fastapi import Request
from starlette.requests import HTTPConnection

from aais_langgraph.authority import Principal
from aais_langgraph.protocol import AAISValidationError, Actor

from ..service import DEFAULT_MAX_BODY_BYTES
from .hosts import Authority, is_loopback_name, parse_host, parse_origin, with_default_port
from .limits import ascii_decimal
from .refusals import refused

logger = logging.getLogger(__name__)

CSRF_COOKIE = "aais_csrf"
CSRF_HEADER = "x-aais-csrf"
_PAGE_SCHEME = {"ws": "http", "wss": "https"}
_PROXY_HEADERS = ("forwarded", "x-forwarded-for", "x-real-ip")


@dataclass(frozen=True)
class Authenticated:
    """An actor plus how they authenticated; ``cookie_session`` makes CSRF tokens mandatory.

    ``groups`` are the groups the identity provider vouches for (a JWT's ``groups``
    claim); the authority's authorizer reads them (:attr:`principal`).
    ``secure_cookies`` says whether cookies set for this session (the CSRF token's) are
    ``Secure``; browser sign-in takes it from its configured public URL, never from the
    request. None (an authenticator that does not say) follows the request's scheme.
    """

    actor: Actor
    cookie_session: bool = False
    groups: frozenset[str] = frozenset()
    secure_cookies: bool | None = None

    @property
    def principal(self) -> Principal:
        """The actor and their groups, as every authorization check takes them."""
        return Principal(self.actor, self.groups)


AuthResult = Union[Actor, Authenticated, Mapping[str, Any], None]  # noqa: UP007 - runtime alias
Authenticator = Callable[[Request], Union[AuthResult, Awaitable[AuthResult]]]  # noqa: UP007
"""``authenticate(request)``: the actor the channel vouches for, or None (401)."""


@dataclass(frozen=True)
class Security:
    """The request checks every router applies (see the module docstring)."""

    authenticate: Authenticator
    allowed_origins: frozenset[str] = field(default_factory=frozenset)
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES

    _allowed: frozenset[tuple[str, Authority]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        parsed = {parse_origin(origin) for origin in self.allowed_origins}
        if None in parsed:
            raise ValueError("allowed_origins: each must be scheme://host[:port]")
        object.__setattr__(self, "_allowed", frozenset(item for item in parsed if item))

    async def actor(self, request: HTTPConnection) -> Authenticated:
        """The authenticated actor; 400 for a malformed ``Host``, 401 for no actor.

        A WebSocket handshake is authenticated the same way: ``authenticate``
        then receives the ``WebSocket`` (headers, cookies and client as a request's).
        """
        if parse_host(request.headers.get("host")) is None:
            raise refused("aais.bad_host", "the Host header is not a valid host[:port]")
        result = self.authenticate(request)  # type: ignore[arg-type]
        if inspect.isawaitable(result):
            result = await result
        if result is None:
            raise refused("aais.unauthenticated", "authentication required")
        if isinstance(result, Authenticated):
            return result
        try:
            return Authenticated(Actor.from_data(result, pointer="/actor"))
        except AAISValidationError:
            logger.error("authenticate() returned something that is not an AAIS actor")
            raise refused("aais.bad_authenticator", "authentication failed") from None

    async def state_change(self, request: Request) -> Authenticated:
        """Checks for a state-changing request, in order: Origin, content type, actor, CSRF."""
        self.check_origin(request)
        media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if media_type != "application/json":
            raise refused("aais.unsupported_media_type", "send Content-Type: application/json")
        authenticated = await self.actor(request)
        if authenticated.cookie_session:
            check_csrf(request)
        return authenticated

    def check_origin(self, request: HTTPConnection) -> None:
        """403 unless the request is same-origin, from an allowed origin, or not from a browser."""
        origin = request.headers.get("origin")
        if origin is not None:
            parsed = parse_origin(origin)
            if parsed is None or (parsed != own_origin(request) and parsed not in self._allowed):
                raise refused("aais.foreign_origin", "requests from this origin are refused")
            return
        site = request.headers.get("sec-fetch-site")
        if site is not None and site not in ("same-origin", "none"):
            raise refused("aais.foreign_origin", "cross-site requests are refused")

    async def read_body(self, request: Request) -> bytes:
        """The request body, or 413 once it exceeds ``max_body_bytes``."""
        too_large = refused(
            "aais.body_too_large", f"bodies are limited to {self.max_body_bytes} bytes"
        )
        declared = request.headers.get("content-length")
        length = None if declared is None else ascii_decimal(declared.strip(), max_digits=18)
        if length is not None and length > self.max_body_bytes:
            raise too_large
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > self.max_body_bytes:
                raise too_large
            chunks.append(chunk)
        return b"".join(chunks)


def own_origin(request: HTTPConnection) -> tuple[str, Authority] | None:
    """(scheme, host and port) of this server as the client addressed it; None for a bad Host.

    A WebSocket handshake's ``ws``/``wss`` is the page's ``http``/``https``.
    """
    scheme = _PAGE_SCHEME.get(request.url.scheme, request.url.scheme)
    host = parse_host(request.headers.get("host"))
    return None if host is None else (scheme, with_default_port(host, scheme))


def check_csrf(request: Request) -> None:
    """Double-submit check: the ``X-AAIS-CSRF`` header must equal the ``aais_csrf`` cookie."""
    cookie = request.cookies.get(CSRF_COOKIE)
    header = request.headers.get(CSRF_HEADER)
    if not cookie or not header or not hmac.compare_digest(cookie.encode(), header.encode()):
        raise refused("aais.csrf", "missing or wrong CSRF token (GET /approvals/csrf)")


def new_csrf_token() -> str:
    """A fresh CSRF token for the double-submit cookie."""
    return secrets.token_urlsafe(32)


def _is_loopback(address: str | None) -> bool:
    if address is None:
        return False
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def local_development_authenticator(
    *, actor_id: str = "local-developer", display_name: str = "Local developer"
) -> Authenticator:
    """UNSAFE outside a laptop: everyone on this machine is ``actor_id``.

    Accepts only loopback clients that address the server by a loopback name
    in a well-formed ``Host`` (``localhost``, ``127.0.0.0/8``, ``[::1]``), so a
    DNS-rebinding page cannot reach it; a request relayed by a proxy
    (``Forwarded``, ``X-Forwarded-For``, ``X-Real-IP``) is not local either.
    Prints a warning when built.
    Origin checks still apply: another site open in the browser cannot approve.
    Never a default: ``aais-agui demo`` and ``serve --local-dev-login`` choose it.
    """
    message = (
        "aais-agui: LOCAL DEVELOPMENT AUTHENTICATOR IN USE - every loopback client "
        f"approves as '{actor_id}'. Never expose this server beyond localhost."
    )
    print(f"\n{'!' * 78}\n{message}\n{'!' * 78}\n", file=sys.stderr)
    if logger.hasHandlers():  # else logging's last resort would print it a second time
        logger.warning(message)
    actor = Actor(
        id=actor_id,
        type="human",
        display_name=display_name,
        authenticated_by="local-development (loopback, no credentials)",
    )

    def authenticate(request: Request) -> Actor | None:
        client = request.client.host if request.client is not None else None
        named = parse_host(request.headers.get("host"))
        if not _is_loopback(client) or not is_loopback_name(named):
            return None
        if any(name in request.headers for name in _PROXY_HEADERS):
            return None  # relayed by a proxy on this machine: the client is not local
        return actor

    return authenticate


def bearer_token_authenticator(tokens: Mapping[str, Actor | Mapping[str, Any]]) -> Authenticator:
    """Authenticate ``Authorization: Bearer <token>`` against a fixed token -> actor table."""
    table = {token: Actor.from_data(actor, pointer="/actor") for token, actor in tokens.items()}
    known: Collection[str] = tuple(table)

    def authenticate(request: Request) -> Actor | None:
        scheme, _, presented = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not presented:
            return None
        for token in known:
            if hmac.compare_digest(token.encode(), presented.strip().encode()):
                return table[token]
        return None

    return authenticate


def first_authenticator(*authenticators: Authenticator) -> Authenticator:
    """An ``authenticate`` that asks each of ``authenticators`` in turn and returns the
    first actor one vouches for (None: 401); each may be synchronous
    (:func:`bearer_token_authenticator`) or asynchronous (``BrowserSignIn.authenticator``,
    :func:`~aais_agui.http.jwt_tokens.jwt_authenticator`), and only what returns an
    awaitable is awaited. A browser session, then a program's bearer token::

        authenticate = first_authenticator(sign_in.authenticator, jwt_authenticator(settings))
    """
    if not authenticators:
        raise ValueError("authenticators: give at least one")
    for index, candidate in enumerate(authenticators):
        if not callable(candidate):
            raise TypeError(f"authenticators[{index}]: expected authenticate(request)")

    async def authenticate(request: Request) -> AuthResult:
        for candidate in authenticators:
            result = candidate(request)
            if inspect.isawaitable(result):
                result = await result
            if result is not None:
                return result
        return None

    return authenticate

"""Browser sign-in with OpenID Connect: the code flow with PKCE, then a server-side cookie session.

:class:`BrowserSignIn` is configured by the identity provider's issuer URL (its
discovery document names every endpoint), the client id and secret registered there
and the redirect URL. It gives a router and an authenticator::

    sign_in = BrowserSignIn(SignInSettings(issuer=..., client_id=..., client_secret=...,
                                           redirect_url="https://approvals.example/login/callback"))
    app = create_app(graph, authority=authority, authenticate=sign_in.authenticator)
    app.include_router(sign_in.router)

The routes (at the app's root):

- ``GET /login[?next=/path]`` -> 302 to the provider's authorization endpoint, with a
  fresh ``state``, ``nonce`` and PKCE ``S256`` challenge, kept server side with a
  random value the browser holds in a short-lived cookie;
- ``GET <redirect path>`` (the callback) -> takes the sign-in once (unknown, used or
  expired ``state``, or another browser: 400), exchanges the code with the verifier,
  checks the ID token (signature by the provider's keys, issuer, audience, expiry,
  ``nonce``, ``at_hash``; Authlib), then opens a session and 303s to ``next``;
- ``POST /logout`` -> ends the session server side (a JSON request, same origin, with
  the CSRF header like every state change) and clears its cookie;
- ``GET /login/status`` -> ``{"sign_in": "login", "sign_out": "logout", "signed_in": ...}``,
  unauthenticated: the inbox page asks it to offer a "Sign in" link.

The session is a random id in an HttpOnly, SameSite=Lax cookie, Secure unless the
configured ``redirect_url`` (the public URL people reach) is plain HTTP on a loopback
name: whether it is Secure never follows the request, so behind a TLS proxy that
forwards ``Host: 127.0.0.1`` without ``X-Forwarded-Proto`` it stays Secure. The person
it stands for, their groups and the session's end are kept by the server in a
:class:`~aais_agui.http.sessions.SessionStore`. The person is mapped by the rules a JWT
of the same issuer is (:func:`~aais_agui.http.jwt_tokens.claims_identity`): the same
actor id and groups, ``authenticated_by`` ``oidc:<issuer>``. The authenticator returns
``Authenticated(actor, cookie_session=True)``, so decisions need the CSRF header; a
session that ended (sign-out, :meth:`BrowserSignIn.end_sessions_of`, expiry) fails the
next authentication, which ends the page's WebSocket and SSE streams at their next
re-authentication.

Needs the ``login`` extra (Authlib).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx
from authlib.common.errors import AuthlibBaseError
from authlib.integrations.starlette_client import OAuth
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from joserfc.errors import JoseError
from starlette.requests import HTTPConnection

from aais_langgraph.protocol import AAISValidationError, Actor

from .hosts import is_loopback_name, parse_host
from .jwt_tokens import claims_identity
from .refusals import refused
from .security import CSRF_COOKIE, Authenticated, Security, check_csrf
from .sessions import (
    BrowserSession,
    InMemorySessionStore,
    PendingSignIn,
    SessionStore,
    session_key,
)

__all__ = ["SESSION_COOKIE", "BrowserSignIn", "SignInSettings"]

logger = logging.getLogger(__name__)

SESSION_COOKIE = "aais_session"
"""The cookie holding the session id."""
SIGN_IN_COOKIE = "aais_sign_in"
"""The cookie binding a sign-in under way to the browser that started it."""
MAX_NEXT_LENGTH = 2000

_T = TypeVar("_T")
_FLOW_ERRORS = (AuthlibBaseError, JoseError, httpx.HTTPError, ValueError, KeyError, TypeError)


@dataclass(frozen=True)
class SignInSettings:
    """Where people sign in, and how long a session lasts.

    Args:
        issuer: the identity provider's issuer URL; its discovery document is
            ``<issuer>/.well-known/openid-configuration``, and it must name this issuer.
        client_id: this server's client id at the provider.
        client_secret: its client secret (``client_secret_basic``).
        redirect_url: the callback URL registered with the provider; its path is served.
        scopes: the scopes asked for (``openid`` among them; add the provider's groups
            scope when it has one).
        session_lifetime: seconds a session lasts from sign-in.
        sign_in_timeout: seconds a person has to finish signing in at the provider.
        id_claim: the claim holding the actor id (as for :class:`JwtSettings`).
        name_claim: the claim holding the display name.
        groups_claim: the claim holding the groups (from the ID token, else the
            provider's userinfo endpoint).
        qualified: qualify actor ids by issuer, as a ``jwt_authenticator`` trusting
            several issuers does (``id_for("<iss>#<sub>")``), so both map one person alike.
        home: where the browser goes after signing in without a ``next``.
        leeway: seconds of clock skew tolerated for the ID token's times.
    """

    issuer: str
    client_id: str
    client_secret: str
    redirect_url: str
    scopes: Sequence[str] = ("openid", "profile")
    session_lifetime: float = 8 * 3600.0
    sign_in_timeout: float = 600.0
    id_claim: str = "sub"
    name_claim: str = "name"
    groups_claim: str = "groups"
    qualified: bool = False
    home: str = "/"
    leeway: float = 30.0

    def __post_init__(self) -> None:
        issuer = urlsplit(self.issuer)
        if issuer.scheme not in ("https", "http") or not issuer.netloc:
            raise ValueError("issuer: must be an http(s) URL")
        if issuer.query or issuer.fragment:
            raise ValueError("issuer: must have no query or fragment")
        redirect = urlsplit(self.redirect_url)
        if redirect.scheme not in ("https", "http") or not redirect.netloc or not redirect.path:
            raise ValueError("redirect_url: must be an absolute http(s) URL with a path")
        if not self.client_id or not self.client_secret:
            raise ValueError("client_id, client_secret: both are required")
        if "openid" not in self.scopes:
            raise ValueError("scopes: must include openid")
        if self.session_lifetime <= 0 or self.sign_in_timeout <= 0:
            raise ValueError("session_lifetime, sign_in_timeout: must be positive")
        if _local_path(self.home) is None:
            raise ValueError("home: must be a path on this server")
        if self.callback_path in ("/login", "/logout", "/login/status"):
            raise ValueError("redirect_url: its path must not be /login, /logout or /login/status")

    @property
    def secure_cookies(self) -> bool:
        """Whether the cookies are Secure: unless ``redirect_url`` is plain HTTP on a
        loopback name (a laptop's demo)."""
        redirect = urlsplit(self.redirect_url)
        return not (redirect.scheme == "http" and is_loopback_name(parse_host(redirect.netloc)))

    @property
    def discovery_url(self) -> str:
        """The provider's OpenID discovery document."""
        return self.issuer.rstrip("/") + "/.well-known/openid-configuration"

    @property
    def callback_path(self) -> str:
        """The path of ``redirect_url``, served by the router."""
        return urlsplit(self.redirect_url).path


def _local_path(value: str | None) -> str | None:
    """``value`` when it is a path on this server (not ``//host`` or a URL), else None."""
    if not value or len(value) > MAX_NEXT_LENGTH or not value.startswith("/"):
        return None
    if value.startswith("//") or "\\" in value or any(ord(ch) < 0x21 for ch in value):
        return None
    return value


class BrowserSignIn:
    """OpenID Connect sign-in for the inbox: :attr:`router` and :attr:`authenticator`.

    ``store`` keeps sessions and sign-ins under way (default: this process's memory; a
    :class:`~aais_agui.http.sessions.SqliteSessionStore` keeps them over a restart).
    ``clock`` gives the time in seconds since the epoch (sessions' ends).
    """

    def __init__(
        self,
        settings: SignInSettings,
        *,
        store: SessionStore | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.store: SessionStore = store if store is not None else InMemorySessionStore()
        self._clock = clock
        self._provider: Any = OAuth().register(
            name="aais",
            client_id=settings.client_id,
            client_secret=settings.client_secret,
            server_metadata_url=settings.discovery_url,
            client_kwargs={"scope": " ".join(settings.scopes), "code_challenge_method": "S256"},
        )
        self._origins = Security(authenticate=self.authenticator)
        self.router = self._router()

    async def _store(self, call: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        if self.store.blocking:
            return await asyncio.to_thread(call, *args, **kwargs)
        return call(*args, **kwargs)

    async def authenticator(self, request: HTTPConnection) -> Authenticated | None:
        """``authenticate`` for :func:`~aais_agui.create_app`: the session's person, or None."""
        cookie = request.cookies.get(SESSION_COOKIE)
        if not cookie:
            return None
        found = await self._store(self.store.get_session, session_key(cookie), now=self._clock())
        if found is None:
            return None
        try:
            actor = Actor.from_data(found.actor, pointer="/actor")
        except AAISValidationError:
            logger.warning("a stored browser session does not hold an AAIS actor")
            return None
        return Authenticated(
            actor,
            cookie_session=True,
            groups=frozenset(found.groups),
            secure_cookies=self.settings.secure_cookies,
        )

    async def end_sessions_of(self, actor_id: str) -> int:
        """End every session of ``actor_id`` (revocation); how many ended."""
        return await self._store(self.store.end_sessions_of, actor_id)

    async def _metadata(self) -> Mapping[str, Any]:
        try:
            metadata: Mapping[str, Any] = await self._provider.load_server_metadata()
        except _FLOW_ERRORS:
            logger.warning("sign-in: the identity provider's discovery document was not read")
            raise refused(
                "aais.sign_in_provider", "the identity provider cannot be reached"
            ) from None
        if metadata.get("issuer") != self.settings.issuer:
            # OpenID Connect Discovery 4.3: the document must name the issuer it came from.
            logger.warning("sign-in: the discovery document names another issuer")
            raise refused("aais.sign_in_provider", "the identity provider is misconfigured")
        return metadata

    def _cookie_flags(self, request: Request) -> dict[str, Any]:
        """The cookies' flags, from the configured public URL (never the request's
        ``Host`` or scheme, which a proxy in front may not pass on)."""
        return {"httponly": True, "samesite": "lax", "secure": self.settings.secure_cookies}

    async def _begin(self, request: Request) -> Response:
        await self._metadata()
        next_path = _local_path(request.query_params.get("next")) or self.settings.home
        browser = secrets.token_urlsafe(32)
        try:
            made = await self._provider.create_authorization_url(self.settings.redirect_url)
        except _FLOW_ERRORS:
            logger.warning("sign-in: the authorization request could not be made")
            raise refused(
                "aais.sign_in_provider", "the identity provider cannot be reached"
            ) from None
        now = self._clock()
        pending = PendingSignIn(
            code_verifier=str(made["code_verifier"]),
            nonce=str(made["nonce"]),
            browser=session_key(browser),
            next_path=next_path,
            expires_at=now + self.settings.sign_in_timeout,
        )
        await self._store(self.store.put_sign_in, session_key(str(made["state"])), pending)
        response = RedirectResponse(str(made["url"]), status_code=302)
        response.set_cookie(
            SIGN_IN_COOKIE,
            browser,
            max_age=int(self.settings.sign_in_timeout),
            path=self.settings.callback_path,
            **self._cookie_flags(request),
        )
        response.headers["Cache-Control"] = "no-store"
        return response

    async def _finish(self, request: Request) -> Response:
        query = request.query_params
        if query.get("error"):
            logger.warning("sign-in: the identity provider refused the sign-in")
            raise refused("aais.sign_in_refused", "the identity provider refused the sign-in")
        state, code = query.get("state"), query.get("code")
        if not state or not code:
            raise refused("aais.sign_in_state", "/query/state, /query/code: both required")
        pending = await self._store(self.store.take_sign_in, session_key(state), now=self._clock())
        browser = request.cookies.get(SIGN_IN_COOKIE)
        if (
            pending is None
            or not browser
            or not secrets.compare_digest(session_key(browser), pending.browser)
        ):
            # Unknown, used or expired state, or another browser than the one that began.
            logger.warning("sign-in: a callback with an unknown state or from another browser")
            raise refused(
                "aais.sign_in_state", "/query/state: no sign-in under way (sign in again)"
            )
        metadata = await self._metadata()
        returned_issuer = query.get("iss")
        if returned_issuer is not None and returned_issuer != metadata["issuer"]:
            logger.warning("sign-in: the authorization response names another issuer")  # RFC 9207
            raise refused("aais.sign_in_failed", "/query/iss: not the configured issuer")
        claims = await self._verified_claims(code, pending)
        try:
            identity = claims_identity(
                claims,
                issuer=self.settings.issuer,
                id_claim=self.settings.id_claim,
                name_claim=self.settings.name_claim,
                groups_claim=self.settings.groups_claim,
                qualified=self.settings.qualified,
                method="oidc",
            )
        except (AAISValidationError, ValueError, KeyError):
            logger.warning("sign-in: the ID token's claims do not map to an actor")
            raise refused("aais.sign_in_failed", "the identity's claims are unusable") from None
        return await self._open_session(request, identity, pending.next_path)

    async def _verified_claims(self, code: str, pending: PendingSignIn) -> dict[str, Any]:
        """The ID token's verified claims, completed from userinfo where they lack the
        name or groups; 400 when the code, the verifier or the token fails."""
        try:
            token = await self._provider.fetch_access_token(
                redirect_uri=self.settings.redirect_url,
                code=code,
                code_verifier=pending.code_verifier,
            )
            if "id_token" not in token:
                raise ValueError("id_token: missing from the token response")
            claims = dict(
                await self._provider.parse_id_token(
                    token, nonce=pending.nonce, leeway=int(self.settings.leeway)
                )
            )
            wanted = (self.settings.name_claim, self.settings.groups_claim)
            metadata = await self._provider.load_server_metadata()
            if any(name not in claims for name in wanted) and metadata.get("userinfo_endpoint"):
                extra = dict(await self._provider.userinfo(token=token))
                if extra.get("sub") != claims.get("sub"):  # OpenID Connect Core 5.3.2
                    raise ValueError("sub: userinfo names another subject")
                for name in wanted:
                    if name not in claims and name in extra:
                        claims[name] = extra[name]
        except _FLOW_ERRORS:
            logger.warning("sign-in: the code exchange or the ID token check failed")
            raise refused("aais.sign_in_failed", "the sign-in could not be verified") from None
        return claims

    async def _open_session(
        self, request: Request, identity: Authenticated, next_path: str
    ) -> Response:
        now = self._clock()
        previous = request.cookies.get(SESSION_COOKIE)
        if previous:  # a new sign-in replaces the browser's session, never extends it
            await self._store(self.store.end_session, session_key(previous))
        await self._store(self.store.purge, now=now)
        session_id = secrets.token_urlsafe(32)
        session = BrowserSession(
            actor=identity.actor.to_json(),
            groups=tuple(sorted(identity.groups)),
            created_at=now,
            expires_at=now + self.settings.session_lifetime,
        )
        await self._store(self.store.put_session, session_key(session_id), session)
        flags = self._cookie_flags(request)
        response = RedirectResponse(next_path, status_code=303)
        response.set_cookie(
            SESSION_COOKIE,
            session_id,
            max_age=int(self.settings.session_lifetime),
            path="/",
            **flags,
        )
        response.delete_cookie(SIGN_IN_COOKIE, path=self.settings.callback_path, **flags)
        # A CSRF token set before the sign-in is not carried into the session.
        response.delete_cookie(CSRF_COOKIE, path="/")
        response.headers["Cache-Control"] = "no-store"
        return response

    async def _end(self, request: Request) -> Response:
        self._origins.check_origin(request)
        media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if media_type != "application/json":
            raise refused("aais.unsupported_media_type", "send Content-Type: application/json")
        cookie = request.cookies.get(SESSION_COOKIE)
        if cookie and await self.authenticator(request) is not None:
            check_csrf(request)
            await self._store(self.store.end_session, session_key(cookie))
        flags = self._cookie_flags(request)
        response = JSONResponse({"signed_out": True}, headers={"Cache-Control": "no-store"})
        response.delete_cookie(SESSION_COOKIE, path="/", **flags)
        response.delete_cookie(CSRF_COOKIE, path="/")
        return response

    def _router(self) -> APIRouter:
        router = APIRouter()
        router.add_api_route("/login", self._begin, methods=["GET"], include_in_schema=False)
        router.add_api_route(
            self.settings.callback_path, self._finish, methods=["GET"], include_in_schema=False
        )
        router.add_api_route("/logout", self._end, methods=["POST"], include_in_schema=False)

        @router.get("/login/status", include_in_schema=False)
        async def status(request: Request) -> JSONResponse:
            signed_in = await self.authenticator(request) is not None
            body = {"sign_in": "login", "sign_out": "logout", "signed_in": signed_in}
            return JSONResponse(body, headers={"Cache-Control": "no-store"})

        return router

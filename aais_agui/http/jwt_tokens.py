"""Per-user JWT bearer tokens: verified with PyJWT, mapped to an actor and their groups.

A deployment's identity provider issues each person a token; the server checks
its signature (a JWKS from a URL or a file, or a shared secret), issuer,
audience and expiry, and maps its claims to the AAIS actor (id, display name)
and to the groups the access policy names. Nothing in a token that fails any
check is used: the client gets the one 401 every refusal gets, and the server log
a WARNING naming the reason (``expired``, ``audience``, ``issuer``, ``signature``,
``missing claim sub``, ...), never the token or a claim's value, at most once per
reason every :data:`REFUSAL_LOG_INTERVAL` seconds (the next line counts the
refusals held back).

Several issuers may be trusted by one authenticator (one :class:`JwtSettings`
each; a token is checked against the settings of the issuer it names). Then an
actor id is qualified by its issuer, ``id_for("<iss>#<sub>")``, so the same
``sub`` from two identity providers is two people; with one issuer it is
``id_for(sub)``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
from starlette.requests import HTTPConnection

from aais_langgraph.protocol import AAISValidationError, Actor, id_for

from .security import Authenticated, Authenticator

__all__ = ["JwtSettings", "claims_identity", "jwt_authenticator"]

logger = logging.getLogger(__name__)

ASYMMETRIC = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA")
SYMMETRIC = ("HS256", "HS384", "HS512")
HMAC_SECRET_BYTES = {"HS256": 32, "HS384": 48, "HS512": 64}
"""RFC 7518 §3.2: an HMAC key at least as long as the hash output."""
ISSUER_SEPARATOR = "#"
"""Between issuer and subject in a qualified actor id (an OpenID issuer has no fragment)."""
REFUSAL_LOG_INTERVAL = 60.0
"""Seconds between two log lines for refusals of the same reason."""


@dataclass(frozen=True)
class JwtSettings:
    """How tokens are verified and read.

    Exactly one key source: ``jwks_url`` (fetched and cached by PyJWT's client),
    ``jwks_file`` (a JWKS document on disk) or ``secret`` (HS256/384/512).

    Args:
        issuer: the required ``iss``.
        audience: the required ``aud`` (one of them, when the token lists several).
        algorithms: accepted ``alg`` values (default: the asymmetric ones for a JWKS,
            the HMAC ones for a secret; never ``none``).
        id_claim: the claim holding the actor id (default ``sub``).
        name_claim: the claim holding the display name (default ``name``; optional).
        groups_claim: the claim holding the groups, an array of strings or one
            space-separated string (default ``groups``; optional).
        leeway: seconds of clock skew tolerated for ``exp``/``nbf``/``iat``.
    """

    issuer: str
    audience: str
    jwks_url: str | None = None
    jwks_file: str | Path | None = None
    secret: str | bytes | None = None
    algorithms: Sequence[str] | None = None
    id_claim: str = "sub"
    name_claim: str = "name"
    groups_claim: str = "groups"
    leeway: float = 30.0

    def __post_init__(self) -> None:
        sources = [s for s in (self.jwks_url, self.jwks_file, self.secret) if s is not None]
        if len(sources) != 1:
            raise ValueError("jwks_url, jwks_file, secret: give exactly one key source")
        if not self.issuer or not self.audience:
            raise ValueError("issuer, audience: both are required")
        if self.algorithms is not None and (
            not self.algorithms or any(a.lower() == "none" for a in self.algorithms)
        ):
            raise ValueError("algorithms: must name at least one algorithm, never 'none'")
        if self.secret is not None:
            self._check_secret_length()

    @property
    def accepted_algorithms(self) -> list[str]:
        """The ``alg`` values accepted: ``algorithms``, else the asymmetric ones for a JWKS
        and, for a secret, the HMAC ones it is long enough for (RFC 7518 §3.2)."""
        if self.algorithms is not None:
            return list(self.algorithms)
        if self.secret is None:
            return list(ASYMMETRIC)
        size = len(_secret_bytes(self.secret))
        return [alg for alg in SYMMETRIC if size >= HMAC_SECRET_BYTES[alg]]

    def _check_secret_length(self) -> None:
        assert self.secret is not None
        size = len(_secret_bytes(self.secret))
        wanted = [a for a in self.algorithms or ("HS256",) if a in HMAC_SECRET_BYTES]
        for algorithm in wanted:
            needed = HMAC_SECRET_BYTES[algorithm]
            if size < needed:
                raise ValueError(
                    f"secret: {algorithm} needs a secret of at least {needed} bytes "
                    f"({needed * 8} bits, RFC 7518 §3.2)"
                )


def _secret_bytes(secret: str | bytes) -> bytes:
    return secret.encode("utf-8") if isinstance(secret, str) else secret


REFETCH_INTERVAL = 60.0
"""Seconds between two fetches of a JWKS URL caused by an unknown ``kid`` (key rotation):
made-up ``kid`` values cannot make the server call the identity provider more often."""


class _Keys:
    """The verification key for a token's ``kid``, from the configured source."""

    def __init__(self, settings: JwtSettings) -> None:
        self._secret = settings.secret
        self._client: jwt.PyJWKClient | None = None
        self._set: jwt.PyJWKSet | None = None
        self._fetched_at = 0.0
        self._lock = threading.Lock()
        if settings.jwks_url is not None:
            self._client = jwt.PyJWKClient(settings.jwks_url, cache_jwk_set=True, lifespan=300)
        elif settings.jwks_file is not None:
            document = json.loads(Path(settings.jwks_file).read_text(encoding="utf-8"))
            self._set = jwt.PyJWKSet.from_dict(document)

    @property
    def remote(self) -> bool:
        """Whether finding a key may mean a network fetch (run it off the event loop)."""
        return self._client is not None

    def key_for(self, token: str, algorithm: str) -> Any:
        if self._secret is not None:
            return self._secret
        kid = jwt.get_unverified_header(token).get("kid")
        keys = self._set.keys if self._set is not None else self._remote_keys(kid)
        for key in keys:
            if kid is None or key.key_id == kid:
                # A key of another type than the token's algorithm (an RSA key under
                # ES256) is refused here, before PyJWT would fail on it.
                if key.algorithm_name is not None and key.algorithm_name != algorithm:
                    raise jwt.InvalidKeyError("the token's algorithm does not fit its key")
                return key.key
        raise jwt.InvalidKeyError("no key in the JWKS matches the token's kid")

    def _remote_keys(self, kid: Any) -> list[jwt.PyJWK]:
        assert self._client is not None
        with self._lock:
            found = self._client.get_jwk_set()  # cached for its lifespan
            if any(key.key_id == kid for key in found.keys) or kid is None:
                return list(found.keys)
            if time.monotonic() - self._fetched_at < REFETCH_INTERVAL:
                return list(found.keys)  # asked again too soon: no fetch
            self._fetched_at = time.monotonic()
            return list(self._client.get_jwk_set(refresh=True).keys)


class _RefusalLog:
    """One WARNING line per refusal reason per ``interval`` seconds; the next line counts
    the refusals held back in between."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def refused(self, reason: str) -> None:
        with self._lock:
            now = time.monotonic()
            if now - self._last.get(reason, float("-inf")) < self.interval:
                self._held[reason] = self._held.get(reason, 0) + 1
                return
            self._last[reason] = now
            held = self._held.pop(reason, 0)
        if held:
            logger.warning(
                "a bearer token was refused: %s (%d more since the last such line)", reason, held
            )
        else:
            logger.warning("a bearer token was refused: %s", reason)


_REASONS: tuple[tuple[type[Exception], str], ...] = (
    (jwt.ExpiredSignatureError, "expired"),
    (jwt.ImmatureSignatureError, "not yet valid"),
    (jwt.InvalidAudienceError, "audience"),
    (jwt.InvalidIssuerError, "issuer"),
    (jwt.InvalidIssuedAtError, "issued at"),
    (jwt.InvalidSignatureError, "signature"),
    (jwt.InvalidAlgorithmError, "algorithm"),
    (jwt.InvalidKeyError, "key"),
    (jwt.PyJWKClientError, "key"),
    (jwt.PyJWKError, "key"),
    (jwt.DecodeError, "malformed"),
    (AAISValidationError, "claims"),
    (ValueError, "claims"),
    (TypeError, "claims"),
    (KeyError, "claims"),
)


def refusal_reason(error: Exception) -> str:
    """What the log says about a refused token: the check it failed, never a value."""
    if isinstance(error, jwt.MissingRequiredClaimError):
        return f"missing claim {error.claim}"  # a claim this server requires, by name
    for kind, reason in _REASONS:
        if isinstance(error, kind):
            return reason
    return "invalid"


class _Issuer:
    """One trusted issuer: its settings, keys and accepted algorithms."""

    def __init__(self, settings: JwtSettings) -> None:
        self.settings = settings
        self.keys = _Keys(settings)
        self.algorithms = settings.accepted_algorithms
        self.required = ["exp", "iss", "aud", settings.id_claim]


def jwt_authenticator(*settings: JwtSettings) -> Authenticator:
    """An ``authenticate`` for :func:`~aais_agui.create_app`: ``Authorization: Bearer <JWT>``
    verified per ``settings``, returning the actor and their groups (None: 401).

    Several settings trust several issuers (each issuer once): a token is verified by the
    settings of the ``iss`` it names, and actor ids are qualified by issuer
    (``id_for("<iss>#<sub>")``, see the module docstring)."""
    if not settings:
        raise ValueError("settings: give the JwtSettings of at least one issuer")
    issuers = {item.issuer: _Issuer(item) for item in settings}
    if len(issuers) != len(settings):
        raise ValueError("settings: each issuer may be trusted once")
    qualified = len(issuers) > 1
    if qualified and any(ISSUER_SEPARATOR in issuer for issuer in issuers):
        raise ValueError(f"issuer: with several issuers, none may contain {ISSUER_SEPARATOR!r}")
    only = next(iter(issuers.values())) if not qualified else None
    refusals = _RefusalLog(REFUSAL_LOG_INTERVAL)
    remote = any(issuer.keys.remote for issuer in issuers.values())

    def issuer_of(token: str) -> _Issuer:
        if only is not None:
            return only  # its issuer is checked with the signature
        named = jwt.decode(token, options={"verify_signature": False}).get("iss")
        found = issuers.get(named) if isinstance(named, str) else None
        if found is None:
            raise jwt.InvalidIssuerError("the token's issuer is not trusted")
        return found

    def verify(token: str) -> Authenticated | None:
        try:
            issuer = issuer_of(token)
            algorithm = jwt.get_unverified_header(token).get("alg")
            if algorithm not in issuer.algorithms:
                raise jwt.InvalidAlgorithmError("the token's algorithm is not accepted")
            claims = jwt.decode(
                token,
                issuer.keys.key_for(token, str(algorithm)),
                algorithms=[str(algorithm)],
                audience=issuer.settings.audience,
                issuer=issuer.settings.issuer,
                leeway=issuer.settings.leeway,
                options={"require": issuer.required},
            )
            return claims_identity(
                claims,
                issuer=issuer.settings.issuer,
                id_claim=issuer.settings.id_claim,
                name_claim=issuer.settings.name_claim,
                groups_claim=issuer.settings.groups_claim,
                qualified=qualified,
            )
        except (jwt.PyJWTError, AAISValidationError, ValueError, TypeError, KeyError) as error:
            refusals.refused(refusal_reason(error))
            return None

    async def authenticate(request: HTTPConnection) -> Authenticated | None:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return None
        if remote:  # a key fetch blocks: never on the event loop
            return await asyncio.to_thread(verify, token)
        return verify(token)

    return authenticate


def claims_identity(
    claims: Mapping[str, Any],
    *,
    issuer: str,
    id_claim: str = "sub",
    name_claim: str = "name",
    groups_claim: str = "groups",
    qualified: bool = False,
    method: str = "jwt",
) -> Authenticated:
    """The actor and groups that verified ``claims`` of ``issuer`` stand for.

    A bearer token and a browser sign-in (``method="oidc"``) of one issuer map alike, so
    one person is one principal whichever way they came in.

    Args:
        claims: the verified claims (a JWT's, an ID token's).
        issuer: the issuer that vouched for them.
        id_claim: the claim holding the actor id.
        name_claim: the claim holding the display name (optional in ``claims``).
        groups_claim: the claim holding the groups (optional in ``claims``).
        qualified: qualify the actor id by issuer (several issuers trusted).
        method: how the person authenticated, the prefix of ``authenticated_by``.
    """
    subject = claims[id_claim]
    if not isinstance(subject, str) or not subject:
        raise ValueError(f"{id_claim}: must be a non-empty string")
    name_text = f"{issuer}{ISSUER_SEPARATOR}{subject}" if qualified else subject
    actor: dict[str, Any] = {
        # An id with characters AAIS ids do not allow (``auth0|alice``, an email) is
        # recorded as its ``id_for`` form; the access policy maps the names it lists alike.
        "id": id_for(name_text),
        "type": "human",
        "authenticated_by": f"{method}:{issuer}"[:200],
    }
    name = claims.get(name_claim)
    if isinstance(name, str) and name:
        actor["display_name"] = name[:200]
    elif actor["id"] != subject:
        actor["display_name"] = subject[:200]
    groups = claims.get(groups_claim, [])
    if isinstance(groups, str):
        groups = groups.split()
    if not isinstance(groups, list) or not all(isinstance(g, str) and g for g in groups):
        raise ValueError(f"{groups_claim}: must be an array of strings")
    return Authenticated(Actor.from_data(actor, pointer="/actor"), groups=frozenset(groups))

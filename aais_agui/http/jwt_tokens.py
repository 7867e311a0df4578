"""Per-user JWT bearer tokens: verified with PyJWT, mapped to an actor and their groups.

A deployment's identity provider issues each person a token; the server checks
its signature (a JWKS from a URL or a file, or a shared secret), issuer,
audience and expiry, and maps its claims to the AAIS actor (id, display name)
and to the groups the access policy names. Nothing in a token that fails any
check is used; the client gets 401 and the log one line without the token.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
from starlette.requests import HTTPConnection

from aais_langgraph.protocol import AAISValidationError, Actor, id_for

from .security import Authenticated, Authenticator

__all__ = ["JwtSettings", "jwt_authenticator"]

logger = logging.getLogger(__name__)

ASYMMETRIC = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA")
SYMMETRIC = ("HS256", "HS384", "HS512")


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
                    raise jwt.InvalidTokenError("the token's algorithm does not fit its key")
                return key.key
        raise jwt.InvalidTokenError("no key in the JWKS matches the token's kid")

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


def jwt_authenticator(settings: JwtSettings) -> Authenticator:
    """An ``authenticate`` for :func:`~aais_agui.create_app`: ``Authorization: Bearer <JWT>``
    verified per ``settings``, returning the actor and their groups (None: 401)."""
    keys = _Keys(settings)
    algorithms = list(
        settings.algorithms or (SYMMETRIC if settings.secret is not None else ASYMMETRIC)
    )
    required = ["exp", "iss", "aud", settings.id_claim]

    def verify(token: str) -> Authenticated | None:
        try:
            algorithm = jwt.get_unverified_header(token).get("alg")
            if algorithm not in algorithms:
                raise jwt.InvalidAlgorithmError("the token's algorithm is not accepted")
            claims = jwt.decode(
                token,
                keys.key_for(token, str(algorithm)),
                algorithms=[str(algorithm)],
                audience=settings.audience,
                issuer=settings.issuer,
                leeway=settings.leeway,
                options={"require": required},
            )
            return _identity(claims, settings)
        except (jwt.PyJWTError, AAISValidationError, ValueError, TypeError, KeyError) as error:
            logger.info("a bearer token was refused: %s", type(error).__name__)
            return None

    async def authenticate(request: HTTPConnection) -> Authenticated | None:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return None
        if keys.remote:  # a key fetch blocks: never on the event loop
            return await asyncio.to_thread(verify, token)
        return verify(token)

    return authenticate


def _identity(claims: dict[str, Any], settings: JwtSettings) -> Authenticated:
    subject = claims[settings.id_claim]
    if not isinstance(subject, str) or not subject:
        raise ValueError(f"{settings.id_claim}: must be a non-empty string")
    actor: dict[str, Any] = {
        # An id with characters AAIS ids do not allow (``auth0|alice``, an email) is
        # recorded as its ``id_for`` form; the access policy maps the names it lists alike.
        "id": id_for(subject),
        "type": "human",
        "authenticated_by": f"jwt:{settings.issuer}"[:200],
    }
    name = claims.get(settings.name_claim)
    if isinstance(name, str) and name:
        actor["display_name"] = name[:200]
    elif actor["id"] != subject:
        actor["display_name"] = subject[:200]
    groups = claims.get(settings.groups_claim, [])
    if isinstance(groups, str):
        groups = groups.split()
    if not isinstance(groups, list) or not all(isinstance(g, str) and g for g in groups):
        raise ValueError(f"{settings.groups_claim}: must be an array of strings")
    return Authenticated(Actor.from_data(actor, pointer="/actor"), groups=frozenset(groups))

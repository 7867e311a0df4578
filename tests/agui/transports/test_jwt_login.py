"""aais_agui.http.jwt_tokens: per-user JWT bearer logins (JWKS file, JWKS URL, shared secret).

Keys and tokens are made here; the app is served on loopback and asked ``/inbox/config``
(who am I), and the authenticator is also called directly for what that page does not
show (groups) and for what it logs.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import inspect
import json
import logging
import os
import selectors
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.ec import EllipticCurvePrivateKey
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
from jwt.algorithms import ECAlgorithm, RSAAlgorithm
from langgraph.checkpoint.memory import InMemorySaver
from starlette.requests import Request

from aais_agui import create_app
from aais_agui.cli import main
from aais_agui.http.jwt_tokens import JwtSettings, jwt_authenticator
from aais_agui.http.security import Authenticated, Authenticator
from aais_langgraph import ApprovalAuthority
from aais_langgraph.ledger import SqliteLedger
from hostile.report import record

from ..demo_graph import EffectLog, build_demo_graph
from ..http_support import serve

ISSUER = "https://idp.example.test"
AUDIENCE = "aais-approvals"
RSA_KID = "rsa-1"
EC_KID = "ec-1"
SECRET = "a shared secret that is long enough for HS256 x"
DEMO_DIR = Path(__file__).resolve().parents[2] / "demo"


@dataclass(frozen=True)
class Keys:
    """The identity provider's keys (in the JWKS) and an unrelated RSA key (not in it)."""

    rsa: RSAPrivateKey
    ec: EllipticCurvePrivateKey
    stranger: RSAPrivateKey
    jwks: dict[str, Any]


@pytest.fixture(scope="module")
def keys() -> Keys:
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ec_key = ec.generate_private_key(ec.SECP256R1())
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    rsa_jwk = RSAAlgorithm.to_jwk(rsa_key.public_key(), as_dict=True)
    ec_jwk = ECAlgorithm.to_jwk(ec_key.public_key(), as_dict=True)
    jwks = {"keys": [{**rsa_jwk, "kid": RSA_KID}, {**ec_jwk, "kid": EC_KID}]}
    return Keys(rsa=rsa_key, ec=ec_key, stranger=stranger, jwks=jwks)


@pytest.fixture(scope="module")
def jwks_file(keys: Keys, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("jwks") / "jwks.json"
    path.write_text(json.dumps(keys.jwks), encoding="utf-8")
    return path


def claims(**changes: Any) -> dict[str, Any]:
    """A valid claim set for alice; a change to None removes that claim."""
    now = int(time.time())
    base: dict[str, Any] = {
        "sub": "alice",
        "name": "Alice Example",
        "iss": ISSUER,
        "aud": AUDIENCE,
        "iat": now,
        "exp": now + 300,
    }
    base.update(changes)
    return {name: value for name, value in base.items() if value is not None}


def rs256(keys: Keys, payload: dict[str, Any] | None = None, *, kid: str = RSA_KID) -> str:
    return jwt.encode(payload or claims(), keys.rsa, algorithm="RS256", headers={"kid": kid})


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def hand_made(header: dict[str, Any], payload: dict[str, Any], signature: bytes = b"") -> str:
    """A compact JWT assembled by hand (for what PyJWT refuses to sign)."""
    head = _b64(json.dumps(header).encode()) + "." + _b64(json.dumps(payload).encode())
    return head + "." + _b64(signature)


def call(authenticate: Authenticator, request: Request) -> Any:
    """The authenticator's answer (it is async: a JWKS fetch never blocks the loop)."""
    found = authenticate(request)
    return asyncio.run(found) if inspect.isawaitable(found) else found  # type: ignore[arg-type]


def request_with(authorization: str | None) -> Request:
    headers = [(b"host", b"127.0.0.1:8000")]
    if authorization is not None:
        headers.append((b"authorization", authorization.encode()))
    return Request({"type": "http", "method": "GET", "path": "/", "headers": headers})


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture(scope="module")
def make_site(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Authenticator], Any]:
    """Serve the demo graph with a given authenticator; yields the base URL."""
    root = tmp_path_factory.mktemp("site")
    graph = build_demo_graph(EffectLog(root / "effects.db"), InMemorySaver())
    ledger = SqliteLedger(root / "ledger.db", synchronous="NORMAL")
    ledger.setup()
    authority = ApprovalAuthority(ledger)

    @contextmanager
    def site(authenticate: Authenticator) -> Iterator[str]:
        app = create_app(graph, authority=authority, authenticate=authenticate, api_docs=False)
        with serve(app) as url:
            yield url

    return site


@pytest.fixture(scope="module")
def jwks_site(make_site: Callable[[Authenticator], Any], jwks_file: Path) -> Iterator[str]:
    settings = JwtSettings(issuer=ISSUER, audience=AUDIENCE, jwks_file=jwks_file)
    with make_site(jwt_authenticator(settings)) as url:
        yield url


def who_am_i(url: str, headers: dict[str, str] | None = None) -> httpx.Response:
    with httpx.Client(base_url=url, timeout=30) as client:
        return client.get("/inbox/config", headers=headers or {})


def assert_refused(response: httpx.Response, token: str | None = None) -> None:
    assert response.status_code == 401, response.text
    assert response.json()["error"]["code"] == "aais.unauthenticated"
    if token:
        assert token not in response.text
        for part in token.split("."):
            if len(part) > 8:
                assert part not in response.text


# --- accepted tokens ----------------------------------------------------------------------


def test_a_valid_rs256_token_from_a_jwks_file_names_the_actor(jwks_site: str, keys: Keys) -> None:
    response = who_am_i(jwks_site, bearer(rs256(keys)))
    assert response.status_code == 200, response.text
    actor = response.json()["actor"]
    assert actor["id"] == "alice"
    assert actor["display_name"] == "Alice Example"
    assert actor["type"] == "human"
    assert actor["authenticated_by"] == f"jwt:{ISSUER}"
    assert response.json()["csrf"] is False


def test_a_valid_es256_token_uses_the_ec_key_of_the_jwks(jwks_site: str, keys: Keys) -> None:
    token = jwt.encode(
        claims(sub="bob", name="Bob"), keys.ec, algorithm="ES256", headers={"kid": EC_KID}
    )
    response = who_am_i(jwks_site, bearer(token))
    assert response.status_code == 200, response.text
    assert response.json()["actor"]["id"] == "bob"
    assert response.json()["actor"]["display_name"] == "Bob"


def test_the_name_claim_is_optional(jwks_site: str, keys: Keys) -> None:
    response = who_am_i(jwks_site, bearer(rs256(keys, claims(name=None))))
    assert response.status_code == 200, response.text
    assert response.json()["actor"]["id"] == "alice"
    assert "display_name" not in response.json()["actor"]


def test_the_audience_may_be_one_of_several(jwks_site: str, keys: Keys) -> None:
    token = rs256(keys, claims(aud=["another-app", AUDIENCE]))
    assert who_am_i(jwks_site, bearer(token)).status_code == 200


def test_a_token_just_expired_is_inside_the_leeway(jwks_site: str, keys: Keys) -> None:
    token = rs256(keys, claims(exp=int(time.time()) - 5))
    assert who_am_i(jwks_site, bearer(token)).status_code == 200


class _JwksHandler(BaseHTTPRequestHandler):
    document: bytes = b""
    fetches: list[str] = []

    def do_GET(self) -> None:
        type(self).fetches.append(self.path)
        if self.path != "/.well-known/jwks.json":
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.document)))
        self.end_headers()
        self.wfile.write(self.document)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def jwks_server(document: dict[str, Any]) -> Iterator[tuple[str, list[str]]]:
    """Serve ``document`` at ``/.well-known/jwks.json`` on loopback; yields (url, fetches)."""

    class Handler(_JwksHandler):
        pass

    Handler.document = json.dumps(document).encode()
    Handler.fetches = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, name="jwks-test", daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        yield f"http://127.0.0.1:{port}/.well-known/jwks.json", Handler.fetches
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def test_a_jwks_url_is_fetched_and_its_keys_verify_tokens(
    make_site: Callable[[Authenticator], Any], keys: Keys
) -> None:
    with jwks_server(keys.jwks) as (jwks_url, fetches):
        settings = JwtSettings(issuer=ISSUER, audience=AUDIENCE, jwks_url=jwks_url)
        with make_site(jwt_authenticator(settings)) as url:
            first = who_am_i(url, bearer(rs256(keys)))
            assert first.status_code == 200, first.text
            assert first.json()["actor"]["id"] == "alice"
            assert first.json()["actor"]["display_name"] == "Alice Example"
            again = who_am_i(url, bearer(rs256(keys, claims(sub="carol", name=None))))
            assert again.status_code == 200 and again.json()["actor"]["id"] == "carol"
            forged = jwt.encode(
                claims(), keys.stranger, algorithm="RS256", headers={"kid": RSA_KID}
            )
            assert_refused(who_am_i(url, bearer(forged)), forged)
    assert fetches and set(fetches) == {"/.well-known/jwks.json"}
    assert len(fetches) == 1  # the key set is cached, not fetched per request


def test_made_up_kids_do_not_make_the_server_fetch_the_jwks_again_and_again(keys: Keys) -> None:
    """Each unknown ``kid`` could mean a rotated key set: one refetch is allowed, then none
    for a minute, however many made-up ``kid`` values arrive."""
    with jwks_server(keys.jwks) as (jwks_url, fetches):
        authenticate = jwt_authenticator(
            JwtSettings(issuer=ISSUER, audience=AUDIENCE, jwks_url=jwks_url)
        )
        assert isinstance(call(authenticate, request_with(f"Bearer {rs256(keys)}")), Authenticated)
        for number in range(20):
            token = jwt.encode(
                claims(), keys.stranger, algorithm="RS256", headers={"kid": f"made-up-{number}"}
            )
            assert call(authenticate, request_with(f"Bearer {token}")) is None
    assert len(fetches) == 2  # the first fetch, and one refetch for the first unknown kid


def test_an_unreachable_jwks_url_refuses_instead_of_failing(
    make_site: Callable[[Authenticator], Any], keys: Keys
) -> None:
    with jwks_server(keys.jwks) as (jwks_url, _):
        pass  # the server is gone: nothing listens on that port any more
    settings = JwtSettings(issuer=ISSUER, audience=AUDIENCE, jwks_url=jwks_url)
    with make_site(jwt_authenticator(settings)) as url:
        token = rs256(keys)
        assert_refused(who_am_i(url, bearer(token)), token)


def test_a_shared_secret_verifies_hs256_tokens(
    make_site: Callable[[Authenticator], Any], keys: Keys
) -> None:
    settings = JwtSettings(issuer=ISSUER, audience=AUDIENCE, secret=SECRET)
    with make_site(jwt_authenticator(settings)) as url:
        good = jwt.encode(claims(sub="dave", name="Dave"), SECRET, algorithm="HS256")
        response = who_am_i(url, bearer(good))
        assert response.status_code == 200, response.text
        assert response.json()["actor"]["id"] == "dave"
        assert response.json()["actor"]["display_name"] == "Dave"
        other = jwt.encode(claims(), SECRET + "-not", algorithm="HS256")
        assert_refused(who_am_i(url, bearer(other)), other)
        asymmetric = rs256(keys)
        assert_refused(who_am_i(url, bearer(asymmetric)), asymmetric)


def test_a_bytes_secret_and_hs512_are_accepted() -> None:
    secret = os.urandom(64)
    authenticate = jwt_authenticator(JwtSettings(issuer=ISSUER, audience=AUDIENCE, secret=secret))
    token = jwt.encode(claims(), secret, algorithm="HS512")
    found = call(authenticate, request_with(f"Bearer {token}"))
    assert isinstance(found, Authenticated) and found.actor.id == "alice"


def test_the_scheme_is_case_insensitive_and_spaces_are_trimmed(keys: Keys, jwks_file: Path) -> None:
    authenticate = jwt_authenticator(
        JwtSettings(issuer=ISSUER, audience=AUDIENCE, jwks_file=jwks_file)
    )
    found = call(authenticate, request_with(f"bearer   {rs256(keys)}  "))
    assert isinstance(found, Authenticated) and found.actor.id == "alice"


# --- refused tokens -----------------------------------------------------------------------


def _hs256_with_public_key_text(keys: Keys) -> str:
    """Algorithm confusion: HMAC-signed with the RSA public key's PEM text as the secret."""
    pem = keys.rsa.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    header = {"alg": "HS256", "typ": "JWT", "kid": RSA_KID}
    unsigned = hand_made(header, claims()).rsplit(".", 1)[0]
    signature = hmac.new(pem, unsigned.encode(), hashlib.sha256).digest()
    return unsigned + "." + _b64(signature)


def _alg_none(keys: Keys) -> str:
    return hand_made({"alg": "none", "typ": "JWT", "kid": RSA_KID}, claims())


REFUSED: dict[str, Callable[[Keys], str]] = {
    "expired beyond the leeway": lambda k: rs256(k, claims(exp=int(time.time()) - 120)),
    "wrong issuer": lambda k: rs256(k, claims(iss="https://evil.example.test")),
    "wrong audience": lambda k: rs256(k, claims(aud="another-app")),
    "missing sub": lambda k: rs256(k, claims(sub=None)),
    "missing exp": lambda k: rs256(k, claims(exp=None)),
    "missing iss": lambda k: rs256(k, claims(iss=None)),
    "missing aud": lambda k: rs256(k, claims(aud=None)),
    "not yet valid": lambda k: rs256(k, claims(nbf=int(time.time()) + 3600)),
    "signed by another key": lambda k: jwt.encode(
        claims(), k.stranger, algorithm="RS256", headers={"kid": RSA_KID}
    ),
    "signature of another token": lambda k: (
        rs256(k).rsplit(".", 1)[0] + "." + rs256(k, claims(sub="mallory")).rsplit(".", 1)[1]
    ),
    "alg none": _alg_none,
    "hs256 with the public key as secret": _hs256_with_public_key_text,
    "kid not in the jwks": lambda k: rs256(k, kid="rsa-unknown"),
    "groups claim a number": lambda k: rs256(k, claims(groups=42)),
    "sub not a string": lambda k: rs256(k, claims(sub=7)),
    "sub empty": lambda k: rs256(k, claims(sub="")),
    # AAIS ids are letters, digits and . _ : - only: such a subject is refused, not mangled.
    "garbage": lambda k: "this-is-not-a-jwt",
    "three garbage segments": lambda k: "a.b.c",
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_a_bad_token_is_refused_without_echoing_it(case: str, jwks_site: str, keys: Keys) -> None:
    token = REFUSED[case](keys)
    assert_refused(who_am_i(jwks_site, bearer(token)), token)


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "",
        "Bearer",
        "Basic " + base64.b64encode(b"alice:password").decode(),
        "Token {token}",
        "Basic {token}",
        "{token}",
    ],
)
def test_anything_but_a_bearer_token_is_refused(
    authorization: str | None, jwks_site: str, keys: Keys
) -> None:
    token = rs256(keys)  # valid: only the way it is presented is wrong
    headers = {} if authorization is None else {"Authorization": authorization.format(token=token)}
    assert_refused(who_am_i(jwks_site, headers), token)


@pytest.mark.parametrize("authorization", ["Bearer ", "Bearer    ", "Bearer \t", " Bearer x"])
def test_a_blank_bearer_token_is_refused(authorization: str, authenticate: Authenticator) -> None:
    assert call(authenticate, request_with(authorization)) is None


@pytest.mark.parametrize(
    ("alg", "kid"), [("ES256", RSA_KID), ("RS256", EC_KID)], ids=["es256-on-rsa", "rs256-on-ec"]
)
def test_an_algorithm_for_another_key_type_is_refused(alg: str, kid: str, jwks_site: str) -> None:
    # No key needed: anyone can send this header with any signature.
    token = hand_made({"alg": alg, "typ": "JWT", "kid": kid}, claims(), b"x" * 64)
    assert_refused(who_am_i(jwks_site, bearer(token)), token)


def test_settings_algorithms_restrict_what_is_accepted(keys: Keys, jwks_file: Path) -> None:
    only_ec = JwtSettings(
        issuer=ISSUER, audience=AUDIENCE, jwks_file=jwks_file, algorithms=["ES256"]
    )
    authenticate = jwt_authenticator(only_ec)
    assert call(authenticate, request_with(f"Bearer {rs256(keys)}")) is None
    token = jwt.encode(claims(), keys.ec, algorithm="ES256", headers={"kid": EC_KID})
    assert isinstance(call(authenticate, request_with(f"Bearer {token}")), Authenticated)


def test_a_refused_token_is_logged_as_one_line_without_the_token(
    keys: Keys, jwks_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    authenticate = jwt_authenticator(
        JwtSettings(issuer=ISSUER, audience=AUDIENCE, jwks_file=jwks_file)
    )
    token = rs256(keys, claims(aud="another-app"))
    with caplog.at_level(logging.DEBUG, logger="aais_agui.http.jwt_tokens"):
        assert call(authenticate, request_with(f"Bearer {token}")) is None
    records = [r for r in caplog.records if r.name == "aais_agui.http.jwt_tokens"]
    assert len(records) == 1
    logged = records[0].getMessage() + str(records[0].exc_info or "")
    assert "refused" in logged
    for part in token.split("."):
        assert part not in logged


# --- claims to actor and groups -----------------------------------------------------------


@pytest.fixture(scope="module")
def authenticate(jwks_file: Path) -> Authenticator:
    return jwt_authenticator(JwtSettings(issuer=ISSUER, audience=AUDIENCE, jwks_file=jwks_file))


@pytest.mark.parametrize(
    ("groups", "expected"),
    [
        (["approvers", "finance"], {"approvers", "finance"}),
        ("approvers finance", {"approvers", "finance"}),
        ("  approvers   finance ", {"approvers", "finance"}),
        (["approvers"], {"approvers"}),
        ([], set()),
        (None, set()),  # no groups claim at all
    ],
)
def test_the_groups_claim_becomes_the_authenticated_groups(
    groups: Any, expected: set[str], authenticate: Authenticator, keys: Keys
) -> None:
    found = call(authenticate, request_with(f"Bearer {rs256(keys, claims(groups=groups))}"))
    assert isinstance(found, Authenticated)
    assert found.groups == frozenset(expected)
    assert found.principal.groups == frozenset(expected)
    assert found.principal.actor.id == "alice"
    assert found.cookie_session is False


@pytest.mark.parametrize("groups", [42, True, {"approvers": True}, ["approvers", 3], [""]])
def test_groups_that_are_not_strings_are_refused(
    groups: Any, authenticate: Authenticator, keys: Keys
) -> None:
    assert call(authenticate, request_with(f"Bearer {rs256(keys, claims(groups=groups))}")) is None


def test_other_claims_may_name_the_actor_and_groups(keys: Keys, jwks_file: Path) -> None:
    settings = JwtSettings(
        issuer=ISSUER,
        audience=AUDIENCE,
        jwks_file=jwks_file,
        id_claim="oid",
        name_claim="preferred_username",
        groups_claim="roles",
    )
    authenticate = jwt_authenticator(settings)
    oid = "6f1c2a9e-51d4-4c1e-9a57-3b8e2f0d7c11"
    payload = claims(oid=oid, preferred_username="erin", roles="approve read")
    found = call(authenticate, request_with(f"Bearer {rs256(keys, payload)}"))
    assert isinstance(found, Authenticated)
    assert found.actor.id == oid
    assert found.actor.display_name == "erin"
    assert found.groups == frozenset({"approve", "read"})
    # The configured id claim is required: sub alone does not do.
    assert call(authenticate, request_with(f"Bearer {rs256(keys)}")) is None


# --- settings -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "fields"),
    [
        ({}, ["jwks_url", "jwks_file", "secret"]),
        ({"jwks_url": "https://idp/jwks", "secret": "s"}, ["jwks_url", "jwks_file", "secret"]),
        ({"jwks_file": "jwks.json", "secret": "s"}, ["jwks_url", "jwks_file", "secret"]),
        ({"secret": "s", "issuer": ""}, ["issuer"]),
        ({"secret": "s", "audience": ""}, ["audience"]),
        ({"secret": "s", "algorithms": ["HS256", "none"]}, ["algorithms"]),
        ({"jwks_file": "jwks.json", "algorithms": ["NONE"]}, ["algorithms"]),
        ({"secret": "s", "algorithms": []}, ["algorithms"]),
    ],
)
def test_settings_refuse_what_cannot_be_verified(
    options: dict[str, Any], fields: list[str]
) -> None:
    arguments: dict[str, Any] = {"issuer": ISSUER, "audience": AUDIENCE, **options}
    with pytest.raises(ValueError) as refused:
        JwtSettings(**arguments)
    for field in fields:
        assert field in str(refused.value)


# --- the command line ---------------------------------------------------------------------


def test_serve_help_lists_the_jwt_options(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["serve", "--help"])
    assert exited.value.code == 0
    shown = capsys.readouterr().out
    for option in (
        "--jwt-issuer",
        "--jwt-audience",
        "--jwt-jwks-url",
        "--jwt-jwks-file",
        "--jwt-secret-env",
        "--jwt-groups-claim",
    ):
        assert option in shown


@pytest.fixture
def in_demo_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(DEMO_DIR)
    monkeypatch.setattr(sys, "path", list(sys.path))  # load_graph adds the working directory


@pytest.mark.usefixtures("in_demo_dir")
def test_serve_with_a_jwt_issuer_but_no_key_refuses_to_start(tmp_path: Path) -> None:
    argv = ["serve", "tiny_graph:graph", "--port", "0", "--db", str(tmp_path / "app.db")]
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--jwt-issuer", "x", "--jwt-audience", "y"])
    assert isinstance(exited.value.code, str)
    assert "--jwt" in exited.value.code
    assert "jwks_url, jwks_file, secret" in exited.value.code


@pytest.mark.usefixtures("in_demo_dir")
def test_serve_with_an_unset_jwt_secret_variable_refuses_to_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AAIS_TEST_JWT_SECRET", raising=False)
    argv = ["serve", "tiny_graph:graph", "--port", "0", "--db", str(tmp_path / "app.db")]
    argv += ["--jwt-issuer", ISSUER, "--jwt-audience", AUDIENCE]
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--jwt-secret-env", "AAIS_TEST_JWT_SECRET"])
    assert "--jwt-secret-env AAIS_TEST_JWT_SECRET" in str(exited.value.code)


def test_serve_refuses_a_jwt_issuer_together_with_a_shared_token(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["serve", "tiny_graph:graph", "--jwt-issuer", "x", "--token-env", "T"])
    assert exited.value.code == 2
    assert "--jwt-issuer" in capsys.readouterr().err


@contextmanager
def cli_server(args: list[str], cwd: Path, log: list[str] | None = None) -> Iterator[str]:
    """``python -m aais_agui.cli`` as a process; yields its URL once it listens. With
    ``log``, every later line of its output (stdout and stderr) is appended to it."""
    process = subprocess.Popen(
        [sys.executable, "-m", "aais_agui.cli", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    try:
        seen: list[str] = []
        deadline = time.monotonic() + 60
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not selector.select(remaining):
                    raise AssertionError(f"the server did not start: {''.join(seen)}")
                line = process.stdout.readline()
                if not line:
                    raise AssertionError(f"the server exited: {''.join(seen)}")
                seen.append(line)
                if "serving on " in line:
                    if log is not None:
                        follow = threading.Thread(
                            target=log.extend, args=(process.stdout,), daemon=True
                        )
                        follow.start()
                    yield line.split("serving on ", 1)[1].strip().rstrip("/")
                    return
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(15)
        process.stdout.close()


def test_serve_with_a_jwks_file_logs_people_in_by_their_tokens(
    tmp_path: Path, keys: Keys, jwks_file: Path
) -> None:
    args = ["serve", "tiny_graph:graph", "--port", "0", "--db", str(tmp_path / "app.db")]
    args += ["--jwt-issuer", ISSUER, "--jwt-audience", AUDIENCE]
    args += ["--jwt-jwks-file", str(jwks_file), "--jwt-groups-claim", "roles"]
    with cli_server(args, DEMO_DIR) as url:
        response = who_am_i(url, bearer(rs256(keys)))
        assert response.status_code == 200, response.text
        assert response.json()["actor"]["id"] == "alice"
        assert response.json()["actor"]["display_name"] == "Alice Example"
        assert_refused(who_am_i(url))
        wrong = rs256(keys, claims(aud="another-app"))
        assert_refused(who_am_i(url, bearer(wrong)), wrong)


def test_a_subject_outside_the_aais_id_alphabet_is_recorded_by_its_id_for(
    authenticate: Authenticator, keys: Any
) -> None:
    """``auth0|alice`` (or an email) is not an AAIS id: recorded as ``id_for`` of it, with
    the subject as display name when the token names nobody; an access policy naming the
    subject maps it the same way."""
    from aais_langgraph.authority import AccessPolicy, Principal, Resource
    from aais_langgraph.protocol import id_for

    payload = claims(sub="auth0|alice")
    del payload["name"]
    found = call(authenticate, request_with(f"Bearer {rs256(keys, payload)}"))
    assert isinstance(found, Authenticated)
    assert found.actor.id == id_for("auth0|alice") != "auth0|alice"
    assert found.actor.display_name == "auth0|alice"
    policy = AccessPolicy.from_mapping({"administrators": ["auth0|alice"]})
    allowed = policy.authorize(Principal(found.actor), "view", Resource())
    assert allowed.allowed


# --- several issuers ----------------------------------------------------------------------

OTHER_ISSUER = "https://partner-idp.example.test"
OTHER_SECRET = "the partner identity provider's secret, long enough for HS256"


def test_the_same_subject_from_two_trusted_issuers_is_two_actors(
    make_site: Callable[[Authenticator], Any], jwks_file: Path, keys: Keys
) -> None:
    """With several issuers trusted, an actor id is qualified by its issuer
    (``id_for("<iss>#<sub>")``): a partner's ``alice`` is not the company's ``alice``."""
    from aais_langgraph.protocol import id_for

    ours = JwtSettings(issuer=ISSUER, audience=AUDIENCE, jwks_file=jwks_file)
    partner = JwtSettings(issuer=OTHER_ISSUER, audience=AUDIENCE, secret=OTHER_SECRET)
    with make_site(jwt_authenticator(ours, partner)) as url:
        company = who_am_i(url, bearer(rs256(keys)))
        partner_token = jwt.encode(claims(iss=OTHER_ISSUER), OTHER_SECRET, algorithm="HS256")
        outsider = who_am_i(url, bearer(partner_token))
        assert company.status_code == 200 and outsider.status_code == 200, outsider.text
        company_actor, partner_actor = company.json()["actor"], outsider.json()["actor"]
        record("jwt issuers", 1, failed_open=int(company_actor["id"] == partner_actor["id"]))
        assert company_actor["id"] != partner_actor["id"]
        assert company_actor["id"] == id_for(f"{ISSUER}#alice")
        assert partner_actor["id"] == id_for(f"{OTHER_ISSUER}#alice")
        assert partner_actor["authenticated_by"] == f"jwt:{OTHER_ISSUER}"
        # Each issuer's key verifies only its own tokens.
        crossed = jwt.encode(claims(iss=ISSUER), OTHER_SECRET, algorithm="HS256")
        assert_refused(who_am_i(url, bearer(crossed)), crossed)
        stranger = jwt.encode(claims(iss="https://evil.example.test"), OTHER_SECRET, "HS256")
        assert_refused(who_am_i(url, bearer(stranger)), stranger)


def test_one_trusted_issuer_keeps_the_subject_as_the_actor_id(
    authenticate: Authenticator, keys: Keys
) -> None:
    found = call(authenticate, request_with(f"Bearer {rs256(keys)}"))
    assert isinstance(found, Authenticated) and found.actor.id == "alice"


def test_several_issuers_must_be_distinct_and_free_of_the_separator(jwks_file: Path) -> None:
    first = JwtSettings(issuer=ISSUER, audience=AUDIENCE, jwks_file=jwks_file)
    with pytest.raises(ValueError, match="issuer"):
        jwt_authenticator(first, JwtSettings(issuer=ISSUER, audience="other", secret=OTHER_SECRET))
    with pytest.raises(ValueError, match="issuer"):
        jwt_authenticator(
            first, JwtSettings(issuer="idp#2", audience=AUDIENCE, secret=OTHER_SECRET)
        )
    with pytest.raises(ValueError, match="settings"):
        jwt_authenticator()


# --- HMAC secrets (RFC 7518 §3.2: at least the hash size) ---------------------------------


@pytest.mark.parametrize(
    ("secret", "algorithms"),
    [
        ("x", None),
        (b"\x00", None),
        ("s" * 31, None),
        ("s" * 31, ["HS256"]),
        ("s" * 47, ["HS384"]),
        (b"s" * 63, ["HS512"]),
        ("s" * 32, ["HS256", "HS512"]),
    ],
)
def test_an_hmac_secret_shorter_than_the_hash_is_refused(
    secret: str | bytes, algorithms: list[str] | None
) -> None:
    with pytest.raises(ValueError) as refused:
        JwtSettings(issuer=ISSUER, audience=AUDIENCE, secret=secret, algorithms=algorithms)
    message = str(refused.value)
    assert message.startswith("secret:") and "RFC 7518" in message
    assert str(secret) not in message


@pytest.mark.filterwarnings("ignore::jwt.warnings.InsecureKeyLengthWarning")
def test_a_32_byte_secret_accepts_hs256_and_not_the_longer_hashes() -> None:
    secret = "s" * 32
    authenticate = jwt_authenticator(JwtSettings(issuer=ISSUER, audience=AUDIENCE, secret=secret))
    good = jwt.encode(claims(), secret, algorithm="HS256")
    assert isinstance(call(authenticate, request_with(f"Bearer {good}")), Authenticated)
    for algorithm in ("HS384", "HS512"):
        weak = jwt.encode(claims(), secret, algorithm=algorithm)
        assert call(authenticate, request_with(f"Bearer {weak}")) is None


@pytest.mark.usefixtures("in_demo_dir")
def test_serve_refuses_a_jwt_secret_shorter_than_the_hash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AAIS_TEST_JWT_SECRET", "x")
    argv = ["serve", "tiny_graph:graph", "--port", "0", "--db", str(tmp_path / "app.db")]
    argv += ["--jwt-issuer", ISSUER, "--jwt-audience", AUDIENCE]
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--jwt-secret-env", "AAIS_TEST_JWT_SECRET"])
    message = str(exited.value.code)
    assert "--jwt-secret-env AAIS_TEST_JWT_SECRET" in message
    assert "256 bits" in message


# --- refusals: one answer for the client, the reason for the operator ---------------------

REASONS: dict[str, tuple[Callable[[Keys], str], str]] = {
    "expired": (lambda k: rs256(k, claims(exp=int(time.time()) - 120)), "expired"),
    "audience": (lambda k: rs256(k, claims(aud="another-app")), "audience"),
    "issuer": (lambda k: rs256(k, claims(iss="https://evil.example.test")), "issuer"),
    "signature": (
        lambda k: jwt.encode(claims(), k.stranger, algorithm="RS256", headers={"kid": RSA_KID}),
        "signature",
    ),
    "no sub": (lambda k: rs256(k, claims(sub=None)), "missing claim sub"),
}


def test_every_refusal_gets_the_same_401_body(jwks_site: str, keys: Keys) -> None:
    bodies = set()
    for make, _ in REASONS.values():
        token = make(keys)
        response = who_am_i(jwks_site, bearer(token))
        assert_refused(response, token)
        bodies.add(response.content)
    assert len(bodies) == 1


def test_each_refusal_reason_is_logged_once_without_the_token_or_its_claims(
    keys: Keys, jwks_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    authenticate = jwt_authenticator(
        JwtSettings(issuer=ISSUER, audience=AUDIENCE, jwks_file=jwks_file)
    )
    tokens = {case: make(keys) for case, (make, _) in REASONS.items()}
    with caplog.at_level(logging.WARNING, logger="aais_agui.http.jwt_tokens"):
        for token in tokens.values():
            for _ in range(3):  # the same reason again at once: no new line
                assert call(authenticate, request_with(f"Bearer {token}")) is None
    lines = [r.getMessage() for r in caplog.records if r.name == "aais_agui.http.jwt_tokens"]
    assert len(lines) == len(REASONS), lines
    for line, (_, reason) in zip(lines, REASONS.values(), strict=True):
        assert line.endswith(f"refused: {reason}"), line
    logged = "\n".join(lines)
    for token in tokens.values():
        for part in token.split("."):
            assert part not in logged
    for value in ("another-app", "evil.example.test", "alice", "Alice Example"):
        assert value not in logged


def test_refusals_held_back_are_counted_in_the_next_line(
    keys: Keys, jwks_file: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from aais_agui.http import jwt_tokens

    monkeypatch.setattr(jwt_tokens, "REFUSAL_LOG_INTERVAL", 0.3)
    authenticate = jwt_authenticator(
        JwtSettings(issuer=ISSUER, audience=AUDIENCE, jwks_file=jwks_file)
    )
    expired = rs256(keys, claims(exp=int(time.time()) - 120))
    with caplog.at_level(logging.WARNING, logger="aais_agui.http.jwt_tokens"):
        for _ in range(3):
            call(authenticate, request_with(f"Bearer {expired}"))
        time.sleep(0.4)
        call(authenticate, request_with(f"Bearer {expired}"))
    lines = [r.getMessage() for r in caplog.records if r.name == "aais_agui.http.jwt_tokens"]
    assert lines == [
        "a bearer token was refused: expired",
        "a bearer token was refused: expired (2 more since the last such line)",
    ]


def test_serve_logs_why_a_token_was_refused(tmp_path: Path, keys: Keys, jwks_file: Path) -> None:
    """The served process's own log (stderr) names the failed check, never the token."""
    args = ["serve", "tiny_graph:graph", "--port", "0", "--db", str(tmp_path / "app.db")]
    args += ["--jwt-issuer", ISSUER, "--jwt-audience", AUDIENCE, "--jwt-jwks-file", str(jwks_file)]
    log: list[str] = []
    expired = rs256(keys, claims(exp=int(time.time()) - 120))
    with cli_server(args, DEMO_DIR, log) as url:
        assert_refused(who_am_i(url, bearer(expired)), expired)
        deadline = time.monotonic() + 10
        while not any("refused: expired" in line for line in log):
            assert time.monotonic() < deadline, "".join(log)
            time.sleep(0.05)
    logged = "".join(log)
    for part in expired.split("."):
        assert part not in logged

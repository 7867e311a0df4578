"""A real OpenID provider for the sign-in tests (node-oidc-provider, tests/oidc_provider/).

:func:`openid_provider` starts the project's ``main`` (``provider.mjs``) on a loopback
port with one client whose redirect URI the test names; :func:`sign_in_at_provider` signs
a person in at its login form the way a browser would (following its redirects with its
own cookies) and returns the callback URL the provider sends the browser back to.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urljoin

import httpx
import pytest

PROJECT = Path(__file__).resolve().parents[1] / "oidc_provider"
START_FILE = str(json.loads((PROJECT / "package.json").read_text())["main"])
"""The file ``node`` runs: the one ``package.json`` names as ``main``."""
GROUPS = {
    "alice": ["sre"],
    "bob": ["dev"],
    "carol": ["finance"],
    "dave": ["finance"],
    "erin": ["audit"],
}
"""The provider's people and their groups; each one's password is ``<name>-password``."""
CLIENT_ID = "aais-inbox"


def password_of(user: str) -> str:
    return f"{user}-password"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def require_provider() -> str:
    """The ``node`` program; fails when Node or the provider's packages are missing."""
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not installed; the sign-in tests need Node.js >= 20")
    if not (PROJECT / "node_modules" / "oidc-provider").is_dir():
        pytest.fail(
            "tests/oidc_provider/node_modules is missing: run `npm ci --prefix tests/oidc_provider`"
        )
    return node


@dataclass
class OpenIdProvider:
    """The running provider: its issuer URL and the client registered with it."""

    issuer: str
    client_id: str
    client_secret: str
    redirect_url: str
    process: subprocess.Popen[str]
    output: list[str] = field(default_factory=list)

    def log(self) -> str:
        return "".join(self.output)


@contextmanager
def openid_provider(redirect_url: str) -> Iterator[OpenIdProvider]:
    """A provider process for the block, whose one client may redirect to ``redirect_url``."""
    node = require_provider()
    port = free_port()
    secret = f"client-secret-{os.urandom(16).hex()}"
    process = subprocess.Popen(
        [node, START_FILE, str(port), CLIENT_ID, secret, redirect_url],
        cwd=PROJECT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    provider = OpenIdProvider(f"http://127.0.0.1:{port}", CLIENT_ID, secret, redirect_url, process)
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            provider.output.append(line)
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                line = lines.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                line = None
            if line is None:
                raise RuntimeError(f"the OpenID provider did not start:\n{provider.log()}")
            if "serving on " in line:
                break
        yield provider
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)


def sign_in_at_provider(
    authorization_url: str, user: str, *, password: str | None = None, redirect_url: str
) -> str:
    """Follow ``authorization_url`` to the login form, sign in, and return the URL the
    provider redirects to under ``redirect_url`` (the callback, with ``code`` and ``state``)."""
    with httpx.Client(timeout=30, follow_redirects=False) as browser:
        url = authorization_url
        form_url = None
        for _ in range(20):
            response = browser.get(url)
            if response.status_code in (302, 303):
                url = urljoin(url, response.headers["location"])
                if url.startswith(redirect_url):
                    return url
                continue
            assert response.status_code == 200, response.text
            form_url = url
            break
        assert form_url is not None, "the provider never showed its login form"
        response = browser.post(
            form_url, data={"login": user, "password": password or password_of(user)}
        )
        url = form_url
        for _ in range(20):
            if response.status_code not in (302, 303):
                raise AssertionError(f"the provider did not sign {user} in: {response.text}")
            url = urljoin(url, response.headers["location"])
            if url.startswith(redirect_url):
                return url
            response = browser.get(url)
    raise AssertionError("the provider redirected too often")

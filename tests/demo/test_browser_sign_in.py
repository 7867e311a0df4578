"""Chromium, three people signing in at a real OpenID provider: who sees bob's request,
who approves it, and what a signed-out session still opens (nothing)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from aais_agui import run_agent_input
from aais_langgraph.ledger import SqliteLedger
from support.oidc_provider import free_port, openid_provider, sign_in_at_provider

from .support import Server, agui_run, finished, interrupts_of, wait_for
from .test_browser import BROWSER_PROJECT, SCREENSHOTS, _require_tools

HERE = Path(__file__).resolve().parent
# tiny_graph's gate asks for `fs.delete` / `delete_report`; the provider's people are
# alice (sre), bob (dev) and carol (finance).
POLICY = """\
default_approvers = ["sre"]

[[approvers]]
kinds = ["fs.delete"]
groups = ["sre"]

[separation_of_duties]
from_risk = "low"

[requesters]
view_own = true
"""


@contextmanager
def signed_in_client(url: str, redirect_url: str, user: str) -> Iterator[httpx.Client]:
    """An HTTP client holding ``user``'s session (signed in at the provider) and CSRF token."""
    with httpx.Client(base_url=url, timeout=30) as client:
        started = client.get("/login", follow_redirects=False)
        assert started.status_code == 302, started.text
        location = started.headers["location"]
        back = urlsplit(sign_in_at_provider(location, user, redirect_url=redirect_url))
        landed = client.get(f"{back.path}?{back.query}", follow_redirects=False)
        assert landed.status_code == 303, landed.text
        client.headers["x-aais-csrf"] = client.get("/approvals/csrf").json()["csrf_token"]
        yield client


def test_three_people_sign_in_see_what_they_may_and_sign_out(tmp_path: Path) -> None:
    node = _require_tools()
    shots = SCREENSHOTS / "sign-in"
    shutil.rmtree(shots, ignore_errors=True)
    policy = tmp_path / "access.toml"
    policy.write_text(POLICY, encoding="utf-8")
    db = tmp_path / "sign-in.db"
    effects = tmp_path / "deleted.log"
    port = free_port()
    redirect_url = f"http://127.0.0.1:{port}/login/callback"
    with openid_provider(redirect_url) as provider:
        env = {
            "AAIS_TEST_OIDC_CLIENT_SECRET": provider.client_secret,
            "TINY_GRAPH_LOG": str(effects),
            "PYTHONPATH": os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(HERE)])),
        }
        args = [str(port), provider.issuer, provider.client_id, str(db), str(policy)]
        server = Server(args, cwd=HERE, command=[sys.executable, "sign_in_app.py"], env=env)
        try:
            with signed_in_client(server.url, redirect_url, "bob") as bob:
                events = agui_run(bob, run_agent_input("bob-thread", text="delete the report"))
                [interrupt] = interrupts_of(events)
                request_id = str(interrupt["metadata"]["aais"]["request"]["id"])
                driver = subprocess.run(
                    [node, "sign_in.mjs", server.url, str(shots), request_id],
                    cwd=BROWSER_PROJECT,
                    capture_output=True,
                    text=True,
                    timeout=180,
                    check=False,
                )
                report = driver.stdout + driver.stderr
                assert driver.returncode == 0, report + server.log() + provider.log()
                assert driver.stdout.strip().splitlines()[-1] == "STEP done", report
                assert f"STEP linked-card {request_id}" in driver.stdout, report
                view = wait_for(lambda: finished(bob, "bob-thread"), what="bob's run to finish")
                assert [m["content"] for m in view["messages"]][-1] == "Deleted the report."
        finally:
            server.stop()
    assert effects.read_text(encoding="utf-8").splitlines() == ["deleted"]
    with SqliteLedger.from_path(db) as ledger:
        resolution = ledger.get_resolution(request_id)
        decided = [entry.payload for entry in ledger.audit_entries() if entry.kind == "decided"]
    assert resolution is not None
    assert resolution.envelope["resolution"]["outcome"] == "approved"
    assert [(entry["decision"], entry["actor_id"]) for entry in decided] == [("approve", "alice")]

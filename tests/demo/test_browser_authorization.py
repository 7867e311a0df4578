"""Chromium, three people with their own JWTs: who sees bob's request, who may approve it."""

from __future__ import annotations

import secrets
import shutil
import subprocess
import time
from pathlib import Path

import httpx
import jwt

from aais_agui import run_agent_input
from aais_langgraph.ledger import SqliteLedger

from .support import agui_run, finished, free_port, interrupts_of, running, wait_for
from .test_browser import BROWSER_PROJECT, SCREENSHOTS, _require_tools

HERE = Path(__file__).resolve().parent
ISSUER = "https://idp.example.test"
AUDIENCE = "aais-approvals"
SECRET_ENV = "AAIS_TEST_BROWSER_JWT_SECRET"
GROUPS = {"alice": ["sre"], "bob": ["dev"], "dave": ["finance"]}
# tiny_graph's gate asks for `fs.delete` / `delete_report` at the default (medium) risk.
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


def token(secret: str, user: str) -> str:
    """An HS256 token from the test's identity provider for ``user`` and their groups."""
    claims = {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "exp": int(time.time()) + 3600,
        "sub": user,
        "name": user.capitalize(),
        "groups": GROUPS[user],
    }
    return jwt.encode(claims, secret, algorithm="HS256")


def test_only_approvers_decide_and_only_they_and_the_requester_see(tmp_path: Path) -> None:
    node = _require_tools()
    shots = SCREENSHOTS / "authorization"
    shutil.rmtree(shots, ignore_errors=True)
    secret = secrets.token_urlsafe(48)
    tokens = {user: token(secret, user) for user in GROUPS}
    policy = tmp_path / "access.toml"
    policy.write_text(POLICY, encoding="utf-8")
    db = tmp_path / "tmp" / "authorization.db"
    effects = tmp_path / "deleted.log"
    args = ["serve", "tiny_graph:builder", "--port", str(free_port()), "--db", str(db)]
    args += ["--jwt-issuer", ISSUER, "--jwt-audience", AUDIENCE, "--jwt-secret-env", SECRET_ENV]
    args += ["--access-policy", str(policy)]
    env = {SECRET_ENV: secret, "TINY_GRAPH_LOG": str(effects)}
    as_bob = {"Authorization": f"Bearer {tokens['bob']}"}
    with (
        running(args, cwd=HERE, env=env) as server,
        httpx.Client(base_url=server.url, timeout=30, headers=as_bob) as bob,
    ):
        events = agui_run(bob, run_agent_input("bob-thread", text="delete the report"))
        [interrupt] = interrupts_of(events)
        request_id = str(interrupt["metadata"]["aais"]["request"]["id"])
        driver = subprocess.run(
            [
                node,
                "authorization.mjs",
                server.url,
                str(shots),
                request_id,
                tokens["alice"],
                tokens["bob"],
                tokens["dave"],
            ],
            cwd=BROWSER_PROJECT,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        report = driver.stdout + driver.stderr
        assert driver.returncode == 0, report + server.log()
        assert driver.stdout.strip().splitlines()[-1] == "STEP done", report
        # The approval resumed bob's run: the deletion ran, once.
        view = wait_for(lambda: finished(bob, "bob-thread"), what="bob's run to finish")
        assert [m["content"] for m in view["messages"]][-1] == "Deleted the report."
    assert effects.read_text(encoding="utf-8").splitlines() == ["deleted"]
    with SqliteLedger.from_path(db) as ledger:
        stored = ledger.get_request(request_id)
        resolution = ledger.get_resolution(request_id)
        events = ledger.events_after(0)
        audit = [entry.payload for entry in ledger.audit_entries() if entry.kind == "decided"]
    assert stored is not None
    assert stored.envelope["request"]["extensions"]["aais-langgraph.org/requester"]["id"] == "bob"
    assert resolution is not None
    resolved = resolution.envelope["resolution"]
    assert resolved["outcome"] == "approved", resolved
    decisions = [
        event["decision"]
        for event in events
        if event["type"] == "approval.decided" and event["decision"]["request_id"] == request_id
    ]
    assert [(d["id"], d["decision"], d["actor"]["id"]) for d in decisions] == [
        (resolved["decision_id"], "approve", "alice")
    ]
    assert [(entry["decision"], entry["actor_id"]) for entry in audit] == [("approve", "alice")]

"""The real ``@ag-ui/client``: a viewer's refused resume records nothing; an approver's runs once.

``create_app`` serves the demo graph on loopback with an access policy: alice
(``sre``) may decide, bob (``dev``, a viewer group) may see every thread and card
but not decide. ``tests/agui_client/forbidden-resume.mjs`` drives ``HttpAgent``
phase by phase and this test checks the ledger and the executed side effects in
between: alice's run pauses on an approval; bob's resume answering it ends in
``RUN_ERROR`` ``aais.forbidden`` and the same response offers the interrupt again
(a second run finishing with the interrupt outcome), with no audit entry, no
resolution and no effect; then alice's resume with the same interrupt runs the
deletion exactly once.

Needs Node.js >= 20 and ``npm ci --prefix tests/agui_client`` (CI runs it).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from ag_ui_validate.pytest_plugin import validate_agui
from fastapi import Request
from langgraph.checkpoint.memory import InMemorySaver

from aais_agui import ServiceSettings, create_app
from aais_agui.http.security import Authenticated
from aais_langgraph import ApprovalAuthority
from aais_langgraph.authority import AccessPolicy
from aais_langgraph.ledger import SqliteLedger
from aais_langgraph.protocol import Actor
from hostile.report import record

from .demo_graph import EffectLog, build_demo_graph
from .http_support import serve, sse_messages

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "tests" / "agui_client"
DRIVER = "forbidden-resume.mjs"
TARGET = "/srv/forbidden.txt"

USERS: dict[str, frozenset[str]] = {"alice": frozenset({"sre"}), "bob": frozenset({"dev"})}
POLICY: dict[str, Any] = {"default_approvers": ["sre"], "viewer_groups": ["dev"]}


def authenticate(request: Request) -> Authenticated | None:
    """``Authorization: Bearer alice-token`` / ``bob-token`` -> that user and their groups."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    name = token.strip().removesuffix("-token")
    if scheme.lower() != "bearer" or token.strip() != f"{name}-token" or name not in USERS:
        return None
    return Authenticated(Actor(id=name, type="human"), groups=USERS[name])


def stream_events(path: Path) -> list[dict[str, Any]]:
    """The AG-UI events of one recorded SSE response body."""
    return [message["data"] for message in sse_messages(iter(path.read_text().splitlines()))]


def test_refused_resume_is_reoffered_and_records_nothing(tmp_path: Path) -> None:
    if shutil.which("node") is None:
        pytest.fail("Node.js >= 20 is required for the @ag-ui/client tests (tests/agui_client)")
    if not (CLIENT / "node_modules" / "@ag-ui" / "client").is_dir():
        pytest.fail(
            "tests/agui_client has no node_modules: run `npm ci --prefix tests/agui_client` first"
        )
    ledger = SqliteLedger(tmp_path / "ledger.db", synchronous="NORMAL")
    ledger.setup()
    authority = ApprovalAuthority(ledger, authorizer=AccessPolicy.from_mapping(POLICY))
    effects = EffectLog(tmp_path / "effects.db")
    graph = build_demo_graph(effects, InMemorySaver())
    app = create_app(
        graph,
        authority=authority,
        authenticate=authenticate,
        settings=ServiceSettings(stream_poll=0.05),
    )
    out = tmp_path / "out"

    with serve(app) as url:

        def node(phase: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                ["node", DRIVER, phase],
                cwd=CLIENT,
                env={**os.environ, "AAIS_AGUI_URL": url, "AAIS_AGUI_OUT": str(out)},
                capture_output=True,
                text=True,
                timeout=120,
            )

        def passed(completed: subprocess.CompletedProcess[str]) -> None:
            output = completed.stdout[-4000:] + completed.stderr[-4000:]
            assert completed.returncode == 0, (completed.args, output)

        # alice's run pauses on the approval.
        passed(node("start"))
        paused = json.loads((out / "forbidden-start.json").read_text())
        thread_id: str = paused["threadId"]
        interrupt_id: str = paused["interrupt"]["id"]
        request_id: str = paused["interrupt"]["metadata"]["aais"]["request"]["id"]
        assert [r.request_id for r in ledger.list_pending(thread_id=thread_id)] == [request_id]
        tip = ledger.audit_tip()

        # bob reconnects, sees the card, answers it, and is refused (tallied before the
        # driver's own assertions are checked, so an open door is counted either way).
        refusal = node("refuse")
        resolution = authority.get_resolution(request_id)
        ran = effects.list(thread_id)
        audit_changed = ledger.audit_tip() != tip
        record("AG-UI", 1, failed_open=int(resolution is not None or bool(ran) or audit_changed))
        passed(refusal)
        assert resolution is None
        assert ran == []
        assert not audit_changed
        assert [r.request_id for r in ledger.list_pending(thread_id=thread_id)] == [request_id]

        # The refusal's response as sent: RUN_ERROR, then a run offering the interrupt again.
        refused = stream_events(out / "streams" / "forbidden-bob-2.sse")
        types = [event["type"] for event in refused]
        assert types[:3] == ["RUN_STARTED", "RUN_ERROR", "RUN_STARTED"], types
        assert types.count("RUN_ERROR") == 1 and types[-1] == "RUN_FINISHED", types
        assert refused[1]["code"] == "aais.forbidden"
        assert TARGET not in refused[1]["message"]
        outcome = refused[-1]["outcome"]
        assert outcome["type"] == "interrupt"
        assert [interrupt["id"] for interrupt in outcome["interrupts"]] == [interrupt_id]

        # alice resumes with the same interrupt: the deletion runs, exactly once.
        passed(node("approve"))
        assert effects.list(thread_id) == [(thread_id, "delete_file", TARGET)]
        resolved = authority.get_resolution(request_id)
        assert resolved is not None
        assert resolved.resolution.outcome == "approved"
        assert authority.decided_by(resolved) == "alice"
        assert ledger.list_pending(thread_id=thread_id) == []

    streams = sorted((out / "streams").glob("forbidden-*.sse"))
    assert len(streams) == 5, [stream.name for stream in streams]
    for stream in streams:
        report = validate_agui(stream_events(stream))
        errors = [d for d in report.diagnostics if d.severity == "error"]
        assert report.summary.errors == 0, (stream.name, errors)

"""The real ``@ag-ui/client`` as a page with frontend tools: gated calls reach it only approved.

``create_app(ApprovalService(..., page_tools=gate))`` serves the page tool graph on loopback; the
Node script ``tests/agui_client/page-tools.mjs`` is the page (``HttpAgent`` with
``RunAgentInput.tools`` and an ``Origin`` header, running each tool call the client
reports). This test checks the ledger against what the page saw: the approved call
was released once and ran, the denied one was denied, the one approved from a page
whose tools changed was resolved ``stale``, and every recorded stream passes
``ag-ui-validate``.

Needs Node.js >= 20 and ``npm ci --prefix tests/agui_client`` (CI runs it).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import aais
import pytest
from ag_ui_validate.pytest_plugin import validate_agui
from langgraph.checkpoint.memory import InMemorySaver

from aais_agui import ApprovalService, ServiceSettings, create_app, local_development_authenticator
from aais_langgraph import ApprovalAuthority
from aais_langgraph.ledger import SqliteLedger

from .frontend_tools_graph import PAGE_ORIGIN, PAGE_TOOL, build_page_graph, page_tool_gate
from .http_support import serve, sse_messages

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "tests" / "agui_client"


def test_page_runs_only_approved_calls_of_gated_frontend_tools(tmp_path: Path) -> None:
    if shutil.which("node") is None:
        pytest.fail("Node.js >= 20 is required for the @ag-ui/client tests (tests/agui_client)")
    if not (CLIENT / "node_modules" / "@ag-ui" / "client").is_dir():
        pytest.fail(
            "tests/agui_client has no node_modules: run `npm ci --prefix tests/agui_client` first"
        )
    ledger = SqliteLedger(tmp_path / "ledger.db", synchronous="NORMAL")
    ledger.setup()
    authority = ApprovalAuthority(ledger)
    gate = page_tool_gate()
    settings = ServiceSettings(
        resume_due_every=None, orphans_every=None, allowed_origins=[PAGE_ORIGIN]
    )
    graph = build_page_graph(gate, InMemorySaver())
    app = create_app(
        ApprovalService(graph, authority, settings=settings, page_tools=gate),
        authenticate=local_development_authenticator(),
    )
    out = tmp_path / "out"
    with serve(app) as url:
        completed = subprocess.run(
            ["node", "page-tools.mjs"],
            cwd=CLIENT,
            env={
                **os.environ,
                "AAIS_AGUI_URL": url,
                "AAIS_AGUI_OUT": str(out),
                "AAIS_PAGE_ORIGIN": PAGE_ORIGIN,
            },
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert completed.returncode == 0, completed.stdout[-4000:] + completed.stderr[-4000:]

    def recorded(name: str) -> dict[str, Any]:
        return dict(json.loads((out / f"{name}.json").read_text()))

    approved = recorded("page-approved")
    assert approved["ran"] == [PAGE_TOOL]
    assert approved["action"]["arguments"]["origin"] == PAGE_ORIGIN
    resolved = authority.get_resolution(approved["requestId"])
    assert resolved is not None and resolved.resolution.outcome == "approved"
    aais.validate(resolved.to_json())
    execution = authority.execution(approved["requestId"])
    assert execution is not None and execution.state == "executed"

    for name, outcome in (("page-denied", "denied"), ("page-stale", "stale")):
        scenario = recorded(name)
        assert scenario["ran"] == []
        resolution = authority.get_resolution(scenario["requestId"])
        assert resolution is not None and resolution.resolution.outcome == outcome
        assert authority.execution(scenario["requestId"]) is None
        assert ledger.list_pending(thread_id=scenario["threadId"]) == []
    assert recorded("page-toast")["ran"] == ["show_toast"]

    streams = sorted((out / "streams").glob("page-*.sse"))
    assert len(streams) == 8, [stream.name for stream in streams]
    for stream in streams:
        events = [m["data"] for m in sse_messages(iter(stream.read_text().splitlines()))]
        report = validate_agui(events)
        assert report.summary.errors == 0, (stream.name, report.diagnostics)

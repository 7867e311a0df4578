"""Chromium runs a page with page tools: a gated call reaches the page only once approved.

The page (``tests/demo/browser/page_tools.html``) registers its tools, declares
them through the real ``@ag-ui/client`` loaded in the browser, and runs each tool
call the client reports. It is served from the same app as the agent, so the
``Origin`` header the browser sends is the origin the approval binds.
``browser/page-tools.mjs`` drives it: the gated ``change_background`` call waits
for the approval, then runs; an approval given after the page registered another
tool releases nothing and is recorded ``stale``.
"""

from __future__ import annotations

import json
import mimetypes
import subprocess
from pathlib import Path

from fastapi import HTTPException
from fastapi.responses import FileResponse, HTMLResponse
from langgraph.checkpoint.memory import InMemorySaver

from aais_agui import ApprovalService, ServiceSettings, create_app, local_development_authenticator
from aais_langgraph import ApprovalAuthority
from aais_langgraph.ledger import SqliteLedger
from agui.frontend_tools_graph import PAGE_TOOL, build_page_graph, page_tool_gate
from agui.http_support import serve

from .test_browser import BROWSER_PROJECT, SCREENSHOTS, _require_tools

MODULES = BROWSER_PROJECT.parents[1] / "agui_client" / "node_modules"
PAGE = BROWSER_PROJECT / "page_tools.html"


def module_file(path: str) -> Path:
    """A file of ``tests/agui_client/node_modules`` as a browser asks for it: extensionless
    relative imports (rxjs) resolve to ``.js`` or ``/index.js``."""
    root = MODULES.resolve()
    base = (root / path).resolve()
    if not base.is_relative_to(root):
        raise HTTPException(404)
    for candidate in (base, Path(f"{base}.js"), base / "index.js"):
        if candidate.is_file():
            return candidate
    raise HTTPException(404)


def test_page_runs_a_gated_page_tool_only_after_approval(tmp_path: Path) -> None:
    node = _require_tools()
    ledger = SqliteLedger(tmp_path / "ledger.db", synchronous="NORMAL")
    ledger.setup()
    authority = ApprovalAuthority(ledger)
    gate = page_tool_gate()
    settings = ServiceSettings(resume_due_every=None, orphans_every=None)
    graph = build_page_graph(gate, InMemorySaver())
    app = create_app(
        ApprovalService(graph, authority, settings=settings, page_tools=gate),
        authenticate=local_development_authenticator(),
        inbox=False,
    )

    @app.get("/page")
    async def page() -> HTMLResponse:
        return HTMLResponse(PAGE.read_text())

    @app.get("/favicon.ico", status_code=204)
    async def no_icon() -> None:
        return None

    @app.get("/modules/{path:path}")
    async def modules(path: str) -> FileResponse:
        found = module_file(path)
        script = found.suffix in (".js", ".mjs")
        kind = "text/javascript" if script else mimetypes.guess_type(found)[0]
        return FileResponse(found, media_type=kind or "application/octet-stream")

    with serve(app) as url:
        driver = subprocess.run(
            [node, "page-tools.mjs", url, str(SCREENSHOTS), str(tmp_path / "chromium-profile")],
            cwd=BROWSER_PROJECT,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert driver.returncode == 0, driver.stdout[-4000:] + driver.stderr[-4000:]
    [line] = [line for line in driver.stdout.splitlines() if line.startswith("RESULT ")]
    result = json.loads(line.removeprefix("RESULT "))

    assert result["boundOrigin"] == url
    assert result["ran"] == [PAGE_TOOL]
    approved = authority.get_resolution(result["approvedRequestId"])
    assert approved is not None and approved.resolution.outcome == "approved"
    execution = authority.execution(result["approvedRequestId"])
    assert execution is not None and execution.state == "executed"
    stale = authority.get_resolution(result["staleRequestId"])
    assert stale is not None and stale.resolution.outcome == "stale"
    assert authority.execution(result["staleRequestId"]) is None
    assert ledger.list_pending(thread_id=result["threadId"]) == []

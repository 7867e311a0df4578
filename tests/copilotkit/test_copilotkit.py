"""CopilotKit's ``useInterrupt`` (examples/copilotkit) in headless Chromium, both deployments.

Builds the example with esbuild, starts the AG-UI server (bearer token for
``carol``, the built direct page on the same origin) and CopilotKit's runtime
(a Node server whose HttpAgent points at ``/agent``), then runs the example's
Playwright test. Afterwards: each approved action ran exactly once, denied,
cancelled and refused ones never, and every decision the ledger audited names
the authenticated actor, never the page's body actor.

Needs ``npm ci --prefix examples/copilotkit`` and ``/usr/bin/chromium``.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from aais_langgraph.ledger import SqliteLedger
from agui.demo_graph import EffectLog

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "copilotkit"
SERVER = Path(__file__).resolve().parent / "server.py"
CHROMIUM = Path("/usr/bin/chromium")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_until_up(url: str, process: subprocess.Popen[str], name: str) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            output = process.stdout.read() if process.stdout and process.poll() is not None else ""
            pytest.fail(f"{name} did not start:\n{output[-3000:]}")
        time.sleep(0.2)


@pytest.fixture(scope="module")
def example_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Path, dict[str, object]]]:
    node = shutil.which("node")
    if node is None:
        pytest.fail("Node.js >= 20 is required for the CopilotKit example test")
    if not (EXAMPLE / "node_modules" / "@copilotkit" / "react-core").is_dir():
        pytest.fail(
            "examples/copilotkit has no node_modules: run `npm ci --prefix examples/copilotkit`"
        )
    if not CHROMIUM.exists():
        pytest.fail("/usr/bin/chromium is missing: run `apt-get install -y chromium` (Debian)")
    built = subprocess.run(
        [node, "build.mjs"], cwd=EXAMPLE, capture_output=True, text=True, timeout=120
    )
    assert built.returncode == 0, built.stdout + built.stderr
    sizes = json.loads((EXAMPLE / "dist" / "sizes.json").read_text())
    folder = tmp_path_factory.mktemp("copilotkit")
    token = secrets.token_urlsafe(24)
    agui_port, runtime_port = _free_port(), _free_port()
    env = {**os.environ, "AAIS_AGUI_TOKEN": token, "COPILOTKIT_TELEMETRY_DISABLED": "true"}
    processes: list[subprocess.Popen[str]] = []
    try:
        agui = subprocess.Popen(
            [
                sys.executable,
                str(SERVER),
                "--dir",
                str(folder / "server"),
                "--port",
                str(agui_port),
                "--pages",
                str(EXAMPLE / "dist" / "direct"),
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        processes.append(agui)
        agui_url = f"http://127.0.0.1:{agui_port}"
        _wait_until_up(f"{agui_url}/agent/health", agui, "the AG-UI server")
        runtime = subprocess.Popen(
            [node, "runtime.mjs", "--agent-url", f"{agui_url}/agent", "--port", str(runtime_port)],
            cwd=EXAMPLE,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        processes.append(runtime)
        runtime_url = f"http://127.0.0.1:{runtime_port}"
        _wait_until_up(f"{runtime_url}/health", runtime, "the CopilotKit runtime")
        out = folder / "expected.json"
        completed = subprocess.run(
            [node, "--test", "--test-reporter=spec", "test/"],
            cwd=EXAMPLE,
            env={
                **env,
                "AAIS_TOKEN": token,
                "AAIS_RUNTIME_URL": f"{runtime_url}/",
                "AAIS_DIRECT_URL": f"{agui_url}/copilotkit/",
                "AAIS_EXAMPLE_OUT": str(out),
            },
            capture_output=True,
            text=True,
            timeout=240,
        )
        logs = ""
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                logs += process.communicate(timeout=20)[0][-3000:]
            except subprocess.TimeoutExpired:
                process.kill()
        assert completed.returncode == 0, completed.stdout[-8000:] + completed.stderr[-3000:] + logs
        yield folder / "server", {"expected": json.loads(out.read_text()), "sizes": sizes}
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()


def test_each_approved_action_ran_once_and_nothing_else_ran(
    example_run: tuple[Path, dict[str, object]],
) -> None:
    folder, results = example_run
    expected = results["expected"]
    assert isinstance(expected, dict) and set(expected) == {"runtime", "direct"}
    ran = sorted([kind, target] for _, kind, target in EffectLog(folder / "effects.db").list())
    wanted = sorted(effect for mode in expected.values() for effect in mode["effects"])
    assert ran == wanted
    for mode in expected.values():
        for target in mode["never"]:
            assert target not in {t for _, t in ran}


def test_the_recorded_actor_is_the_authenticated_one(
    example_run: tuple[Path, dict[str, object]],
) -> None:
    folder, _ = example_run
    ledger = SqliteLedger(folder / "ledger.db")
    decided = [entry for entry in ledger.audit_entries() if entry.kind == "decided"]
    # Per deployment: approve, deny, the subgraph's approve, approve + deny of the two emails
    # (cancels record no decision).
    assert len(decided) == 10
    assert {entry.payload["actor_id"] for entry in decided} == {"carol"}


def test_the_headless_page_is_a_fraction_of_the_full_provider(
    example_run: tuple[Path, dict[str, object]],
) -> None:
    _, results = example_run
    sizes = results["sizes"]
    assert isinstance(sizes, dict)
    # Measured with 1.74.0: about 0.66 MB (headless) against 16.5 MB (full provider), minified.
    assert sizes["direct"]["bytes"] < 1_500_000
    assert sizes["direct"]["bytes"] * 10 < sizes["runtime"]["bytes"]

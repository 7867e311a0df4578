"""Drive the real ``@ag-ui/client`` tests (tests/agui_client) against the demo server.

The server runs in a subprocess on 127.0.0.1 with the SQLite defaults and the
local-development authenticator; ``node --test`` talks to it over HTTP and
writes what it saw to a folder that this test then checks: interrupt metadata
against the reference ``aais.validate``, executed side effects against what
each Node test expected (exactly once, or nothing), the generic client's bound
answer against the served ``responseSchema``, and every recorded AG-UI stream
against ``ag-ui-validate`` (0 errors) and ag-ui-protocol 1.0's event models.

Needs Node.js >= 20 and ``npm ci --prefix tests/agui_client`` (CI runs it).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import aais
import httpx
import jsonschema
import pytest
from ag_ui.core import Event
from ag_ui_validate.pytest_plugin import validate_agui
from pydantic import TypeAdapter

from .demo_graph import EffectLog
from .http_support import sse_messages

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "tests" / "agui_client"
SERVER = Path(__file__).resolve().parent / "demo_server.py"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def node_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[subprocess.CompletedProcess[str], Path, Path]]:
    if shutil.which("node") is None:
        pytest.fail("Node.js >= 20 is required for the @ag-ui/client tests (tests/agui_client)")
    if not (CLIENT / "node_modules" / "@ag-ui" / "client").is_dir():
        pytest.fail(
            "tests/agui_client has no node_modules: run `npm ci --prefix tests/agui_client` first"
        )
    folder = tmp_path_factory.mktemp("node")
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, str(SERVER), "--dir", str(folder / "server"), "--port", str(port)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{url}/agent/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                output = server.stdout.read() if server.stdout else ""
                pytest.fail(f"demo server did not start:\n{output[-3000:]}")
            time.sleep(0.1)
        out = folder / "out"
        completed = subprocess.run(
            ["node", "--test", "--test-reporter=spec"],
            cwd=CLIENT,
            env={**os.environ, "AAIS_AGUI_URL": url, "AAIS_AGUI_OUT": str(out)},
            capture_output=True,
            text=True,
            timeout=120,
        )
        yield completed, out, folder / "server"
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def test_node_client_tests_pass(
    node_run: tuple[subprocess.CompletedProcess[str], Path, Path],
) -> None:
    completed, _, _ = node_run
    assert completed.returncode == 0, completed.stdout[-6000:] + completed.stderr[-3000:]


def test_interrupt_metadata_passes_the_reference_validator(
    node_run: tuple[subprocess.CompletedProcess[str], Path, Path],
) -> None:
    _, out, _ = node_run
    node = json.loads((out / "interrupt-node.json").read_text())["interrupt"]
    tools = json.loads((out / "interrupt-tools.json").read_text())["interrupts"]
    for interrupt in [node, *tools]:
        aais.validate(interrupt["metadata"]["aais"])
    assert {interrupt["reason"] for interrupt in tools} == {"tool_call"}


def test_actions_ran_exactly_as_the_node_tests_expect(
    node_run: tuple[subprocess.CompletedProcess[str], Path, Path],
) -> None:
    _, out, server = node_run
    effects = EffectLog(server / "effects.db")
    names = ("resumed", "second-client", "tool-calls", "tampered", "cancelled", "subagent")
    for name in (*names, "bound", "bound-denied", "bound-drifted"):
        expected = json.loads((out / f"{name}.json").read_text())
        ran = sorted([kind, target] for _, kind, target in effects.list(expected["threadId"]))
        assert ran == sorted(expected["expect"]), name


def test_the_generic_clients_answer_validates_against_the_served_response_schema(
    node_run: tuple[subprocess.CompletedProcess[str], Path, Path],
) -> None:
    _, out, _ = node_run
    bound = json.loads((out / "bound.json").read_text())
    interrupt = bound["interrupt"]
    jsonschema.Draft202012Validator.check_schema(interrupt["responseSchema"])
    validator = jsonschema.Draft202012Validator(interrupt["responseSchema"])
    assert validator.is_valid(bound["payload"])
    digest = interrupt["metadata"]["aais"]["request"]["action_digest"]
    assert bound["payload"]["approvedActionFingerprint"] == digest


def test_every_recorded_event_is_an_ag_ui_1_0_event(
    node_run: tuple[subprocess.CompletedProcess[str], Path, Path],
) -> None:
    # ag-ui-validate 0.4.0 checks an outcome only as an object; the 1.0 models type the
    # interrupts' fields (reason, toolCallId, responseSchema, expiresAt, subagentRunId).
    _, out, _ = node_run
    events = TypeAdapter(Event)
    interrupts = 0
    for stream in sorted((out / "streams").glob("*.sse")):
        for message in sse_messages(iter(stream.read_text().splitlines())):
            event = events.validate_python(message["data"])
            outcome = getattr(event, "outcome", None)
            if outcome is not None and outcome.type == "interrupt":
                interrupts += len(outcome.interrupts)
    assert interrupts >= 10


def test_recorded_streams_pass_ag_ui_validate(
    node_run: tuple[subprocess.CompletedProcess[str], Path, Path],
) -> None:
    _, out, _ = node_run
    streams = sorted((out / "streams").glob("*.sse"))
    assert len(streams) >= 10
    for stream in streams:
        lines = iter(stream.read_text().splitlines())
        events = [message["data"] for message in sse_messages(lines)]
        report = validate_agui(events)
        errors = [d for d in report.diagnostics if d.severity == "error"]
        assert report.summary.errors == 0, (stream.name, errors)

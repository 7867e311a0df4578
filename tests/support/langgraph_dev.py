"""``langgraph dev`` as the tests start it: one app folder served on a loopback port,
its output in ``server.log`` there, its blocking-call detector on, killed afterwards."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from support.pg_cluster import free_port

LANGGRAPH = Path(sys.executable).with_name("langgraph")
QUIET = {
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",  # the CLI's usage report
    "LANGGRAPH_NO_VERSION_CHECK": "true",  # the server's look-up of newer releases
    "LANGSMITH_TRACING": "false",
    "LANGSMITH_TRACING_V2": "false",
    "LANGCHAIN_TRACING_V2": "false",
    "LANGCHAIN_TRACING": "false",
    "LANGGRAPH_METRICS_ENABLED": "false",
}


def server_env(settings: Mapping[str, str]) -> dict[str, str]:
    """This process's environment without LangSmith, LangChain, LangGraph or AAIS
    settings, quiet, plus ``settings``."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("LANGSMITH_", "LANGCHAIN_", "LANGGRAPH_", "AAIS_"))
    }
    return env | QUIET | dict(settings)


def server_log(folder: Path) -> str:
    """The end of the server's output."""
    return (folder / "server.log").read_text(errors="replace")[-4000:]


@contextmanager
def langgraph_dev(
    folder: Path, env: Mapping[str, str], *, startup_timeout: float = 60.0
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """Serve ``folder`` (its ``langgraph.json``) with ``env``; yields its URL and process
    once ``/ok`` answers, and kills it afterwards."""
    if not LANGGRAPH.exists():
        pytest.fail("langgraph-cli[inmem] is not installed (it is in the dev extra)")
    port = free_port()
    command = [
        str(LANGGRAPH), "dev", "--config", "langgraph.json",
        "--host", "127.0.0.1", "--port", str(port),
        "--no-browser", "--no-reload",
    ]  # fmt: skip
    assert "--allow-blocking" not in command, "the server's blocking-call detector stays on"
    with (folder / "server.log").open("wb") as log:
        process = subprocess.Popen(
            command, cwd=folder, env=dict(env), stdin=subprocess.DEVNULL, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + startup_timeout
        while True:
            if process.poll() is not None:
                pytest.fail(f"langgraph dev exited:\n{server_log(folder)}")
            try:
                if httpx.get(f"{url}/ok", timeout=1.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(
                    f"langgraph dev did not answer in {startup_timeout} s:\n{server_log(folder)}"
                )
            time.sleep(0.1)
        yield url, process
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)

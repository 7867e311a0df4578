"""``aais-agui`` options: a busy port is one line and a non-zero exit; ``--db`` on either
side of the command, else ``AAIS_DB``."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from .support import running

HERE = Path(__file__).resolve().parent


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A loopback port another socket holds and listens on."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield int(holder.getsockname()[1])


def _aais_agui(
    args: list[str], cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "aais_agui.cli", *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    "command",
    [["demo"], ["serve", "tiny_graph:builder", "--local-dev-login"]],
    ids=["demo", "serve"],
)
def test_a_busy_port_is_one_line_naming_the_port_and_the_flag(
    command: list[str], busy_port: int, tmp_path: Path
) -> None:
    db = tmp_path / "app.db"
    done = _aais_agui([*command, "--port", str(busy_port), "--db", str(db)], cwd=HERE)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert str(busy_port) in lines[0] and "--port" in lines[0]
    assert "Traceback" not in done.stderr + done.stdout
    assert not db.exists()  # nothing was opened before the port was known to be free


def test_db_may_follow_or_precede_the_command(tmp_path: Path) -> None:
    before = tmp_path / "before.db"
    args = ["--db", str(before), "serve", "tiny_graph:builder", "--port", "0"]
    with running([*args, "--local-dev-login"], cwd=HERE) as server:
        assert server.url
    assert before.exists()


def test_aais_db_names_the_ledger_when_db_is_absent(tmp_path: Path) -> None:
    from_env = tmp_path / "from-env.db"
    args = ["serve", "tiny_graph:builder", "--port", "0", "--local-dev-login"]
    with running(args, cwd=HERE, env={"AAIS_DB": str(from_env)}) as server:
        assert server.url
    assert from_env.exists()

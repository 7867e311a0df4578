"""``aais-langgraph --db``: before or after the command, else ``AAIS_DB``; else an error."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from aais_langgraph.cli import main


def run(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(list(args), stdin=io.StringIO(""), stdout=out), out.getvalue()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "app.db"
    assert run("--db", str(path), "init") == (0, "ledger ready\n")
    return path


def test_db_after_the_command(db: Path) -> None:
    assert run("pending", "--db", str(db)) == (0, "0 pending\n")


def test_db_before_the_command(db: Path) -> None:
    assert run("--db", str(db), "unknown") == (0, "0 outcome unknown\n")


def test_db_after_the_command_wins_over_one_before(db: Path, tmp_path: Path) -> None:
    code, out = run("--db", str(tmp_path / "missing.db"), "pending", "--db", str(db))
    assert (code, out) == (0, "0 pending\n")


def test_aais_db_names_the_ledger_when_db_is_absent(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AAIS_DB", str(db))
    assert run("pending") == (0, "0 pending\n")


def test_db_wins_over_aais_db(db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AAIS_DB", str(tmp_path / "missing.db"))
    assert run("pending", "--db", str(db)) == (0, "0 pending\n")


def test_neither_db_nor_aais_db_is_an_error_naming_both(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("AAIS_DB", raising=False)
    with pytest.raises(SystemExit) as exited:
        run("pending")
    assert exited.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--db" in error and "AAIS_DB" in error


@pytest.mark.parametrize(
    ("command", "said"),
    [
        (("webhooks", "list"), "0 deliveries, 0 dead\n"),
        (("webhooks", "retry", "--dead"), "0 handed back to the senders\n"),
    ],
)
def test_db_after_a_nested_command(db: Path, command: tuple[str, ...], said: str) -> None:
    assert run(*command, "--db", str(db)) == (0, said)


def test_db_between_a_command_and_its_nested_command(db: Path) -> None:
    assert run("webhooks", "--db", str(db), "list") == (0, "0 deliveries, 0 dead\n")

"""``aais-langgraph --help`` reads as plain text, says that answering asks y/N, and both
commands give every command and argument a help line."""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from aais_agui.cli import _parser as agui_parser
from aais_langgraph import ApprovalAuthority, SqliteLedger
from aais_langgraph.cli import _parser as cli_parser
from aais_langgraph.cli import main


def help_text(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "aais_langgraph.cli", *args, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout


def test_the_help_has_no_markup_and_says_answers_are_confirmed() -> None:
    text = help_text()
    assert "``" not in text and ":func:" not in text
    assert "y/N" in text and "--yes" in text
    approve = " ".join(help_text("approve").split())
    assert "ask y/N" in approve and "submits nothing" in approve


@pytest.mark.parametrize("answer", ["\n", "no\n"])
def test_approve_without_a_yes_submits_nothing_and_the_approval_stays(
    answer: str, tmp_path: Path
) -> None:
    db = tmp_path / "app.db"
    authority = ApprovalAuthority(SqliteLedger(db))
    action = {"kind": "fs.delete", "name": "rm", "summary": "Delete", "arguments": {"p": "/x"}}
    requested = authority.request(action, origin={"harness": "tests", "session_id": "s1"})
    out = io.StringIO()
    status = main(
        ["--db", str(db), "approve", requested.request.id], stdin=io.StringIO(answer), stdout=out
    )
    assert status == 1
    assert f"approve {requested.request.id} as once? [y/N] nothing submitted" in out.getvalue()
    assert authority.get_resolution(requested.request.id) is None


@pytest.mark.parametrize("command", ["approve", "deny", "cancel"])
def test_answering_without_a_terminal_says_to_pass_yes_and_the_approval_stays(
    command: str, tmp_path: Path
) -> None:
    db = tmp_path / "app.db"
    authority = ApprovalAuthority(SqliteLedger(db))
    action = {"kind": "fs.delete", "name": "rm", "summary": "Delete", "arguments": {"p": "/x"}}
    requested = authority.request(action, origin={"harness": "tests", "session_id": "s1"})
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "aais_langgraph.cli",
            "--db",
            str(db),
            command,
            requested.request.id,
        ],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    said = done.stdout.splitlines()[-1]
    assert "confirmation on a terminal" in said and f"pass --yes to {command}" in said
    assert said.endswith("Nothing submitted.")
    assert authority.get_resolution(requested.request.id) is None


def commands_without_help(parser: argparse.ArgumentParser, path: str) -> list[str]:
    """Every command and argument below ``parser`` that ``--help`` would show bare."""
    missing = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            described = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                if not described.get(name):
                    missing.append(f"{path} {name}")
                missing += commands_without_help(sub, f"{path} {name}")
        elif action.help is None or not action.help.strip():
            missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
    return missing


@pytest.mark.parametrize("command", [cli_parser, agui_parser], ids=["aais-langgraph", "aais-agui"])
def test_every_command_and_argument_has_help(
    command: Callable[[], argparse.ArgumentParser],
) -> None:
    parser = command()
    assert parser.description, parser.prog
    assert commands_without_help(parser, parser.prog) == []

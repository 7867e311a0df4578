"""The demo tools deduplicate by ``approval_key()``: a re-run of one approved call acts once."""

from __future__ import annotations

from pathlib import Path

import pytest

from aais_agui.demo.tools import DemoWorkspace, demo_interrupt_on, demo_tools
from aais_langgraph.gate.nodes import run_approved


def test_a_call_re_run_under_the_same_approval_acts_once(tmp_path: Path) -> None:
    workspace = DemoWorkspace(tmp_path / "ws")
    tools = {t.name: t for t in demo_tools(workspace)}
    email = {
        "to": "bob@example.com",
        "subject": "hi",
        "body": "b",
        "smtp_password": "secret://smtp/demo",
    }

    first = run_approved("apr_1", lambda: tools["send_email"].invoke(email))
    again = run_approved("apr_1", lambda: tools["send_email"].invoke(email))  # recovered run
    other = run_approved("apr_2", lambda: tools["run_shell"].invoke({"command": "pytest"}))

    assert again == first and other == "(simulated) 12 passed in 0.84s"
    assert [(e["tool"], e["key"]) for e in workspace.executed()] == [
        ("send_email", "apr_1"),
        ("run_shell", "apr_2"),
    ]
    assert len((workspace.root / "outbox.jsonl").read_text().splitlines()) == 1


def test_every_demo_tool_is_declared_idempotent(tmp_path: Path) -> None:
    config = demo_interrupt_on(DemoWorkspace(tmp_path / "ws"))
    assert {name: entry["idempotent"] for name, entry in config.items()} == dict.fromkeys(
        ("run_shell", "write_file", "send_email"), True
    )


def test_a_demo_tool_outside_an_approval_refuses_to_act(tmp_path: Path) -> None:
    workspace = DemoWorkspace(tmp_path / "ws")
    [run_shell, *_] = demo_tools(workspace)
    with pytest.raises(RuntimeError, match="requires_approval"):
        run_shell.invoke({"command": "ls"})
    assert workspace.executed() == []

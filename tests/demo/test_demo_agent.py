"""The demo agent: a deterministic fake model, harmless tools, and realistic approvals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aais
import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from aais_agui.demo import (
    HELP,
    SMTP_CREDENTIAL_REF,
    DemoChatModel,
    DemoWorkspace,
    build_demo_agent,
    demo_tools,
    propose_calls,
)
from aais_langgraph import ApprovalAuthority, build_decision, resume_with_decisions
from aais_langgraph.gate import AUTHORITY_KEY
from aais_langgraph.gate.langchain_ui import approval_envelope
from aais_langgraph.gate.nodes import run_approved

ALICE = {"id": "alice", "type": "human"}


@pytest.mark.parametrize(
    ("text", "tools"),
    [
        ("please run the tests", ["run_shell"]),
        ("run `git status`", ["run_shell"]),
        ("write notes.md: hello", ["write_file"]),
        ("email bob@example.com the report", ["send_email"]),
        (
            "run the tests, write log.txt and mail the team",
            ["run_shell", "write_file", "send_email"],
        ),
        ("hello there", []),
    ],
)
def test_the_model_proposes_tool_calls_from_the_users_words(text: str, tools: list[str]) -> None:
    assert [name for name, _ in propose_calls(text)] == tools


def test_proposed_arguments_follow_the_message() -> None:
    calls = dict(propose_calls("run `make lint`, write todo.txt: a\nb and email x@example.org"))
    assert calls["run_shell"] == {"command": "make lint"}
    assert calls["write_file"]["path"] == "todo.txt"
    assert calls["send_email"]["to"] == "x@example.org"


def test_the_email_carries_a_credential_reference_never_a_secret() -> None:
    [(_, arguments)] = propose_calls("email alice@example.com")
    assert arguments["smtp_password"] == SMTP_CREDENTIAL_REF


def test_the_model_answers_each_turn_the_same_way() -> None:
    model = DemoChatModel()
    conversation = [HumanMessage("run the tests", id="u1")]
    first, again = model.invoke(conversation), model.invoke(conversation)
    assert first.id == again.id and first.tool_calls == again.tool_calls
    assert first.tool_calls[0]["id"] == "call_0_0_run_shell"
    assert model.bind_tools([]) is model


def test_the_model_reports_results_and_refusals() -> None:
    calls = [
        {"name": "run_shell", "args": {"command": "ls"}, "id": "c1", "type": "tool_call"},
        {"name": "send_email", "args": {}, "id": "c2", "type": "tool_call"},
    ]
    conversation = [
        HumanMessage("go", id="u1"),
        AIMessage("", tool_calls=calls, id="a1"),
        ToolMessage("ok", tool_call_id="c1", name="run_shell"),
        ToolMessage(
            "The reviewer denied it.", tool_call_id="c2", name="send_email", status="error"
        ),
    ]
    reply = DemoChatModel().invoke(conversation)
    assert reply.content == (
        "Done: run_shell finished.\nsend_email was not run. The reviewer denied it."
    )
    assert DemoChatModel().invoke([HumanMessage("hi", id="u2")]).content == HELP


def test_write_file_stays_inside_the_workspace(tmp_path: Path) -> None:
    workspace = DemoWorkspace(tmp_path / "ws")
    write_file = {tool.name: tool for tool in demo_tools(workspace)}["write_file"]
    written = run_approved("apr_1", lambda: write_file.invoke({"path": "a/b.txt", "content": "hi"}))
    assert written == "wrote 2 bytes to a/b.txt"
    for escape in ("../outside.txt", "/etc/passwd", "."):
        with pytest.raises(ValueError, match="inside its workspace"):
            run_approved(
                "apr_2", lambda path=escape: write_file.invoke({"path": path, "content": "x"})
            )
    assert not (tmp_path / "outside.txt").exists()


def _paused(tmp_path: Path, text: str) -> tuple[Any, ApprovalAuthority, dict[str, Any]]:
    graph = build_demo_agent(DemoWorkspace(tmp_path / "ws"), checkpointer=InMemorySaver())
    authority = ApprovalAuthority()
    config = {"configurable": {"thread_id": "t1", AUTHORITY_KEY: authority}}
    graph.invoke({"messages": [{"role": "user", "content": text}]}, config)
    return graph, authority, config


def test_the_email_approval_is_redacted_with_a_binding_hint(tmp_path: Path) -> None:
    graph, _, config = _paused(tmp_path, "email alice@example.com")
    [pending] = graph.get_state(config).interrupts
    aais.validate(approval_envelope(pending.value))
    action = pending.value["request"]["action"]
    assert action["presentation"]["redacted"] is True
    assert SMTP_CREDENTIAL_REF in action["presentation"]["binding_hint"]
    assert action["arguments"]["smtp_password"] == SMTP_CREDENTIAL_REF


def test_a_session_approval_covers_later_test_runs_only(tmp_path: Path) -> None:
    graph, authority, config = _paused(tmp_path, "run the tests")
    [pending] = graph.get_state(config).interrupts
    aais.validate(approval_envelope(pending.value))
    session = pending.value["request"]["choices"][1]
    assert (session["scope"], session["scope_constraints"]["command_prefix"]) == (
        "session",
        ["pytest"],
    )
    decided = build_decision(pending.value, decision="approve", scope="session", actor=ALICE)
    resume_with_decisions(graph, config, [decided], actor=ALICE, authority=authority)
    graph.invoke({"messages": [{"role": "user", "content": "run the tests again"}]}, config)
    assert graph.get_state(config).interrupts == ()
    graph.invoke({"messages": [{"role": "user", "content": "run `rm -rf build`"}]}, config)
    [asked] = graph.get_state(config).interrupts
    assert asked.value["request"]["action"]["arguments"] == {"command": "rm -rf build"}


def test_a_redacted_presentation_needs_a_binding_hint() -> None:
    from aais_langgraph.tools import ApprovalMiddleware

    with pytest.raises(ValueError, match="binding_hint"):
        ApprovalMiddleware({"send_email": {"presentation": {"redacted": True}}})

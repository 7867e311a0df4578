"""The session choice for a proposed command is derived from it, shown, and granted as shown."""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.tools import BaseTool, tool

from aais_langgraph.tools import ApprovalMiddleware, command_session_scope

from .helpers import answer, call, pending, script, thread, turn


def shell_tool(ran: list[str]) -> BaseTool:
    @tool
    def run_shell(command: str) -> str:
        """Run a shell command."""
        ran.append(command)
        return "ok"

    return run_shell


def shell_agent(saver: Any, authority: Any, ran: list[str], commands: list[str], scope: Any) -> Any:
    model = script(*(turn(call("run_shell", f"c{i}", command=c)) for i, c in enumerate(commands)))
    return create_agent(
        model,
        tools=[shell_tool(ran)],
        middleware=[
            ApprovalMiddleware(
                {"run_shell": {"allowed_decisions": ["approve", "reject"], "session_scope": scope}},
                authority=authority,
            )
        ],
        checkpointer=saver,
    )


def session_choice(requested: dict[str, Any]) -> dict[str, Any] | None:
    found = [c for c in requested["request"]["choices"] if c["scope"] == "session"]
    return found[0] if found else None


@pytest.mark.parametrize(
    ("command", "words"),
    [
        ("git status -s", ["git", "status"]),
        ("ls -la", ["ls"]),
        ("pytest -q tests", ["pytest"]),
        ("./build.sh release", ["./build.sh", "release"]),
    ],
)
def test_the_session_choice_covers_the_proposed_program_and_subcommand(
    saver: Any, authority: Any, command: str, words: list[str]
) -> None:
    agent = shell_agent(saver, authority, [], [command], command_session_scope())
    agent.invoke({"messages": [("user", "go")]}, thread())
    choice = session_choice(pending(agent, thread())["c0"])
    assert choice is not None
    assert choice["scope_constraints"] == {"action_name": "run_shell", "command_prefix": words}
    assert " ".join(words) in choice["label"]


@pytest.mark.parametrize(
    "command",
    [
        "bash -c 'rm -rf ~'",
        "sudo ls",
        "env ls",
        "python3.12 x.py",
        "ls; reboot",
        "FOO=1 ls",
        "ls *",
    ],
)
def test_no_session_choice_for_a_command_a_grant_could_not_bound(
    saver: Any, authority: Any, command: str
) -> None:
    agent = shell_agent(saver, authority, [], [command], command_session_scope())
    agent.invoke({"messages": [("user", "go")]}, thread())
    requested = pending(agent, thread())["c0"]
    assert session_choice(requested) is None
    assert {(c["decision"], c["scope"]) for c in requested["request"]["choices"]} == {
        ("approve", "once"),
        ("deny", "once"),
    }


def test_what_is_granted_is_exactly_what_was_shown(saver: Any, authority: Any) -> None:
    ran: list[str] = []
    commands = ["git status -s", "git status", "git push", "git status; rm -rf ~"]
    agent = shell_agent(
        saver, authority, ran, commands, command_session_scope(expires_in_seconds=60)
    )
    agent.invoke({"messages": [("user", "go")]}, thread())
    first = pending(agent, thread())["c0"]
    shown = session_choice(first)
    assert shown is not None

    answer(agent, thread(), authority, (first, "approve", "session"))

    [grant] = authority.list_grants()
    assert {"action_name": grant.action_name, **grant.constraints} == shown["scope_constraints"]
    assert ran == ["git status -s", "git status"]
    assert list(pending(agent, thread())) == ["c2"]


def test_a_static_session_scope_is_not_offered_for_a_call_it_does_not_cover(
    saver: Any, authority: Any
) -> None:
    # The demo used to offer its "pytest" session choice on `ls`, and approving it granted pytest.
    scope = {"action_name": "run_shell", "command_prefix": "pytest"}
    agent = shell_agent(saver, authority, [], ["ls -la", "pytest -q"], scope)
    agent.invoke({"messages": [("user", "go")]}, thread())
    assert session_choice(pending(agent, thread())["c0"]) is None
    answer(agent, thread(), authority, (pending(agent, thread())["c0"], "approve"))
    choice = session_choice(pending(agent, thread())["c1"])
    assert choice is not None and "pytest" in choice["label"]


def test_an_edited_call_is_not_offered_a_session_choice_that_does_not_cover_it(
    saver: Any, authority: Any
) -> None:
    from aais_langgraph.tools import edit_tool_call

    from .helpers import ALICE

    model = script(turn(call("run_shell", "c0", command="ls -la")))
    agent = create_agent(
        model,
        tools=[shell_tool([])],
        middleware=[
            ApprovalMiddleware(
                {"run_shell": {"session_scope": {"command_prefix": "ls"}}}, authority=authority
            )
        ],
        checkpointer=saver,
    )
    agent.invoke({"messages": [("user", "go")]}, thread())
    original = pending(agent, thread())["c0"]
    assert session_choice(original) is not None

    successor = edit_tool_call(
        agent,
        thread(),
        original["request"]["id"],
        {"command": "rm -rf build"},
        actor=ALICE,
        authority=authority,
        action_digest=original["request"]["action_digest"],
    )

    assert [c.scope for c in successor.request.choices] == ["once", "once"]

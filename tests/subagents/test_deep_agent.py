"""A deep agent's gated subagent tool: listed on the parent thread, answered through it.

The agent (``deep_agent.py``) runs three tool tasks in its first turn: two ``task``
calls (``mailer``, gated ``send_email`` beside ungated ``look_up``; ``researcher``,
ungated ``search``) and its own ungated ``take_note``. Every run is counted in the
effects log: the gated tool runs at most once, and the siblings that finished before
the pause are not run again by the resume, whatever the answer. Each test pauses the
agent, then opens the same SQLite files again (a restart: new saver, ledger, authority
and graph) before it lists and answers.
"""

from __future__ import annotations

import io
from typing import Any

from langchain_core.messages import ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from aais_langgraph import (
    ApprovalRequested,
    ThreadDriver,
    aresume_with_decisions,
    build_decision,
    pending_approvals,
    resume_with_decisions,
)
from aais_langgraph.cli import main as cli_main
from aais_langgraph.protocol import id_for
from aais_langgraph.protocol.extensions import SUBAGENT_EXTENSION, TOOL_CALL_ID_EXTENSION
from aais_langgraph.tools import edit_tool_call

from .conftest import THREAD, Files, Opened
from .deep_agent import GATED, RECIPIENT, SEND_CALL_ID, SIBLINGS, build_deep_agent

ALICE = {"id": "alice", "type": "human"}
PAUSED = {GATED: 0, **{name: 1 for name in SIBLINGS}}
"""What ran when the agent pauses: every sibling once, the gated tool never."""


def pause(files: Files) -> None:
    with files.open() as opened:
        opened.agent.invoke({"messages": [("user", "Email Bob and research X")]}, opened.config)
    assert files.effects.counts() == PAUSED


def the_request(opened: Opened) -> ApprovalRequested:
    [interrupt] = opened.agent.get_state(opened.config).interrupts
    return ApprovalRequested.from_data(interrupt.value)


def told(opened: Opened) -> dict[str, str]:
    """What each of the parent's tool calls returned (a subagent's: its last answer, which
    repeats what its own tools returned)."""
    messages = opened.agent.get_state(opened.config).values["messages"]
    return {m.tool_call_id: str(m.content) for m in messages if isinstance(m, ToolMessage)}


def finished(opened: Opened) -> bool:
    state = opened.agent.get_state(opened.config)
    return state.next == () and not state.interrupts


def decide(opened: Opened, kind: str) -> list[Any]:
    decided = build_decision(the_request(opened), decision=kind, scope="once", actor=ALICE)
    return resume_with_decisions(
        opened.agent, opened.config, [decided], actor=ALICE, authority=opened.authority
    )


def test_the_subagents_request_is_listed_on_the_parent_thread(files: Files) -> None:
    pause(files)
    with files.open() as opened:
        session = id_for(THREAD)  # the parent thread's session
        [listed] = pending_approvals(
            opened.authority, opened.agent, session_id=session
        ).snapshot.pending
        [in_snapshot] = opened.authority.snapshot(session_id=session).snapshot.pending
        requested = the_request(opened)
        stored = opened.authority.get_stored_request(listed.id)

    assert listed.id == requested.request.id == in_snapshot.id
    assert listed.origin.session_id == session
    assert stored is not None and stored.thread_id == THREAD
    assert listed.action.name == GATED and listed.action.arguments == {"to": RECIPIENT}
    assert (listed.extensions or {})[TOOL_CALL_ID_EXTENSION] == SEND_CALL_ID


def test_the_listing_names_the_subagent_invocation(files: Files) -> None:
    pause(files)
    with files.open() as opened:
        [listed] = pending_approvals(opened.authority, opened.agent).snapshot.pending
        stored = opened.authority.get_stored_request(listed.id)

    assert stored is not None
    namespace = str(stored.context["checkpoint_ns"])
    subagent = (listed.extensions or {})[SUBAGENT_EXTENSION]
    assert subagent["name"] == "mailer"
    assert "|" in namespace and subagent["run_id"] == namespace.rpartition("|")[0]
    assert listed.origin.subagent_run_id == subagent["run_id"]  # SPEC section 7


def test_approve_runs_the_gated_tool_once_and_no_sibling_again(files: Files) -> None:
    pause(files)
    with files.open() as opened:
        [resolved] = decide(opened, "approve")
        assert finished(opened)
        results = told(opened)

    assert resolved.resolution.outcome == "approved"
    assert files.effects.counts() == {**PAUSED, GATED: 1}
    assert f"{SEND_CALL_ID}: sent to {RECIPIENT}" in results["call_task_mailer"]


def test_reject_runs_nothing_and_the_subagents_model_is_told(files: Files) -> None:
    pause(files)
    with files.open() as opened:
        [resolved] = decide(opened, "deny")
        assert finished(opened)
        results = told(opened)
        assert pending_approvals(opened.authority, opened.agent).snapshot.pending == []

    assert resolved.resolution.outcome == "denied"
    assert files.effects.counts() == PAUSED
    assert f"{SEND_CALL_ID}: sent" not in results["call_task_mailer"]
    assert "The tool was not executed" in results["call_task_mailer"]


def test_edit_and_approve_runs_the_edited_call_once(files: Files) -> None:
    pause(files)
    with files.open() as opened:
        original = the_request(opened).request
        successor = edit_tool_call(
            opened.agent,
            opened.config,
            original.id,
            {"to": "carol@example.com"},
            actor=ALICE,
            authority=opened.authority,
            action_digest=original.action_digest,
            approve=True,
        )
        assert finished(opened)
        cancelled = opened.authority.get_resolution(original.id)
        approved = opened.authority.get_resolution(successor.request.id)
        results = told(opened)

    assert cancelled is not None and cancelled.resolution.outcome == "cancelled"
    assert approved is not None and approved.approved
    assert (successor.request.extensions or {})[SUBAGENT_EXTENSION] == (original.extensions or {})[
        SUBAGENT_EXTENSION
    ]
    assert files.effects.lines().count("send_email carol@example.com") == 1
    assert files.effects.counts() == {**PAUSED, GATED: 1}
    assert "sent to carol@example.com" in results["call_task_mailer"]


def test_an_answer_repeated_after_the_resume_runs_nothing_again(files: Files) -> None:
    pause(files)
    with files.open() as opened:
        decided = build_decision(the_request(opened), decision="approve", actor=ALICE)
        [first] = resume_with_decisions(
            opened.agent, opened.config, [decided], actor=ALICE, authority=opened.authority
        )
    with files.open() as opened:
        [again] = resume_with_decisions(
            opened.agent, opened.config, [decided], actor=ALICE, authority=opened.authority
        )
        assert finished(opened)

    assert again.resolution.id == first.resolution.id
    assert files.effects.counts() == {**PAUSED, GATED: 1}


def test_an_answer_recorded_by_the_authority_is_resumed_by_the_driver(files: Files) -> None:
    pause(files)
    with files.open() as opened:
        decided = build_decision(the_request(opened), decision="approve", actor=ALICE)
        recorded = opened.authority.decide(decided, actor=ALICE)
        assert files.effects.counts() == PAUSED  # recorded, not yet resumed
    with files.open() as opened:
        [resumed] = ThreadDriver(opened.agent, opened.authority).resume_resolved(THREAD)
        assert finished(opened)

    assert resumed.resolution.id == recorded.resolution.id
    assert files.effects.counts() == {**PAUSED, GATED: 1}


def test_the_command_line_lists_and_approves_the_subagents_request(files: Files) -> None:
    pause(files)
    with files.open() as opened:
        request_id = the_request(opened).request.id
    listing = io.StringIO()
    assert cli_main(["--db", str(files.ledger), "pending"], stdout=listing) == 0
    answered = io.StringIO()
    argv = ["--db", str(files.ledger), "approve", request_id, "--yes"]
    assert cli_main(argv, stdin=io.StringIO(""), stdout=answered) == 0
    with files.open() as opened:
        ThreadDriver(opened.agent, opened.authority).resume_resolved(THREAD)
        assert finished(opened)

    assert request_id in listing.getvalue()
    assert files.effects.counts() == {**PAUSED, GATED: 1}


async def test_an_async_run_pauses_and_resumes_the_subagent(files: Files) -> None:
    with files.open() as opened:
        agent = build_deep_agent(files.effects, InMemorySaver(), authority=opened.authority)
        config = opened.config
        await agent.ainvoke({"messages": [("user", "Email Bob and research X")]}, config)
        assert files.effects.counts() == PAUSED
        [interrupt] = (await agent.aget_state(config)).interrupts
        decided = build_decision(interrupt.value, decision="approve", actor=ALICE)
        [resolved] = await aresume_with_decisions(
            agent, config, [decided], actor=ALICE, authority=opened.authority
        )
        state = await agent.aget_state(config)

    assert resolved.approved and state.next == ()
    assert files.effects.counts() == {**PAUSED, GATED: 1}

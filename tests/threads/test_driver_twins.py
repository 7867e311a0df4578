"""Every operation built on the thread driver, driven both ways (sync and its ``a``-twin) on
the same kind of paused graph: the same resolutions, the same final state, the same pending list.

Each case builds two identical worlds (an in-memory checkpointer and ledger each), runs the
sync operation in one and the async twin in the other, and compares what a user sees, with
the ids and timestamps that are fresh per world left out.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph

from aais_langgraph import ApprovalAuthority, ThreadDriver, build_decision
from aais_langgraph.ledger import InMemoryLedger
from aais_langgraph.protocol import ApprovalRequested, ApprovalResolved
from aais_langgraph.threads import (
    apending_approvals,
    aresume_with_decisions,
    astranded_threads,
    pending_approvals,
    resume_with_decisions,
    stranded_threads,
)
from aais_langgraph.tools import ApprovalToolNode, aedit_tool_call, edit_tool_call
from gate.support import HUMAN, Effects, FakeClock, config, gated_graph, paused

TOOL_CALL_ID = "aais-langgraph.org/tool_call_id"


@dataclass
class World:
    graph: Any
    authority: ApprovalAuthority
    effects: Effects


def world() -> World:
    @dataclass
    class _Backend:
        saver: Any
        authority: ApprovalAuthority

    backend = _Backend(InMemorySaver(), ApprovalAuthority(InMemoryLedger(), clock=FakeClock()))
    effects = Effects()
    graph = gated_graph(backend, effects)  # type: ignore[arg-type]
    return World(graph, backend.authority, effects)


def start(w: World, thread_id: str, command: str = "ls -la") -> ApprovalRequested:
    [pending] = paused(w.graph.invoke({"command": command}, config(thread_id)))
    return ApprovalRequested.from_data(pending.value)


def outcomes(resolved: list[ApprovalResolved]) -> list[tuple[str, Any]]:
    return [(r.resolution.outcome, r.resolution.effective_scope) for r in resolved]


def final(w: World, thread_id: str) -> dict[str, Any]:
    state = w.graph.get_state(config(thread_id))
    values = {k: v for k, v in state.values.items() if k != "request_ids"}
    return {"values": values, "next": state.next, "paused": len(state.interrupts)}


def listing(w: World, snapshot: Any) -> list[str]:
    return sorted(request.action.arguments["command"] for request in snapshot.snapshot.pending)


def both(case: Callable[[World, bool], Any]) -> tuple[Any, Any]:
    """Run ``case`` in a fresh world synchronously and in another one asynchronously."""
    return case(world(), False), case(world(), True)


def run(awaitable: Any) -> Any:
    return asyncio.run(awaitable)


def test_resume_with_decisions_twins_agree() -> None:
    def case(w: World, use_async: bool) -> Any:
        requested = start(w, "t")
        decision = build_decision(requested, decision="approve", scope="once", actor=HUMAN)
        if use_async:
            resolved = run(
                aresume_with_decisions(
                    w.graph, config("t"), [decision], actor=HUMAN, authority=w.authority
                )
            )
        else:
            resolved = resume_with_decisions(
                w.graph, config("t"), [decision], actor=HUMAN, authority=w.authority
            )
        return outcomes(resolved), final(w, "t"), w.effects.ran

    sync, asynchronous = both(case)
    assert sync == asynchronous
    assert sync[0] == [("approved", "once")] and sync[2] == ["ls -la"]


def test_resume_resolved_twins_agree() -> None:
    def case(w: World, use_async: bool) -> Any:
        requested = start(w, "t")
        w.authority.decide(
            build_decision(requested, decision="deny", scope="once", actor=HUMAN), actor=HUMAN
        )
        if use_async:
            resolved = run(ThreadDriver(w.graph, w.authority).aresume_resolved("t"))
        else:
            resolved = ThreadDriver(w.graph, w.authority).resume_resolved("t")
        return outcomes(resolved), final(w, "t"), w.effects.ran

    sync, asynchronous = both(case)
    assert sync == asynchronous
    assert sync[0] == [("denied", "once")] and sync[2] == []


def test_the_decisions_endpoint_resume_is_resume_resolved_for_a_server() -> None:
    resume = pytest.importorskip("aais_agui.background")
    service = pytest.importorskip("aais_agui.service")

    def case(w: World, use_async: bool) -> Any:
        requested = start(w, "t")
        w.authority.decide(
            build_decision(requested, decision="approve", scope="once", actor=HUMAN), actor=HUMAN
        )
        if use_async:
            driver = service.ApprovalService(w.graph, w.authority).driver
            ids = run(resume.aresume_recorded(driver, "t"))
        else:
            resolved = ThreadDriver(w.graph, w.authority, served=True).resume_resolved("t")
            ids = [r.resolution.request_id for r in resolved]
        return ids == [requested.request.id], final(w, "t"), w.effects.ran

    sync, asynchronous = both(case)
    assert sync == asynchronous == (True, sync[1], ["ls -la"])


def test_pending_approvals_twins_agree_and_share_the_waiting_rule() -> None:
    """Three threads: one waiting, one whose state was edited (its task is gone), one
    answered. The sync and async listings, and the SSE snapshot, list the same one."""
    sse = pytest.importorskip("aais_agui.http.sse")

    def case(w: World, use_async: bool) -> Any:
        start(w, "waiting", "ls -la")
        start(w, "edited", "ls /tmp")
        w.graph.update_state(config("edited"), {"command": "rm -rf /"})
        answered = start(w, "answered", "ls /srv")
        resume_with_decisions(
            w.graph,
            config("answered"),
            [build_decision(answered, decision="approve", scope="once", actor=HUMAN)],
            actor=HUMAN,
            authority=w.authority,
        )
        if use_async:
            snapshot = run(apending_approvals(w.authority, w.graph))
        else:
            snapshot = pending_approvals(w.authority, w.graph)
        streamed = run(sse.presenter_snapshot(w.authority, w.graph))
        return listing(w, snapshot), listing(w, streamed)

    sync, asynchronous = both(case)
    assert sync == asynchronous == (["ls -la"], ["ls -la"])


def test_recovery_twins_agree() -> None:
    def case(w: World, use_async: bool) -> Any:
        requested = start(w, "stuck")
        start(w, "still-waiting", "ls /tmp")
        # Recorded, but the run that would have resumed it died.
        w.authority.decide(
            build_decision(requested, decision="approve", scope="once", actor=HUMAN), actor=HUMAN
        )
        if use_async:
            found = run(astranded_threads(w.graph, w.authority))
            resolved = run(ThreadDriver(w.graph, w.authority).aresume_stranded())
            after = run(astranded_threads(w.graph, w.authority))
        else:
            found = stranded_threads(w.graph, w.authority)
            resolved = ThreadDriver(w.graph, w.authority).resume_stranded()
            after = stranded_threads(w.graph, w.authority)
        found_ids = {thread: ids == [requested.request.id] for thread, ids in found.items()}
        return found_ids, outcomes(resolved), after, final(w, "stuck"), w.effects.ran

    sync, asynchronous = both(case)
    assert sync == asynchronous
    assert sync[0] == {"stuck": True} and sync[2] == {} and sync[4] == ["ls -la"]


# -- edits: a tool-call graph whose gate and edit both find the authority in the context --


@dataclass
class Context:
    authority: ApprovalAuthority


def tool_world() -> tuple[Any, ApprovalAuthority, list[dict[str, Any]]]:
    runs: list[dict[str, Any]] = []

    @tool
    def send_email(to: str) -> str:
        """Send an email."""
        runs.append({"to": to})
        return f"sent to {to}"

    def agent(state: MessagesState) -> dict[str, list[BaseMessage]]:
        if any(isinstance(m, ToolMessage) for m in state["messages"]):
            return {"messages": [AIMessage(content="done", id="ai-1")]}
        call = {"name": "send_email", "args": {"to": "wrong@x.test"}, "id": "c1"}
        return {"messages": [AIMessage(content="", tool_calls=[call], id="ai-0")]}

    def route(state: MessagesState) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else "__end__"

    builder = StateGraph(MessagesState, context_schema=Context)
    builder.add_node("agent", agent)
    builder.add_node("tools", ApprovalToolNode([send_email], interrupt_on={"send_email": True}))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", "__end__"])
    builder.add_edge("tools", "agent")
    graph = builder.compile(checkpointer=InMemorySaver())
    authority = ApprovalAuthority(InMemoryLedger(), clock=FakeClock())
    return graph, authority, runs


def test_edit_tool_call_twins_agree_and_find_the_authority_in_the_context() -> None:
    """No ``authority=`` anywhere: the gate, the edit and the resume all read the runtime
    context, as on LangGraph Server (the edit used to look only in ``configurable``)."""

    def case(use_async: bool) -> Any:
        graph, authority, runs = tool_world()
        context = Context(authority)
        graph.invoke({"messages": [("user", "go")]}, config("t"), context=context)
        [pending] = graph.get_state(config("t")).interrupts
        original = ApprovalRequested.from_data(pending.value).request
        edit: dict[str, Any] = {
            "actor": HUMAN,
            "action_digest": original.action_digest,
            "context": context,
            "approve": False,
        }
        if use_async:
            successor = run(
                aedit_tool_call(graph, config("t"), original.id, {"to": "right@x.test"}, **edit)
            )
        else:
            successor = edit_tool_call(
                graph, config("t"), original.id, {"to": "right@x.test"}, **edit
            )
        cancelled = authority.get_resolution(original.id)
        [waiting] = graph.get_state(config("t")).interrupts
        decision = build_decision(successor, decision="approve", scope="once", actor=HUMAN)
        resolved = resume_with_decisions(
            graph, config("t"), [decision], actor=HUMAN, context=context
        )
        return (
            successor.request.action.arguments,
            cancelled is not None and cancelled.resolution.outcome,
            waiting.value["request"]["id"] == successor.request.id,
            outcomes(resolved),
            runs,
        )

    sync, asynchronous = case(False), case(True)
    assert sync == asynchronous
    assert sync == (
        {"to": "right@x.test"},
        "cancelled",
        True,
        [("approved", "once")],
        [{"to": "right@x.test"}],
    )

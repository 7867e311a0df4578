"""Async graphs: ``arequest_approval`` (AsyncSqliteSaver), resumed by ``aresume_with_decisions``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.errors import is_invalid_resume
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command
from pydantic import ValidationError

from aais_langgraph import (
    ApprovalAuthority,
    RejectedResumeError,
    SqliteLedger,
    arequest_approval,
    aresume_with_decisions,
)

from .support import (
    HUMAN,
    Effects,
    FakeClock,
    State,
    config,
    decide,
    paused,
    requested_of,
    shell_action,
    tampered,
)


@pytest.fixture
async def setup(tmp_path: Path) -> AsyncIterator[tuple[Any, ApprovalAuthority, Effects]]:
    effects = Effects()
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "async.db")) as saver:
        with SqliteLedger.from_path(tmp_path / "async.db") as ledger:
            ledger.setup()
            authority = ApprovalAuthority(ledger, clock=FakeClock())

            async def act(state: State) -> dict[str, Any]:
                resolved = await arequest_approval(
                    shell_action(state["command"]), authority=authority
                )
                if resolved.approved:
                    effects.run(state["command"])
                return {"outcome": resolved.resolution.outcome}

            builder = StateGraph(State)
            builder.add_node("act", act)
            builder.add_edge(START, "act")
            builder.add_edge("act", END)
            yield builder.compile(checkpointer=saver), authority, effects


async def start(graph: Any, thread: str, command: str = "ls -la") -> tuple[Any, Any]:
    [pending] = paused(await graph.ainvoke({"command": command}, config(thread)))
    return pending, requested_of(pending)


async def pending_ids(graph: Any, thread: str) -> list[str]:
    return [i.id for i in (await graph.aget_state(config(thread))).interrupts]


async def test_approve_runs_once_and_a_replay_does_not_run_again(setup: Any) -> None:
    graph, authority, effects = setup
    _, requested = await start(graph, "t-1")
    assert effects.ran == []

    [resolved] = await aresume_with_decisions(
        graph, config("t-1"), decide(requested), actor=HUMAN, authority=authority
    )
    [replayed] = await aresume_with_decisions(
        graph, config("t-1"), decide(requested, "deny"), actor=HUMAN, authority=authority
    )

    assert resolved.approved
    assert replayed.resolution.outcome == "conflict"
    assert effects.ran == ["ls -la"]
    assert (await graph.aget_state(config("t-1"))).values["outcome"] == "approved"


async def test_deny_and_tampered_answers(setup: Any) -> None:
    graph, authority, effects = setup
    pending, requested = await start(graph, "t-2")

    [stale] = await aresume_with_decisions(
        graph, config("t-2"), tampered(decide(requested)), actor=HUMAN, authority=authority
    )
    assert stale.resolution.outcome == "stale"
    with pytest.raises(ValidationError) as caught:
        await graph.ainvoke(
            Command(resume={pending.id: tampered(decide(requested))}), config("t-2")
        )
    assert is_invalid_resume(caught.value)
    assert await pending_ids(graph, "t-2") == [pending.id]

    result = await graph.ainvoke(
        Command(resume={pending.id: decide(requested, "deny").to_json()}), config("t-2")
    )
    assert result["outcome"] == "denied"
    assert effects.ran == []


async def test_a_conflicting_raw_answer_is_refused_and_keeps_the_interrupt(setup: Any) -> None:
    graph, authority, effects = setup
    pending, requested = await start(graph, "t-3")
    denied = decide(requested, "deny")  # recorded out of band, the run not resumed yet
    assert (await authority.adecide(denied)).resolution.outcome == "denied"

    with pytest.raises(RejectedResumeError):
        await graph.ainvoke(
            Command(resume={pending.id: decide(requested).to_json()}), config("t-3")
        )

    assert effects.ran == []
    assert await pending_ids(graph, "t-3") == [pending.id]
    [again] = await aresume_with_decisions(
        graph, config("t-3"), denied, actor=HUMAN, authority=authority
    )
    assert again.resolution.outcome == "denied"
    assert (await graph.aget_state(config("t-3"))).values["outcome"] == "denied"
    assert effects.ran == []


async def test_expired_in_an_async_graph(setup: Any) -> None:
    graph, authority, effects = setup
    _, requested = await start(graph, "t-4")
    authority.clock.advance(3600)  # type: ignore[attr-defined]

    [resolved] = await aresume_with_decisions(
        graph, config("t-4"), decide(requested), actor=HUMAN, authority=authority
    )

    assert resolved.resolution.outcome == "expired"
    assert (await graph.aget_state(config("t-4"))).values["outcome"] == "expired"
    assert effects.ran == []


async def test_a_view_read_from_the_checkpoint_finds_live_tasks_from_a_worker_thread(
    setup: Any,
) -> None:
    import asyncio

    from aais_langgraph.threads.views import ThreadView, aread_view

    graph, _, _ = setup
    pending, requested = await start(graph, "t-view")
    view = await aread_view(graph, config("t-view"))
    assert view.interrupts == {requested.request.id: pending.id}
    # Built only when a plan asks, with the async saver's sync read (plans run in threads).
    live = await asyncio.to_thread(lambda: view.live_tasks)
    assert live == ThreadView.of(await graph.aget_state(config("t-view"))).live_tasks
    assert live  # the paused node's task


async def test_the_async_listing_of_an_edited_thread_reads_no_checkpoint_on_the_loop(
    setup: Any,
) -> None:
    """An edit of a paused thread's state leaves its request pending in the ledger and
    gone from the checkpoint's interrupts: the listing must then look at the thread's
    live tasks, which the sync ``get_state`` of an AsyncSqliteSaver refuses on the loop."""
    from aais_langgraph.threads import apending_approvals

    graph, authority, _ = setup
    _, first = await start(graph, "t-1")
    await graph.aupdate_state(config("t-1"), {"command": "ls -l"})
    [second] = paused(await graph.ainvoke(None, config("t-1")))  # pauses on a new request
    assert requested_of(second).request.id != first.request.id

    snapshot = await apending_approvals(authority, graph)

    assert [r.id for r in snapshot.snapshot.pending] == [requested_of(second).request.id]

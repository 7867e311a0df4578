"""``pending_approvals`` reconciles checkpoints against the ledger: a run paused on a request
the ledger does not hold (or holds differently) is an integrity error, never silently dropped."""

from __future__ import annotations

import asyncio
import sqlite3
from typing import Any

import aais

from aais_langgraph import ApprovalAuthority, InMemoryLedger, pending_approvals
from aais_langgraph.gate import (
    INTEGRITY_ERRORS_EXTENSION,
    areconcile_checkpoints,
    reconcile_checkpoints,
)

from .support import Backend, Effects, config, gated_graph, paused, requested_of
from .test_inbox import start


def errors_of(snapshot: Any) -> list[dict[str, Any]]:
    return list((snapshot.extensions or {}).get(INTEGRITY_ERRORS_EXTENSION, []))


def test_an_honest_inbox_has_no_integrity_errors(backend: Backend, effects: Effects) -> None:
    graph = gated_graph(backend, effects)
    waiting = start(graph, "t-1")
    snapshot = pending_approvals(backend.authority, graph)
    assert snapshot.snapshot.pending == [waiting]
    assert snapshot.extensions is None


def test_a_paused_run_whose_ledger_was_replaced_by_an_empty_one_is_reported(
    backend: Backend, effects: Effects
) -> None:
    graph = gated_graph(backend, effects)
    waiting = start(graph, "t-1")
    emptied = ApprovalAuthority(InMemoryLedger(), clock=backend.clock)

    snapshot = pending_approvals(emptied, graph)

    assert snapshot.snapshot.pending == []
    [error] = errors_of(snapshot)
    assert error["thread_id"] == "t-1" and error["request_id"] == waiting.id
    assert "does not hold" in error["reason"]
    aais.validate(snapshot.to_json())  # the extension keeps the snapshot spec-shaped
    assert [p.request_id for p in reconcile_checkpoints(emptied, backend.saver)] == [waiting.id]


def test_a_deleted_request_row_is_reported_not_dropped(
    sqlite_backend: Backend, effects: Effects
) -> None:
    graph = gated_graph(sqlite_backend, effects)
    kept = start(graph, "t-kept")
    gone = start(graph, "t-gone")
    assert sqlite_backend.path is not None
    with sqlite3.connect(sqlite_backend.path) as raw:
        raw.execute("DELETE FROM aais_requests WHERE request_id = ?", (gone.id,))

    snapshot = pending_approvals(sqlite_backend.authority, graph)

    assert snapshot.snapshot.pending == [kept]
    assert [(e["thread_id"], e["request_id"]) for e in errors_of(snapshot)] == [("t-gone", gone.id)]


def test_a_request_edited_in_the_ledger_differs_from_the_checkpoints_copy(
    sqlite_backend: Backend, effects: Effects
) -> None:
    graph = gated_graph(sqlite_backend, effects)
    edited = start(graph, "t-1")
    assert sqlite_backend.path is not None
    with sqlite3.connect(sqlite_backend.path) as raw:
        raw.execute("UPDATE aais_requests SET envelope = replace(envelope, 'ls t-1', 'ls t-2')")

    snapshot = pending_approvals(sqlite_backend.authority, graph)

    assert snapshot.snapshot.pending == []
    [error] = errors_of(snapshot)
    assert error["request_id"] == edited.id and "differs" in error["reason"]


def test_reconciliation_can_be_skipped_for_the_ledger_only_listing(
    backend: Backend, effects: Effects
) -> None:
    graph = gated_graph(backend, effects)
    start(graph, "t-1")
    emptied = ApprovalAuthority(InMemoryLedger(), clock=backend.clock)
    snapshot = pending_approvals(emptied, graph, reconcile=False)
    assert snapshot.extensions is None


def test_a_finished_run_is_not_reported(backend: Backend, effects: Effects) -> None:
    graph = gated_graph(backend, effects)
    [pending] = paused(graph.invoke({"command": "ls"}, config("t-1")))
    from aais_langgraph import build_decision, resume_with_decisions

    decided = build_decision(
        requested_of(pending), decision="deny", actor={"id": "a", "type": "human"}
    )
    resume_with_decisions(graph, config("t-1"), decided, actor=None, authority=backend.authority)
    emptied = ApprovalAuthority(InMemoryLedger(), clock=backend.clock)
    assert errors_of(pending_approvals(emptied, graph)) == []


def test_the_async_twin_reads_an_async_checkpointer(
    memory_backend: Backend, effects: Effects
) -> None:
    graph = gated_graph(memory_backend, effects)
    waiting = start(graph, "t-1")
    emptied = ApprovalAuthority(InMemoryLedger(), clock=memory_backend.clock)
    problems = asyncio.run(areconcile_checkpoints(emptied, memory_backend.saver))
    assert [(p.thread_id, p.request_id) for p in problems] == [("t-1", waiting.id)]
    assert asyncio.run(areconcile_checkpoints(memory_backend.authority, memory_backend.saver)) == []

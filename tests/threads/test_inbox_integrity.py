"""``pending_approvals`` reconciles checkpoints against the ledger: a run paused on a request
the ledger does not hold (or holds differently) is an integrity error, never silently dropped."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from dataclasses import replace
from typing import Any

import aais
import pytest
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from aais_langgraph import ApprovalAuthority, InMemoryLedger, pending_approvals
from aais_langgraph.protocol import action_digest
from aais_langgraph.threads import (
    INTEGRITY_ERRORS_EXTENSION,
    apending_approvals,
    areconcile_checkpoints,
    reconcile_checkpoints,
)
from gate.support import (
    Backend,
    Effects,
    config,
    gated_graph,
    open_backend,
    paused,
    requested_of,
    shell_action,
)

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


def test_a_row_stored_in_another_json_form_agrees_with_the_checkpoints_copy(
    sqlite_backend: Backend, effects: Effects
) -> None:
    """A row whose text is not the canonical form (another writer's spacing and member
    order) holds the same request: it is listed, not reported as differing."""
    graph = gated_graph(sqlite_backend, effects)
    waiting = start(graph, "t-1")
    assert sqlite_backend.path is not None
    with sqlite3.connect(sqlite_backend.path) as raw:
        [(text,)] = raw.execute("SELECT envelope FROM aais_requests").fetchall()
        value = json.loads(text)
        spaced = json.dumps(dict(reversed(list(value.items()))), indent=1)
        raw.execute("UPDATE aais_requests SET envelope = ?", (spaced,))

    snapshot = pending_approvals(sqlite_backend.authority, graph)

    assert errors_of(snapshot) == []
    assert snapshot.snapshot.pending == [waiting]


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


def _forge(path: Any, request_id: str, command: str) -> None:
    """Rewrite a stored request's command behind the ledger's back, keeping the envelope
    valid (its action digest recomputed): only the audit can tell."""
    with sqlite3.connect(path) as raw:
        [text] = raw.execute(
            "SELECT envelope FROM aais_requests WHERE request_id = ?", (request_id,)
        ).fetchone()
        envelope = json.loads(text)
        action = envelope["request"]["action"]
        action["arguments"]["command"] = command
        envelope["request"]["action_digest"] = action_digest(action)
        raw.execute(
            "UPDATE aais_requests SET envelope = ? WHERE request_id = ?",
            (json.dumps(envelope), request_id),
        )


def test_a_forged_request_row_is_reported_never_listed(
    sqlite_backend: Backend, effects: Effects
) -> None:
    kept = sqlite_backend.authority.request(
        shell_action("ls"), origin={"harness": "test", "session_id": "s-1"}
    ).request
    forged = sqlite_backend.authority.request(
        shell_action("ls -l"), origin={"harness": "test", "session_id": "s-1"}
    ).request
    assert sqlite_backend.path is not None
    _forge(sqlite_backend.path, forged.id, "rm -rf /")
    # Another process (a restarted server) reads the ledger: nothing vouched for in memory.
    restarted = ApprovalAuthority(sqlite_backend.authority.ledger, clock=sqlite_backend.clock)

    snapshot = pending_approvals(restarted)

    assert snapshot.snapshot.pending == [kept]
    [error] = errors_of(snapshot)
    assert error["request_id"] == forged.id and "does not vouch" in error["reason"]
    assert "rm -rf" not in json.dumps(snapshot.to_json())
    aais.validate(snapshot.to_json())


def test_a_row_edited_after_a_listing_is_reported_by_the_next_one(
    sqlite_backend: Backend, effects: Effects
) -> None:
    graph = gated_graph(sqlite_backend, effects)
    edited = start(graph, "t-1")
    assert pending_approvals(sqlite_backend.authority, graph).snapshot.pending == [edited]
    assert sqlite_backend.path is not None
    _forge(sqlite_backend.path, edited.id, "rm -rf /")

    snapshot = pending_approvals(sqlite_backend.authority, graph)

    assert snapshot.snapshot.pending == []
    [error] = errors_of(snapshot)
    assert error["request_id"] == edited.id and error["thread_id"] == "t-1"


def test_a_row_edited_through_the_ledgers_own_connection_is_reported_by_the_next_listing(
    sqlite_backend: Backend, effects: Effects
) -> None:
    graph = gated_graph(sqlite_backend, effects)
    edited = start(graph, "t-1")
    assert pending_approvals(sqlite_backend.authority, graph).snapshot.pending == [edited]
    conn = sqlite_backend.authority.ledger._conn  # type: ignore[attr-defined]
    conn.execute(
        "UPDATE aais_requests SET envelope = replace(envelope, 'ls t-1', 'ls t-2') "
        "WHERE request_id = ?",
        (edited.id,),
    )

    snapshot = pending_approvals(sqlite_backend.authority, graph)

    assert snapshot.snapshot.pending == []
    [error] = errors_of(snapshot)
    assert error["request_id"] == edited.id and error["thread_id"] == "t-1"


def test_a_row_stored_in_the_earlier_text_form_is_listed_vouched_the_old_way(
    sqlite_backend: Backend, effects: Effects
) -> None:
    graph = gated_graph(sqlite_backend, effects)
    kept = start(graph, "t-1")
    assert sqlite_backend.path is not None
    with sqlite3.connect(sqlite_backend.path) as raw:
        [text] = raw.execute(
            "SELECT envelope FROM aais_requests WHERE request_id = ?", (kept.id,)
        ).fetchone()
        assert text == json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))
        envelope = json.loads(text)  # the same content, its keys in another order
        earlier = json.dumps(dict(reversed(list(envelope.items()))), separators=(",", ":"))
        raw.execute(
            "UPDATE aais_requests SET envelope = ? WHERE request_id = ?", (earlier, kept.id)
        )

    snapshot = pending_approvals(sqlite_backend.authority, graph)

    assert snapshot.snapshot.pending == [kept] and errors_of(snapshot) == []
    assert sqlite_backend.authority.verify_audit().ok


def test_a_run_that_moved_on_after_a_listing_is_not_shown_by_the_next_one(
    backend: Backend, effects: Effects
) -> None:
    graph = gated_graph(backend, effects)
    waiting = start(graph, "t-wait")
    edited = start(graph, "t-edited")
    listed = pending_approvals(backend.authority, graph).snapshot.pending
    assert sorted(r.id for r in listed) == sorted([waiting.id, edited.id])
    graph.update_state(config("t-edited"), {"command": "rm -rf /"})

    assert pending_approvals(backend.authority, graph).snapshot.pending == [waiting]


@pytest.mark.parametrize("twin", ["sync", "async"])
def test_threads_another_process_deletes_or_pauses_after_a_listing_show_in_the_next_one(
    sqlite_backend: Backend, effects: Effects, twin: str
) -> None:
    graph = gated_graph(sqlite_backend, effects)
    gone, kept = start(graph, "t-gone"), start(graph, "t-kept")
    assert sqlite_backend.path is not None
    directory = sqlite_backend.path.parent

    def elsewhere() -> str:  # another process's checkpointer and ledger on the same file
        with open_backend("sqlite", directory, sqlite_backend.clock) as other:
            other.saver.delete_thread("t-gone")
            return str(start(gated_graph(other, effects), "t-added").id)

    if twin == "sync":
        before = pending_approvals(sqlite_backend.authority, graph)
        added = elsewhere()
        after = pending_approvals(sqlite_backend.authority, graph)
    else:

        async def listings() -> tuple[Any, str, Any]:
            async with AsyncSqliteSaver.from_conn_string(str(sqlite_backend.path)) as saver:
                served = replace(sqlite_backend, saver=saver)
                listed = gated_graph(served, effects)
                first = await apending_approvals(served.authority, listed)
                made = elsewhere()
                return first, made, await apending_approvals(served.authority, listed)

        before, added, after = asyncio.run(listings())

    assert sorted(r.id for r in before.snapshot.pending) == sorted([gone.id, kept.id])
    assert sorted(r.id for r in after.snapshot.pending) == sorted([kept.id, added])
    assert errors_of(before) == errors_of(after) == []


def test_the_async_twin_lists_and_reports_as_the_sync_one(
    backend: Backend, effects: Effects
) -> None:
    graph = gated_graph(backend, effects)
    start(graph, "t-kept")
    gone = start(graph, "t-gone")
    emptied_of_one = ApprovalAuthority(backend.authority.ledger, clock=backend.clock)
    if backend.path is not None:
        with sqlite3.connect(backend.path) as raw:
            raw.execute("DELETE FROM aais_requests WHERE request_id = ?", (gone.id,))

    listed = pending_approvals(emptied_of_one, graph)
    twin = asyncio.run(apending_approvals(emptied_of_one, graph))

    assert twin.snapshot.pending == listed.snapshot.pending
    assert errors_of(twin) == errors_of(listed)
    assert len(errors_of(twin)) == (1 if backend.path is not None else 0)


def test_a_row_that_cannot_be_read_is_reported_and_hides_no_other(
    sqlite_backend: Backend, effects: Effects
) -> None:
    graph = gated_graph(sqlite_backend, effects)
    kept = start(graph, "t-kept")
    broken = start(graph, "t-broken")
    assert sqlite_backend.path is not None
    with sqlite3.connect(sqlite_backend.path) as raw:
        raw.execute(
            "UPDATE aais_requests SET envelope = '{not json' WHERE request_id = ?", (broken.id,)
        )

    snapshot = pending_approvals(sqlite_backend.authority, graph)

    assert snapshot.snapshot.pending == [kept]
    [error] = errors_of(snapshot)
    assert (error["thread_id"], error["request_id"]) == ("t-broken", broken.id)
    assert "cannot be read" in error["reason"]

"""``pending_approvals``: only what is pending in the ledger *and* still paused in the graph."""

from __future__ import annotations

from typing import Any

from aais_langgraph import pending_approvals
from gate.support import Backend, Effects, config, gated_graph, paused, requested_of


def start(graph: Any, thread: str) -> Any:
    [pending] = paused(graph.invoke({"command": f"ls {thread}"}, config(thread)))
    return requested_of(pending).request


def shown(backend: Backend, graph: Any = None, **options: Any) -> list[str]:
    snapshot = pending_approvals(backend.authority, graph, **options)
    return sorted(request.id for request in snapshot.snapshot.pending)


def test_requests_whose_interrupt_is_gone_are_not_shown(backend: Backend, effects: Effects) -> None:
    graph = gated_graph(backend, effects)
    waiting = start(graph, "t-wait")
    edited = start(graph, "t-edited")
    skipped = start(graph, "t-skipped")
    # The run moved on without an answer: its state was edited ...
    graph.update_state(config("t-edited"), {"command": "rm -rf /"})
    # ... or the gated node was marked done, finishing the run.
    graph.update_state(config("t-skipped"), {"outcome": "skipped"}, as_node="act")
    assert graph.get_state(config("t-skipped")).next == ()

    assert shown(backend, graph) == [waiting.id]
    # The ledger alone still lists all three as pending.
    assert shown(backend) == sorted([waiting.id, edited.id, skipped.id])


def test_the_snapshot_is_a_spec_envelope_as_of_the_ledger_sequence(
    backend: Backend, effects: Effects
) -> None:
    graph = gated_graph(backend, effects)
    request = start(graph, "t-1")

    snapshot = pending_approvals(backend.authority, graph)

    assert snapshot.type == "approval.snapshot"
    assert snapshot.snapshot.as_of_sequence == backend.authority.ledger.last_sequence()
    assert snapshot.snapshot.pending == [request]


def test_expired_requests_and_other_sessions_are_not_shown(
    backend: Backend, effects: Effects
) -> None:
    graph = gated_graph(backend, effects)
    early = start(graph, "t-early")
    backend.clock.advance(10 * 60)
    late = start(graph, "t-late")

    assert shown(backend, graph) == sorted([early.id, late.id])
    assert shown(backend, graph, session_id="t-late") == [late.id]
    backend.clock.advance(6 * 60)
    assert shown(backend, graph) == [late.id]


def test_two_first_listings_at_once_vouch_for_each_new_row_once(
    tmp_path: Any, monkeypatch: Any
) -> None:
    import threading
    import time

    from aais_langgraph import ApprovalAuthority, SqliteLedger

    path = tmp_path / "ledger.db"
    origin = {"harness": "t", "session_id": "s-1"}
    with SqliteLedger.from_path(path) as ledger:
        writer = ApprovalAuthority(ledger)
        for n in range(12):
            action = {"kind": "process.exec", "name": "shell.exec", "summary": "ls"}
            action["arguments"] = {"n": n}
            writer.request(action, origin=origin)
    with SqliteLedger.from_path(path) as ledger:  # a new process: nothing is remembered
        authority = ApprovalAuthority(ledger)
        vouched: list[int] = []
        second_read = threading.Event()
        reads = 0
        list_rows, vouch = ledger.list_pending_rows, authority.vouched_requests

        def counted_rows(**options: Any) -> Any:
            nonlocal reads
            found = list_rows(**options)
            reads += 1
            if reads == 2:
                second_read.set()
            return found

        def slow_vouch(rows: Any) -> Any:
            vouched.append(len(rows))
            if len(vouched) == 1:  # the first listing works while the second has read
                assert second_read.wait(10)
                time.sleep(0.2)
            return vouch(rows)

        monkeypatch.setattr(ledger, "list_pending_rows", counted_rows)
        monkeypatch.setattr(authority, "vouched_requests", slow_vouch)
        listed: list[int] = []

        def listing() -> None:
            listed.append(len(pending_approvals(authority).snapshot.pending))

        threads = [threading.Thread(target=listing) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
    assert listed == [12, 12]
    assert vouched == [12]  # the second listing took what the first worked out

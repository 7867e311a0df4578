"""Resolve-once and gap-free sequences under real contention: threads and OS processes."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aais_langgraph.ledger import Ledger, SqliteLedger, verify_audit

from .envelopes import approval, request_envelope

WORKER = Path(__file__).with_name("_worker.py")


def _run_together(count: int, action: Callable[[int], Any]) -> list[Any]:
    """Run ``action(n)`` on ``count`` threads released at the same moment."""
    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count
    errors: list[BaseException] = []

    def run(n: int) -> None:
        barrier.wait()
        try:
            results[n] = action(n)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    return results


def test_racing_threads_record_one_resolution(ledger: Ledger) -> None:
    requested = request_envelope("apr_1")
    ledger.add_request(requested)

    results = _run_together(
        8,
        lambda n: ledger.record_resolution(
            approval(requested, resolution_id=f"res_{n}", decision_id=f"dec_{n}")
        ),
    )

    assert sum(created for _, created in results) == 1
    assert len({stored.envelope["resolution"]["id"] for stored, _ in results}) == 1
    assert ledger.last_sequence() == 3


def test_racing_threads_get_unique_gap_free_sequences(ledger: Ledger) -> None:
    def add_many(n: int) -> list[int]:
        return [
            ledger.add_request(request_envelope(f"apr_{n}_{i}"))[0].envelope["sequence"]
            for i in range(20)
        ]

    results = _run_together(4, add_many)

    assert sorted(s for batch in results for s in batch) == list(range(1, 81))
    assert verify_audit(ledger.audit_entries(), ledger.audit_tip()).checked == 80


def _run_processes(path: Path, argv_per_worker: list[list[str]]) -> list[Any]:
    """Start one OS process per argv, release them together, and collect their results."""
    processes = [
        subprocess.Popen(
            [sys.executable, str(WORKER), str(path), *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for argv in argv_per_worker
    ]
    try:
        for process in processes:
            assert process.stdout is not None
            assert process.stdout.readline().strip() == "ready"
        for process in processes:
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.flush()
        outputs = [process.communicate(timeout=60)[0] for process in processes]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
    assert [process.returncode for process in processes] == [0] * len(processes)
    return [json.loads(output) for output in outputs]


MANY = [f"apr_many_{n}" for n in range(40)]


@pytest.fixture(scope="module")
def resolve_race(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Any]]:
    """Four OS processes race: 50 different resolutions each on ``apr_one``, then one
    resolution each on every request of :data:`MANY`."""
    path = tmp_path_factory.mktemp("race") / "ledger.db"
    with SqliteLedger.from_path(path) as ledger:
        ledger.setup()
        for request_id in ["apr_one", *MANY]:
            ledger.add_request(request_envelope(request_id))
    specs = ["apr_one:50", *(f"{request_id}:1" for request_id in MANY)]
    return path, _run_processes(path, [["resolve", f"w{n}", *specs] for n in range(4)])


def test_processes_racing_on_one_request_record_one_resolution(
    resolve_race: tuple[Path, list[Any]],
) -> None:
    path, results = resolve_race

    with SqliteLedger.from_path(path) as ledger:
        stored = ledger.get_resolution("apr_one")
        assert stored is not None
        winner = stored.envelope["resolution"]["id"]
        for result in results:
            assert result["seen"]["apr_one"] == [winner] * 50
        resolved = [
            e
            for e in ledger.events_after(0, limit=500)
            if e["type"] == "approval.resolved" and e["resolution"]["request_id"] == "apr_one"
        ]
        assert [e["resolution"]["id"] for e in resolved] == [winner]


def test_processes_racing_on_many_requests_record_one_resolution_each(
    resolve_race: tuple[Path, list[Any]],
) -> None:
    path, results = resolve_race

    assert sum(result["created"] for result in results) == 1 + len(MANY)
    with SqliteLedger.from_path(path) as ledger:
        for request_id in MANY:
            stored = ledger.get_resolution(request_id)
            assert stored is not None
            winner = stored.envelope["resolution"]["id"]
            assert all(result["seen"][request_id] == [winner] for result in results)
        assert ledger.last_sequence() == 2 * (1 + len(MANY))
        assert ledger.list_pending() == []
        assert verify_audit(ledger.audit_entries(), ledger.audit_tip()).ok


def test_processes_adding_requests_get_unique_gap_free_sequences(tmp_path: Path) -> None:
    path = tmp_path / "fresh.db"  # each process also runs setup() on the fresh file

    results = _run_processes(path, [["add", f"w{n}", "50"] for n in range(4)])

    added = {request_id: s for result in results for request_id, s in result["sequences"].items()}
    assert sorted(added.values()) == list(range(1, 201))
    with SqliteLedger.from_path(path) as ledger:
        for request_id, sequence in added.items():
            stored = ledger.get_request(request_id)
            assert stored is not None
            assert stored.envelope["sequence"] == sequence
        assert [e["sequence"] for e in ledger.events_after(0, limit=500)] == list(range(1, 201))
        verification = verify_audit(ledger.audit_entries(), ledger.audit_tip())
        assert (verification.ok, verification.checked) == (True, 200)

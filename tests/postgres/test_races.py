"""Resolve-once, gap-free ordered sequences and lease expiry across real OS processes."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from aais_langgraph.ledger import Lease, verify_audit
from aais_langgraph.ledger.postgres import PostgresLedger
from hostile.report import record

from ._worker import request_envelope

WORKER = Path(__file__).with_name("_worker.py")
Worker = subprocess.Popen[str]


def _start_worker() -> Worker:
    return subprocess.Popen(
        [sys.executable, str(WORKER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )


def _send(worker: Worker, line: str) -> None:
    assert worker.stdin is not None
    worker.stdin.write(line + "\n")
    worker.stdin.flush()


def _receive(worker: Worker) -> str:
    assert worker.stdout is not None
    line = worker.stdout.readline()
    assert line, f"worker exited with {worker.wait(timeout=10)}"
    return line.strip()


def _command(url: str, mode: str, worker: str, *args: str) -> str:
    return json.dumps({"url": url, "mode": mode, "worker": worker, "args": list(args)})


@pytest.fixture(scope="module")
def workers() -> Iterator[list[Worker]]:
    """Four worker processes, started once (each import costs most of a second)."""
    processes = [_start_worker() for _ in range(4)]
    try:
        yield processes
    finally:
        for process in processes:
            process.kill()
            process.wait(timeout=30)


def _run_together(url: str, workers: list[Worker], argvs: list[list[str]]) -> list[Any]:
    """Give each worker a command, release them at once, and collect their results."""
    for worker, (mode, *args) in zip(workers, argvs, strict=True):
        _send(worker, _command(url, mode, *args))
    for worker in workers:
        assert _receive(worker) == "ready"
    for worker in workers:
        _send(worker, "go")
    return [json.loads(_receive(worker)) for worker in workers]


@contextmanager
def _holding(url: str, mode: str, *args: str) -> Iterator[tuple[Worker, Any]]:
    """A fresh worker that took something (a lease, a lock) and holds it until SIGKILL."""
    process = _start_worker()
    try:
        _send(process, _command(url, mode, *args))
        yield process, json.loads(_receive(process))
    finally:
        process.kill()
        process.wait(timeout=30)


def test_processes_racing_on_one_request_record_one_resolution(
    postgres_url: str, workers: list[Worker]
) -> None:
    with PostgresLedger.from_conn_string(postgres_url) as ledger:
        ledger.setup()
        ledger.add_request(request_envelope("apr_1", "sess_1"))

    results = _run_together(
        postgres_url, workers, [["resolve", f"w{n}", "50", "apr_1"] for n in range(4)]
    )
    # No action here: a resolution created beyond one for the request is the double run.
    record("races", 4 * 50, double_runs=max(sum(r["created"] for r in results) - 1, 0))

    with PostgresLedger.from_conn_string(postgres_url) as ledger:
        stored = ledger.get_resolution("apr_1")
        assert stored is not None
        winner = stored.envelope["resolution"]["id"]
        assert sum(result["created"] for result in results) == 1
        for result in results:
            assert result["seen"]["apr_1"] == [winner] * 50
        assert [e["type"] for e in ledger.events_after(0)] == [
            "approval.requested",
            "approval.resolved",
        ]
        assert ledger.last_sequence() == 2
        assert verify_audit(ledger.audit_entries(), ledger.audit_tip()).checked == 2


def test_processes_racing_on_many_requests_record_one_resolution_each(
    postgres_url: str, workers: list[Worker]
) -> None:
    request_ids = [f"apr_{n}" for n in range(50)]
    with PostgresLedger.from_conn_string(postgres_url) as ledger:
        ledger.setup()
        for request_id in request_ids:
            ledger.add_request(request_envelope(request_id, "sess_1"))

    results = _run_together(
        postgres_url, workers, [["resolve", f"w{n}", "1", *request_ids] for n in range(4)]
    )
    created = sum(r["created"] for r in results)
    record("races", 4 * len(request_ids), double_runs=max(created - len(request_ids), 0))

    assert sum(result["created"] for result in results) == len(request_ids)
    with PostgresLedger.from_conn_string(postgres_url) as ledger:
        for request_id in request_ids:
            stored = ledger.get_resolution(request_id)
            assert stored is not None
            winner = stored.envelope["resolution"]["id"]
            assert all(result["seen"][request_id] == [winner] for result in results)
        assert ledger.last_sequence() == 2 * len(request_ids)
        assert [e["sequence"] for e in ledger.events_after(0)] == list(range(1, 101))
        assert ledger.list_pending() == []
        assert verify_audit(ledger.audit_entries(), ledger.audit_tip()).checked == 100


def test_processes_adding_requests_get_gap_free_sequences_in_commit_order(
    postgres_url: str, workers: list[Worker]
) -> None:
    """Four processes set up a fresh schema together, then add 50 requests each plus 10
    they all add; a reader tailing the stream meanwhile never sees a gap."""
    tailed: list[int] = []
    done = threading.Event()

    def tail() -> None:
        with PostgresLedger.from_conn_string(postgres_url) as reader:
            while True:
                finished = done.is_set()
                try:
                    batch = reader.events_after(tailed[-1] if tailed else 0)
                except Exception:  # the workers have not created the schema yet
                    time.sleep(0.01)
                    continue
                tailed.extend(event["sequence"] for event in batch)
                if finished and not batch:
                    return

    reader = threading.Thread(target=tail)
    reader.start()
    try:
        results = _run_together(
            postgres_url, workers, [["add", f"w{n}", "50", "10"] for n in range(4)]
        )
    finally:
        done.set()
        reader.join(timeout=30)

    own = [s for r in results for rid, s in r["sequences"].items() if "shared" not in rid]
    shared = {rid: s for r in results for rid, s in r["sequences"].items() if "shared" in rid}
    assert sorted(own + list(shared.values())) == list(range(1, 211))
    assert all(r["sequences"][rid] == s for r in results for rid, s in shared.items())
    created_shared = [rid for r in results for rid in r["created"] if "shared" in rid]
    assert sorted(created_shared) == sorted(shared)
    assert tailed == list(range(1, 211))
    with PostgresLedger.from_conn_string(postgres_url) as ledger:
        assert [e["sequence"] for e in ledger.events_after(0, limit=500)] == list(range(1, 211))
        verification = verify_audit(ledger.audit_entries(), ledger.audit_tip())
        assert (verification.ok, verification.checked) == (True, 210)


def test_lease_of_a_killed_holder_is_taken_over_after_expiry(
    ledger: PostgresLedger, postgres_url: str
) -> None:
    with _holding(postgres_url, "lease", "replica_a", "thr_1", "1.5") as (_, taken):
        expires_at = taken["expires_at"]
    # replica_a died (SIGKILL) without releasing: its lease holds until expiry, no longer.
    assert time.time() < expires_at
    assert ledger.acquire_lease("thr_1", "replica_b", ttl=30, now=time.time()) is None

    time.sleep(max(expires_at - time.time(), 0) + 0.05)
    now = time.time()
    assert ledger.acquire_lease("thr_1", "replica_b", ttl=30, now=now) == Lease(
        "thr_1", "replica_b", now + 30
    )
    assert ledger.renew_lease("thr_1", "replica_a", ttl=30, now=time.time()) is None


def test_writer_killed_mid_transaction_does_not_block_the_ledger(
    ledger: PostgresLedger, postgres_url: str
) -> None:
    added: list[int] = []

    def add() -> None:
        stored, _ = ledger.add_request(request_envelope("apr_1", "sess_1"))
        added.append(stored.envelope["sequence"])

    with _holding(postgres_url, "lock", "crashing_writer") as (process, _):
        writer = threading.Thread(target=add)
        writer.start()
        writer.join(timeout=0.5)
        assert writer.is_alive()  # queued behind the meta-row lock the worker holds
        process.kill()  # kill -9 mid-transaction: the server rolls it back
    writer.join(timeout=10)

    assert added == [1]
    assert ledger.last_sequence() == 1

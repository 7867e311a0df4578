"""A separate OS process acting on a shared Postgres ledger (run by test_races).

``python _worker.py`` reads commands ``{"url", "mode", "worker", "args"}``, one JSON
object a line, so one process serves many tests without paying its start-up again.
For ``resolve`` and ``add`` it opens the ledger, prints ``ready``, waits for a line on
stdin so all workers start together, then prints one JSON result. ``lease`` and
``lock`` print what they took and hold it until the process is killed.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import datetime, timezone
from typing import Any

import psycopg

from aais_langgraph.ledger import ResolutionWrite
from aais_langgraph.ledger.postgres import PostgresLedger
from aais_langgraph.protocol import build_request


def request_envelope(request_id: str, session_id: str) -> dict[str, Any]:
    """An ``approval.requested`` envelope created at a fixed moment."""
    return build_request(
        {"kind": "tool_call", "name": "shell", "summary": "Run ls", "arguments": {"n": 1}},
        origin={"harness": "tests", "session_id": session_id},
        request_id=request_id,
        created_at=datetime(2026, 1, 1, tzinfo=timezone.utc),
    ).model_dump(mode="json", exclude_none=True)


def resolve(ledger: PostgresLedger, worker: str, count: int, request_ids: list[str]) -> Any:
    """Try ``count`` conflicting resolutions on each request; report which one each call saw."""
    seen: dict[str, list[str]] = {}
    created = 0
    for request_id in request_ids:
        request = ledger.get_request(request_id)
        assert request is not None
        digest = request.envelope["request"]["action_digest"]
        for attempt in range(count):
            resolution_id = f"res_{worker}_{attempt}"
            resolved = {
                "aais": "1.0",
                "type": "approval.resolved",
                "id": f"evt_{resolution_id}",
                "occurred_at": "2026-01-01T00:01:00Z",
                "sequence": 0,
                "resolution": {
                    "id": resolution_id,
                    "request_id": request_id,
                    "action_digest": digest,
                    "resolved_at": "2026-01-01T00:01:00Z",
                    "outcome": "approved" if attempt % 2 else "denied",
                    "message": f"attempt {attempt} of {worker}",
                },
            }
            stored, won = ledger.record_resolution(ResolutionWrite(request_id, resolved))
            created += won
            seen.setdefault(request_id, []).append(stored.envelope["resolution"]["id"])
    return {"created": created, "seen": seen}


def add(ledger: PostgresLedger, worker: str, count: int, shared: int) -> Any:
    """Add ``count`` requests of our own and ``shared`` that every worker adds too."""
    sequences: dict[str, int] = {}
    created: list[str] = []
    request_ids = [f"apr_{worker}_{n}" for n in range(count)]
    request_ids += [f"apr_shared_{n}" for n in range(shared)]
    for request_id in request_ids:
        stored, was_created = ledger.add_request(request_envelope(request_id, f"sess_{worker}"))
        sequences[request_id] = stored.envelope["sequence"]
        if was_created:
            created.append(request_id)
    return {"sequences": sequences, "created": created}


def hold_lease(ledger: PostgresLedger, worker: str, thread_id: str, ttl: float) -> None:
    """Take the thread's lease on the wall clock, report it, and keep it until killed."""
    lease = ledger.acquire_lease(thread_id, worker, ttl=ttl, now=time.time())
    assert lease is not None
    print(json.dumps({"expires_at": lease.expires_at}), flush=True)
    sys.stdin.readline()


def hold_meta_lock(url: str) -> None:
    """Lock the ledger's meta row in an open transaction, as a writer killed mid-write would."""
    with psycopg.connect(url) as conn:
        conn.execute("SELECT 1 FROM aais_meta FOR UPDATE")
        print(json.dumps({"locked": True}), flush=True)
        sys.stdin.readline()


def serve() -> None:
    """Run commands read from stdin, one JSON object a line, until stdin closes."""
    for line in sys.stdin:
        command = json.loads(line)
        url, mode, worker, args = (command[k] for k in ("url", "mode", "worker", "args"))
        if mode == "lock":
            hold_meta_lock(url)
            continue
        with PostgresLedger.from_conn_string(url) as ledger:
            ledger.setup()
            if mode == "lease":
                hold_lease(ledger, worker, args[0], float(args[1]))
                continue
            print("ready", flush=True)
            sys.stdin.readline()
            if mode == "resolve":
                result = resolve(ledger, worker, int(args[0]), args[1:])
            else:
                result = add(ledger, worker, int(args[0]), int(args[1]))
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    serve()

"""A separate OS process that races on a shared SQLite ledger file (run by test_concurrency).

Usage: ``python _worker.py DB add WORKER COUNT`` or ``python _worker.py DB resolve WORKER
REQUEST_ID:ATTEMPTS ...``. Prints ``ready``,
waits for a line on stdin so all workers start together, then prints one JSON result.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from typing import Any

from aais_langgraph.ledger import ResolutionWrite, SqliteLedger
from aais_langgraph.protocol import build_request


def resolve(ledger: SqliteLedger, worker: str, attempts: dict[str, int]) -> Any:
    """Try a number of different resolutions on each request; report which one each call saw."""
    seen: dict[str, list[str]] = {}
    created = 0
    for request_id, count in attempts.items():
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


def add(ledger: SqliteLedger, worker: str, count: int) -> Any:
    """Add ``count`` distinct requests; report the sequences they were given."""
    sequences = {}
    for n in range(count):
        request_id = f"apr_{worker}_{n}"
        envelope = build_request(
            {"kind": "tool_call", "name": "shell", "summary": "Run ls", "arguments": {"n": n}},
            origin={"harness": "tests", "session_id": f"sess_{worker}"},
            request_id=request_id,
            created_at=datetime(2026, 1, 1, tzinfo=timezone.utc),
        ).model_dump(mode="json", exclude_none=True)
        stored, _ = ledger.add_request(envelope)
        sequences[request_id] = stored.envelope["sequence"]
    return {"sequences": sequences}


def main(argv: list[str]) -> None:
    path, mode, worker, *rest = argv
    with SqliteLedger.from_path(path) as ledger:
        ledger.setup()
        print("ready", flush=True)
        sys.stdin.readline()
        if mode == "resolve":
            specs = (spec.rpartition(":") for spec in rest)
            result = resolve(ledger, worker, {rid: int(count) for rid, _, count in specs})
        else:
            result = add(ledger, worker, int(rest[0]))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])

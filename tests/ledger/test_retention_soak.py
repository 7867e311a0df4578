"""A small soak of retention (``benchmarks/bench_retention.py`` is the large one): with a
window of 50, 400 approvals leave a bounded ledger that verifies, in a file that stops growing."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from aais_langgraph.authority import ApprovalAuthority, RequestLimits
from aais_langgraph.ledger import RetentionPolicy, SqliteLedger
from aais_langgraph.protocol import build_decision

ACTION = {"kind": "tool_call", "name": "shell", "summary": "Run ls", "arguments": {"command": "ls"}}
ACTOR = {"id": "user_alex", "type": "human"}


def _pages(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return int(conn.execute("PRAGMA page_count").fetchone()[0])


def test_history_stays_bounded_and_verifiable(tmp_path: Path) -> None:
    path = tmp_path / "soak.db"
    policy = RetentionPolicy(keep_last=50)
    pages: dict[int, int] = {}
    with SqliteLedger.from_conn_string(path, synchronous="OFF") as ledger:
        authority = ApprovalAuthority(ledger, limits=RequestLimits.unbounded())
        for number in range(1, 401):
            requested = authority.request(
                ACTION, origin={"harness": "soak", "session_id": "s-1"}, request_id=f"apr_{number}"
            )
            authority.decide(build_decision(requested, decision="approve", actor=ACTOR))
            if number % 25 == 0:
                ledger.compact_history(policy, now=time.time())
            if number in (200, 400):
                result = authority.verify_audit()
                assert result.ok, result
                assert result.checked <= 3 * 75 + 1  # the window's entries and a checkpoint
                contents = ledger.contents()
                assert len(contents.requests) <= 75 and len(contents.events) <= 2 * 75
                pages[number] = _pages(path)
    assert pages[400] <= pages[200] * 1.25

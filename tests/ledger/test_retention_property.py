"""Retention as a property: any mix of requests, resolutions, compactions (and event
compactions) verifies, and any tampering with what remains is still detected."""

from __future__ import annotations

import dataclasses
import tempfile
import time
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from aais_langgraph.authority import ApprovalAuthority
from aais_langgraph.ledger import (
    RESUME,
    InMemoryLedger,
    Ledger,
    LedgerContents,
    SqliteLedger,
    verify_contents,
)
from aais_langgraph.ledger.retention import RetentionPolicy
from aais_langgraph.protocol import build_decision

ACTION = {"kind": "tool_call", "name": "shell", "summary": "Run ls", "arguments": {"command": "ls"}}
ACTOR = {"id": "user_alex", "type": "human"}

Step = tuple[str, int]
steps = st.lists(
    st.one_of(
        st.tuples(st.just("request"), st.integers(0, 11)),
        st.tuples(st.sampled_from(["approve", "deny", "cancel"]), st.integers(0, 11)),
        st.tuples(st.just("compact"), st.integers(0, 4)),
        st.tuples(st.just("drop events"), st.integers(0, 30)),
    ),
    min_size=1,
    max_size=25,
)


def _play(ledger: Ledger, plan: list[Step]) -> None:
    authority = ApprovalAuthority(ledger)
    compacted: set[str] = set()
    for verb, number in plan:
        request_id = f"apr_{number}"
        if verb == "compact":
            before = {r.request_id for r in ledger.contents().requests}
            report = ledger.compact_history(RetentionPolicy(keep_last=number), now=time.time())
            event("compacted" if report.requests_removed else "nothing to compact")
            compacted |= before - {r.request_id for r in ledger.contents().requests}
            continue
        if verb == "drop events":
            ledger.compact_events(number)
            continue
        if request_id in compacted:
            continue
        requested = authority.request(
            ACTION,
            origin={"harness": "tests", "session_id": "sess_1"},
            request_id=request_id,
            thread_id=f"thread_{number % 3}" if number % 2 else None,
        )
        if verb == "request" or authority.get_resolution(request_id) is not None:
            continue
        if verb == "cancel":
            authority.cancel(request_id)
        else:
            decision: Any = "approve" if verb == "approve" else "deny"
            authority.decide(
                build_decision(requested, decision=decision, scope="once", actor=ACTOR)
            )
        if number % 2:  # a thread's resume work: done for some, still open for others
            work = ledger.get_work(RESUME, request_id)
            if work is not None and number % 4 == 1:
                ledger.update_work(
                    RESUME,
                    request_id,
                    lambda w: None if w is None else dataclasses.replace(w, state="done"),
                )


def _tampered(contents: LedgerContents, choice: int) -> list[LedgerContents]:
    """Every way of changing what remains that the check offers (one per kind)."""
    audit = contents.audit
    found = []
    entry = audit[choice % len(audit)]
    edited = dataclasses.replace(entry, payload={**entry.payload, "tampered": True})
    found.append(dataclasses.replace(contents, audit=[edited if e is entry else e for e in audit]))
    found.append(dataclasses.replace(contents, audit=[e for e in audit if e is not entry]))
    if contents.requests:
        dropped = contents.requests[choice % len(contents.requests)]
        found.append(
            dataclasses.replace(
                contents, requests=[r for r in contents.requests if r is not dropped]
            )
        )
    events = contents.events
    if events:
        sequence, envelope = events[choice % len(events)]
        changed = (sequence, {**envelope, "tampered": True})
        found.append(
            dataclasses.replace(
                contents, events=[changed if e[0] == sequence else e for e in events]
            )
        )
    if len(events) > 1:  # the oldest event's deletion reads as a legacy compaction
        gone = events[1 + choice % (len(events) - 1)][0]
        found.append(dataclasses.replace(contents, events=[e for e in events if e[0] != gone]))
    return found


def _check(ledger: Ledger, choice: int) -> None:
    contents = ledger.contents()
    assert verify_contents(contents).ok, verify_contents(contents)
    if contents.audit:
        for tampered in _tampered(contents, choice):
            assert not verify_contents(tampered).ok


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=steps, choice=st.integers(0, 1000))
def test_compaction_keeps_verify_passing_in_memory(plan: list[Step], choice: int) -> None:
    ledger = InMemoryLedger()
    _play(ledger, plan)
    _check(ledger, choice)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=steps, choice=st.integers(0, 1000))
def test_compaction_keeps_verify_passing_in_sqlite(plan: list[Step], choice: int) -> None:
    with (
        tempfile.TemporaryDirectory() as directory,
        SqliteLedger.from_conn_string(Path(directory) / "ledger.db") as ledger,
    ):
        _play(ledger, plan)
        _check(ledger, choice)

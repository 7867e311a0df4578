"""Hostile lines against the NDJSON stdio presenter, tallied in the hostile report ("NDJSON stdio").

The inputs are the HTTP profile's (``tests/hostile/test_http_profile.py``) plus what
only a line protocol has: oversized, split and NUL-bearing lines. Every hostile line
gets exactly one reply line (an error object or a non-approved resolution), in
order; afterwards nothing is approved or executed, no reply echoes the sentinel,
and the correct decision still approves and runs the action once.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from aais_langgraph import ThreadDriver, build_decision
from aais_langgraph.protocol import DEFAULT_MAX_BYTES
from hostile.conftest import SENTINEL
from hostile.report import record
from hostile.test_http_profile import BAD_ENVELOPES, RAW_BODIES, _duplicate_key_bodies

from .conftest import Paused
from .support import OS_USER, is_reply, presenter

CATEGORY = "NDJSON stdio"
ACTOR = {"id": "someone", "type": "human"}


def _hostile_lines(decided: dict[str, Any]) -> list[tuple[str, bytes]]:
    text = json.dumps(decided)
    lines = [
        (name, json.dumps(mutate(copy.deepcopy(decided))).encode())
        for name, mutate in BAD_ENVELOPES
    ]
    lines += [(f"raw: {name}", raw) for name, raw in RAW_BODIES if raw.strip()]
    lines += [
        (f"duplicate: {name}", body.encode()) for name, body in _duplicate_key_bodies(decided)
    ]
    padding = DEFAULT_MAX_BYTES + 1 - len(text)
    lines += [
        ("one byte over the limit", (" " * padding + text).encode()),
        ("megabytes of sentinel", b'{"x": "' + SENTINEL.encode() * 400_000 + b'"}'),
        ("NUL between envelopes", text.encode() + b"\x00" + text.encode()),
        ("two envelopes on a line", (text + text).encode()),
        ("carriage return inside", text.replace(", ", ",\r", 1).encode()[:-2] + b"\r"),
        ("lone surrogate escape", text.replace('"once"', '"once\\ud800"').encode()),
        (
            "sentinel as request id",
            text.replace(decided["decision"]["request_id"], SENTINEL).encode(),
        ),
        ("control characters in a duplicate key", b'{"\\u001b[2J": 1, "\\u001b[2J": 2}'),
    ]
    return lines


def test_hostile_lines_get_one_reply_each_and_change_nothing(paused: Paused) -> None:
    requested = paused.pause("t1")
    request_id = requested["request"]["id"]
    decided = build_decision(requested, decision="approve", actor=ACTOR).to_json()
    hostile = _hostile_lines(decided)
    failed_open = 0
    with presenter(paused.db) as stdio:
        for _, line in hostile:
            stdio.send(line)
        replies = [stdio.read_until(is_reply) for _ in hostile]
        for number, ((name, _), reply) in enumerate(zip(hostile, replies, strict=True), 1):
            text = json.dumps(reply)
            assert SENTINEL not in text, name
            if "error" in reply:
                assert reply["error"]["line"] == number, name
            else:
                assert reply["extensions"]["aais-langgraph.org/in_reply_to"]["line"] == number
                failed_open += reply["resolution"]["outcome"] == "approved"
        assert paused.authority.get_resolution(request_id) is None
        assert ThreadDriver(paused.graph, paused.authority).resume_stranded() == []
        assert paused.executed == []
        at_limit = DEFAULT_MAX_BYTES - len(json.dumps(decided))
        stdio.send(" " * at_limit + json.dumps(decided))  # exactly the limit: read
        assert stdio.read_until(is_reply)["resolution"]["outcome"] == "approved"
        assert stdio.close() == 0
        diagnostics = stdio.stderr()
        assert "\x1b" not in diagnostics and SENTINEL not in diagnostics
    ThreadDriver(paused.graph, paused.authority).resume_stranded()
    double = max(len(paused.executed) - 1, 0)
    record(CATEGORY, len(hostile), failed_open=failed_open, double_runs=double)
    assert failed_open == 0 and paused.executed == ["notes.txt"]


def test_forged_actors_are_replaced_by_the_os_user(paused: Paused) -> None:
    forged = [
        {"id": "alice", "type": "human"},
        {"id": "alice", "type": "human", "authenticated_by": "bearer"},
        {"id": "policy-engine", "type": "policy"},
        {"id": "ci", "type": "human", "display_name": SENTINEL},
        {"id": OS_USER, "type": "policy", "authenticated_by": "os-user"},
    ]
    requests = [paused.pause(f"t{i}", f"f{i}.txt") for i in range(len(forged))]
    with presenter(paused.db) as stdio:
        for requested, actor in zip(requests, forged, strict=True):
            stdio.send(build_decision(requested, decision="approve", actor=actor).to_json())
            assert stdio.read_until(is_reply)["resolution"]["outcome"] == "approved"
        assert stdio.close() == 0
    recorded = [d["decision"]["actor"] for d in stdio.seen if d.get("type") == "approval.decided"]
    failed_open = sum(actor != recorded[0] for actor in recorded)
    record(CATEGORY, len(forged), failed_open=failed_open)
    assert recorded == [{"id": OS_USER, "type": "human", "authenticated_by": "os-user"}] * len(
        forged
    )
    for entry in paused.authority.ledger.audit_entries():
        assert SENTINEL not in json.dumps(entry.payload)


def test_a_line_split_across_writes_and_a_final_line_without_newline_are_read(
    paused: Paused,
) -> None:
    requested = paused.pause("t1")
    text = json.dumps(build_decision(requested, decision="deny", actor=ACTOR).to_json())
    with presenter(paused.db) as stdio:
        assert stdio.process.stdin is not None
        for start in range(0, len(text), 97):
            stdio.process.stdin.write(text[start : start + 97].encode())
            stdio.process.stdin.flush()
        assert stdio.close() == 0
    [reply] = [d for d in stdio.seen if is_reply(d)]
    assert reply["resolution"]["outcome"] == "denied"
    record(CATEGORY, 1)

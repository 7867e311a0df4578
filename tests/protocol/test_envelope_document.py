"""One envelope header: the builders and the authority's envelopes share ``envelope_document``."""

from __future__ import annotations

from datetime import datetime, timezone

from aais_langgraph.authority import ApprovalAuthority
from aais_langgraph.protocol import (
    AAIS_VERSION,
    ApprovalSnapshot,
    build_decision,
    build_request,
    envelope_document,
)

ACTION = {"kind": "fs.delete", "name": "delete_file", "summary": "Delete it", "arguments": {}}
ORIGIN = {"harness": "test", "session_id": "s-1"}
HEADER = {"aais", "type", "id", "occurred_at", "sequence"}


def test_the_header_wraps_the_payload_with_optional_stream_and_extensions() -> None:
    bare = envelope_document("approval.snapshot", "snapshot", {}, occurred_at="t", sequence=3)
    assert set(bare) == HEADER | {"snapshot"}
    assert bare["aais"] == AAIS_VERSION and bare["sequence"] == 3
    full = envelope_document(
        "approval.snapshot",
        "snapshot",
        {},
        occurred_at="t",
        sequence=3,
        stream="st",
        event_id="evt_1",
        extensions={"example.org/x": 1},
    )
    assert (full["id"], full["stream"], full["extensions"]) == ("evt_1", "st", {"example.org/x": 1})
    assert "extensions" not in envelope_document(
        "a", "b", {}, occurred_at="t", sequence=0, extensions={}
    )


def test_every_envelope_the_library_writes_has_the_same_header() -> None:
    authority = ApprovalAuthority(clock=lambda: datetime(2026, 1, 1, tzinfo=timezone.utc))
    requested = authority.add(
        build_request(ACTION, origin=ORIGIN, created_at="2026-01-01T00:00:00Z")
    )
    decided = build_decision(requested, decision="deny", actor={"id": "a", "type": "human"})
    resolved = authority.decide(decided)
    snapshot = authority.snapshot()
    assert isinstance(snapshot, ApprovalSnapshot)
    for envelope in (requested, decided, resolved, snapshot):
        document = envelope.to_json()
        assert set(document) >= HEADER
        assert document["aais"] == AAIS_VERSION

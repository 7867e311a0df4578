"""``envelope_text``: a snapshot's text from each request's text written once, equal as
JSON to the envelope's document."""

from __future__ import annotations

import gc
import json
from datetime import datetime, timezone
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from aais_langgraph.authority.resolutions import snapshot_of
from aais_langgraph.protocol import (
    ApprovalSnapshot,
    build_decision,
    build_request,
    envelope_text,
    request_text,
)

from .strategies import actions

NOW = datetime(2026, 8, 30, 18, 0, tzinfo=timezone.utc)
ORIGIN = {"harness": "example-harness", "session_id": "s-1"}
ACTOR = {"id": "user_alex", "type": "human"}


def _snapshot(action_list: list[dict[str, Any]], **options: Any) -> ApprovalSnapshot:
    pending = [
        build_request(action, origin=ORIGIN, created_at=NOW).request for action in action_list
    ]
    return snapshot_of(pending, as_of=7, now=NOW, stream=None, **options)


@settings(max_examples=60, deadline=None)
@given(st.lists(actions(), max_size=4))
def test_a_snapshots_text_is_its_document(action_list: list[dict[str, Any]]) -> None:
    snapshot = _snapshot(action_list)
    text = envelope_text(snapshot)
    assert json.loads(text) == snapshot.to_json()
    assert envelope_text(snapshot) == text  # the second time from the remembered texts


def test_a_snapshot_with_extensions_keeps_them_before_its_payload() -> None:
    snapshot = _snapshot([{"kind": "k", "name": "n", "summary": "é ✓", "arguments": {"x": 1}}])
    extended = snapshot.model_copy(
        update={"extensions": {"example.org/note": {"pending": ["not the payload"]}}}
    )
    text = envelope_text(extended)
    assert json.loads(text) == extended.to_json()
    assert list(json.loads(text)) == list(extended.to_json())
    assert "é ✓" in text  # UTF-8, as JSONResponse writes it


def test_an_empty_snapshots_text_is_its_document() -> None:
    snapshot = _snapshot([])
    assert json.loads(envelope_text(snapshot)) == snapshot.to_json()


def test_other_envelopes_are_written_in_full() -> None:
    requested = build_request(
        {"kind": "k", "name": "n", "summary": "s", "arguments": {}}, origin=ORIGIN
    )
    decided = build_decision(requested, decision="deny", actor=ACTOR)
    for envelope in (requested, decided):
        assert json.loads(envelope_text(envelope)) == envelope.to_json()


def test_a_request_text_is_kept_only_while_its_model_lives() -> None:
    first = build_request(
        {"kind": "k", "name": "n", "summary": "s", "arguments": {"a": 1}}, origin=ORIGIN
    ).request
    assert json.loads(request_text(first)) == first.to_json()
    del first
    gc.collect()
    # A new model (which may reuse the id of the one gone) gets its own text.
    second = build_request(
        {"kind": "k", "name": "n", "summary": "s", "arguments": {"b": 2}}, origin=ORIGIN
    ).request
    assert json.loads(request_text(second)) == second.to_json()

"""Absent optional fields are left out of every dump; nulls inside free-form values stay."""

from __future__ import annotations

import json
from typing import Any

import pytest

from aais_langgraph.protocol import ApprovalRequested, build_decision, build_request
from aais_langgraph.protocol.base import AAISModel

ACTION = {
    "kind": "process.exec",
    "name": "shell.exec",
    "summary": "Run it",
    "arguments": {"command": "ls", "env": None, "flags": [None, {"deep": None}]},
}
ORIGIN = {"harness": "test", "session_id": "s-1"}


def _models() -> list[type[AAISModel]]:
    found: list[type[AAISModel]] = []
    pending = [AAISModel]
    while pending:
        for model in pending.pop().__subclasses__():
            found.append(model)
            pending.append(model)
    return found


@pytest.mark.parametrize("model", _models(), ids=lambda model: model.__name__)
def test_every_optional_field_is_left_out_while_absent(model: type[AAISModel]) -> None:
    for name, field in model.model_fields.items():
        if field.default is None:  # a field declared "= None" would dump as null
            assert field.exclude_if is not None and field.exclude_if(None), name


def _nulls_outside_arguments(value: Any, path: str = "") -> list[str]:
    if path.endswith("/action/arguments"):
        return []
    if isinstance(value, dict):
        return [
            found
            for key, item in value.items()
            for found in _nulls_outside_arguments(item, f"{path}/{key}")
        ]
    if isinstance(value, list):
        return [
            found
            for index, item in enumerate(value)
            for found in _nulls_outside_arguments(item, f"{path}/{index}")
        ]
    return [path] if value is None else []


def test_no_dump_holds_a_null_but_the_arguments_keep_theirs() -> None:
    requested = build_request(ACTION, origin=ORIGIN)
    decided = build_decision(requested, decision="approve", actor={"id": "a", "type": "human"})
    for envelope in (requested, decided):
        dumps = [
            envelope.to_json(),
            envelope.model_dump(),
            envelope.model_dump(mode="json"),
            json.loads(envelope.model_dump_json()),
        ]
        for dumped in dumps:
            assert _nulls_outside_arguments(dumped) == []
    arguments = requested.to_json()["request"]["action"]["arguments"]
    assert arguments == ACTION["arguments"]
    assert "stream" not in requested.to_json() and "extensions" not in requested.to_json()
    again = ApprovalRequested.from_data(json.loads(requested.model_dump_json()))
    assert again == requested

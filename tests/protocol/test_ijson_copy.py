"""``ijson_copy`` checks as ``check_ijson`` does and copies as a JSON round trip does, for
plain data and for everything else (other mappings and sequences, scalar subclasses,
values that are not I-JSON)."""

from __future__ import annotations

import enum
import json
from collections import OrderedDict
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aais_langgraph.protocol import AAISValidationError, check_ijson
from aais_langgraph.protocol.ijson import ijson_copy

from .strategies import json_values


class _Level(enum.IntEnum):
    HIGH = 3


def _round_trip(value: Any) -> Any:
    check_ijson(value)
    return json.loads(json.dumps(value, ensure_ascii=False, allow_nan=False))


def _outcome(copy: Any, value: Any) -> tuple[str, Any]:
    try:
        return "copied", json.dumps(copy(value), ensure_ascii=False)
    except AAISValidationError as error:
        return "refused", (error.pointer, error.reason)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_plain_data_copies_as_a_json_round_trip(value: Any) -> None:
    assert _outcome(ijson_copy, value) == _outcome(_round_trip, value)


@pytest.mark.parametrize(
    "value",
    [
        {"level": _Level.HIGH},
        OrderedDict(a=1),
        {"pair": (1, [2])},
        {"flag": True, "zero": -0.0},
        {"n": float("nan")},
        {"inf": [1, float("inf")]},
        {"s": "\ud800"},
        {"\udfff": 1},
        {1: "key not a string"},
        {"big": 2**53},
        {"o": object()},
        {"d": {"d": {"d": {}}}},
    ],
)
def test_other_data_is_refused_or_copied_as_before(value: Any) -> None:
    assert _outcome(ijson_copy, value) == _outcome(_round_trip, value)


@given(st.integers(30, 40))
def test_nesting_is_bounded(depth: int) -> None:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"x": value}
    assert _outcome(ijson_copy, value) == _outcome(_round_trip, value)


def test_the_copy_is_detached() -> None:
    original = {"a": {"b": [1, {"c": "d"}]}}
    copied = ijson_copy(original)
    copied["a"]["b"][1]["c"] = "changed"
    copied["a"]["b"].append(2)
    assert original == {"a": {"b": [1, {"c": "d"}]}}

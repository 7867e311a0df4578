"""``check_ijson`` accepts exactly the values a plain reading of RFC 7493 accepts: exact
JSON types, integers within +/-(2**53-1), finite floats, valid Unicode strings and keys,
nesting within the bound; everything else is refused with a pointer."""

from __future__ import annotations

import enum
import math
from collections import OrderedDict
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from aais_langgraph.protocol import AAISValidationError, check_ijson

from .strategies import MAX_SAFE_INTEGER, nested, scalars, strings


class _Level(enum.IntEnum):
    HIGH = 3


def _valid_text(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _is_ijson(value: Any, max_depth: int, depth: int = 0) -> bool:
    """The reference: a direct recursive reading of the rules (plain types only)."""
    kind = type(value)
    if value is None or kind is bool:
        return True
    if kind is int:
        return -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER
    if kind is float:
        return math.isfinite(value)
    if kind is str:
        return _valid_text(value)
    if kind is list:
        return depth < max_depth and all(_is_ijson(item, max_depth, depth + 1) for item in value)
    if kind is dict:
        return depth < max_depth and all(
            type(key) is str and _valid_text(key) and _is_ijson(item, max_depth, depth + 1)
            for key, item in value.items()
        )
    return False


hostile_scalars = st.one_of(
    scalars,
    st.sampled_from(
        [
            float("nan"),
            float("inf"),
            -float("inf"),
            MAX_SAFE_INTEGER + 1,
            -MAX_SAFE_INTEGER - 1,
            2**64,
            "\ud800",
            "a\udfffb",
        ]
    ),
)
hostile_keys = st.one_of(strings, st.sampled_from(["\ud800", 1, None, 1.5, True]))
hostile_values = nested(hostile_scalars, hostile_keys)


@settings(max_examples=500, deadline=None)
@given(hostile_values, st.integers(min_value=0, max_value=4))
@example({"a": [1, {"b": MAX_SAFE_INTEGER + 1}]}, 32)
@example([[["\ud800"]]], 32)
@example({"a": {"b": {"c": 1}}}, 2)
@example({"a": {"b": {"c": 1}}}, 3)
@example({1: "x"}, 32)
@example([1.5, float("nan")], 32)
def test_check_ijson_accepts_what_the_rules_accept(value: Any, max_depth: int) -> None:
    expected = _is_ijson(value, max_depth)
    try:
        check_ijson(value, max_depth=max_depth)
    except AAISValidationError:
        accepted = False
    else:
        accepted = True
    assert accepted is expected


@pytest.mark.parametrize("value", [OrderedDict(a=1), {"a": (1, 2)}, [_Level.HIGH]])
def test_other_types_are_judged_by_their_content(value: Any) -> None:
    """Mappings, sequences and scalar subclasses are not refused for their type alone:
    the thorough walk judges what they hold."""
    check_ijson(value)


def test_what_another_type_holds_is_refused_where_it_is() -> None:
    with pytest.raises(AAISValidationError) as caught:
        check_ijson({"a": {"b": OrderedDict(c=float("nan"))}})
    assert caught.value.pointer == "/a/b/c"

"""``canonical_json`` writes plain values with ``json`` and the rest with ``rfc8785``:
both paths must give the RFC 8785 bytes, for every value either may see."""

from __future__ import annotations

from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from aais_langgraph.protocol import AAISValidationError, canonical_json

from .strategies import MAX_SAFE_INTEGER, json_values

# Values the json writer takes, with the characters where the two writers could
# differ (controls, quotes, escapes, separators, astral keys) and floats on both
# sides of the range it writes (integral ones, exponents, epoch timestamps).
tricky = st.text(
    st.one_of(
        st.characters(exclude_categories=("Cs",)),
        st.sampled_from('\x00\x07\x08\t\n\x0b\x0c\r\x1f\x7f"\\/\u2028\u2029\ufeff\U0001f600'),
    ),
    max_size=8,
)
floats = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.floats(1e-5, 1e-3) | st.floats(1e15, 1e17) | st.floats(1e9, 3e9),
    st.integers(-(2**60), 2**60).map(float),
    st.sampled_from([1e-4, -1e-4, 0.1, 0.3, 5e-324, 1e16 - 2, 2.0**52 + 0.5, 1e21]),
)
plain_values: st.SearchStrategy[Any] = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER),
        floats,
        tricky,
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(tricky, children, max_size=4)
    ),
    max_leaves=25,
)


@settings(max_examples=1500, deadline=None)
@given(st.one_of(plain_values, json_values))
def test_canonical_json_is_rfc8785(value: Any) -> None:
    assert canonical_json(value) == rfc8785.dumps(value)


@pytest.mark.parametrize(
    "value",
    [
        {"\U0001f600": 1, "\ufb01": 2},  # UTF-16 order differs from code point order
        {"b": [1, {"a": 2.5}]},  # a float anywhere
        {"at": 1764612345.123456, "ttl": 0.0001, "big": 9007199254740991.5},
        {"a": 1.0, "b": -0.0},
        {"é": "x", "e": "y"},
        ["\u2028\u2029", "\x00\x1f\x7f", '"\\/'],
        {"a": True, "b": None, "c": [False, MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER]},
        [[[[[[[[["deep"]]]]]]]]],
    ],
)
def test_values_near_the_edge_of_the_fast_path(value: Any) -> None:
    assert canonical_json(value) == rfc8785.dumps(value)


@pytest.mark.parametrize(
    "value", [MAX_SAFE_INTEGER + 1, {"a": -MAX_SAFE_INTEGER - 1}, {"a": "\ud800"}, {1: "x"}]
)
def test_values_outside_ijson_are_refused_on_either_path(value: Any) -> None:
    with pytest.raises(AAISValidationError):
        canonical_json(value)


def test_deep_and_cyclic_values_fall_back_and_are_refused_cleanly() -> None:
    deep: Any = "x"
    for _ in range(200):
        deep = [deep]
    assert canonical_json(deep, max_depth=10_000) == rfc8785.dumps(deep)
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    with pytest.raises(AAISValidationError):
        canonical_json(cyclic, max_depth=10_000)

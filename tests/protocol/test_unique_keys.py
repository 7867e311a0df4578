"""check_unique_keys: a repeated object key anywhere in JSON text is refused at its pointer."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aais_langgraph.protocol import AAISValidationError, check_unique_keys
from aais_langgraph.protocol.errors import join_pointer
from hostile.report import refused

from .strategies import json_values, keys


@given(json_values, st.booleans())
def test_text_without_repeated_keys_passes(value: Any, ascii_only: bool) -> None:
    check_unique_keys(json.dumps(value, ensure_ascii=ascii_only))
    check_unique_keys(json.dumps(value).encode())


@given(
    path=st.lists(keys, max_size=4),
    members=st.dictionaries(keys, json_values, min_size=1, max_size=4),
    twin=json_values,
    data=st.data(),
)
def test_a_repeated_key_is_refused_at_its_pointer(
    path: list[str], members: dict[str, Any], twin: Any, data: st.DataObject
) -> None:
    repeated = data.draw(st.sampled_from(sorted(members)))
    parts = [f"{json.dumps(k)}: {json.dumps(v)}" for k, v in members.items()]
    parts.append(f"{json.dumps(repeated)}: {json.dumps(twin)}")
    text = "{" + ", ".join(parts) + "}"
    for key in reversed(path):
        text = "{" + json.dumps(key) + ": " + text + "}"
    with refused("library", AAISValidationError) as caught:
        check_unique_keys(text.encode())
    assert caught.value.pointer == join_pointer("", *path, repeated)
    assert caught.value.reason == "duplicate object key in JSON text"


@pytest.mark.parametrize("text", ["", "{", "[1,]", "{'a': 1}", "[" * 100_000])
def test_text_that_is_not_json_is_refused_at_the_root(text: str) -> None:
    with refused("library", AAISValidationError) as caught:
        check_unique_keys(text)
    assert caught.value.pointer == ""

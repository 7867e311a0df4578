"""Our action digest against the reference library's, on generated I-JSON actions."""

from __future__ import annotations

import copy
import json
import unicodedata
from typing import Any

import aais
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from aais_langgraph.protocol import (
    AAISValidationError,
    Action,
    action_digest,
    canonical_json,
    loads_strict,
)
from hostile.report import record

from .strategies import actions, json_values, keys

EXAMPLES = settings(max_examples=200, deadline=None)

Path = tuple[str | int, ...]


def _paths(value: Any, path: Path = ()) -> list[Path]:
    """Every location below ``value`` (members and items, containers included)."""
    found: list[Path] = []
    if isinstance(value, dict):
        for key, child in value.items():
            found.append((*path, key))
            found.extend(_paths(child, (*path, key)))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found.append((*path, index))
            found.extend(_paths(child, (*path, index)))
    return found


def _replace(value: Any, path: Path, new: Any) -> Any:
    changed = copy.deepcopy(value)
    target = changed
    for token in path[:-1]:
        target = target[token]
    target[path[-1]] = new
    return changed


def _same_digest(changed: Any, action: Any) -> bool:
    """Counted in the hostile-input table: an edited action with the approved action's
    digest would carry that approval (failed open)."""
    same = action_digest(changed) == action_digest(action)
    record("library", 1, failed_open=int(same))
    return same


def _reversed_insertion(value: Any) -> Any:
    """The same JSON value with every object's members inserted in reverse order."""
    if isinstance(value, dict):
        return {key: _reversed_insertion(value[key]) for key in reversed(list(value))}
    if isinstance(value, list):
        return [_reversed_insertion(item) for item in value]
    return value


@EXAMPLES
@given(actions())
def test_digest_of_an_action_mapping_equals_the_reference(action: dict[str, Any]) -> None:
    assert action_digest(action) == aais.action_digest(action)


@EXAMPLES
@given(actions())
def test_digest_of_an_action_model_equals_the_reference(action: dict[str, Any]) -> None:
    assert action_digest(Action.model_validate(action)) == aais.action_digest(action)


@EXAMPLES
@given(actions(), st.booleans())
def test_digest_after_a_json_text_round_trip_equals_the_reference(
    action: dict[str, Any], ascii_only: bool
) -> None:
    text = json.dumps(action, ensure_ascii=ascii_only)
    assert action_digest(loads_strict(text)) == aais.action_digest(action)


@EXAMPLES
@given(actions())
def test_dict_insertion_order_does_not_change_the_digest(action: dict[str, Any]) -> None:
    assert action_digest(_reversed_insertion(action)) == action_digest(action)


@EXAMPLES
@given(actions())
def test_key_order_in_json_text_does_not_change_the_digest(action: dict[str, Any]) -> None:
    sorted_text = json.dumps(action, sort_keys=True)
    reversed_text = json.dumps(_reversed_insertion(action))
    assert action_digest(loads_strict(sorted_text)) == action_digest(loads_strict(reversed_text))


@EXAMPLES
@given(actions(), st.data())
def test_changing_any_argument_changes_the_digest(
    action: dict[str, Any], data: st.DataObject
) -> None:
    paths = _paths(action["arguments"])
    assume(paths)
    path = data.draw(st.sampled_from(paths), label="path")
    new = data.draw(json_values, label="new value")
    changed = _replace(action, ("arguments", *path), new)
    # JSON equality, not Python equality: 1 and 1.0, or 0.0 and -0.0, are one number.
    assume(canonical_json(changed) != canonical_json(action))
    assert not _same_digest(changed, action)


@EXAMPLES
@given(actions(), keys, json_values)
def test_adding_an_argument_changes_the_digest(
    action: dict[str, Any], key: str, value: Any
) -> None:
    assume(key not in action["arguments"])
    changed = copy.deepcopy(action)
    changed["arguments"][key] = value
    assert not _same_digest(changed, action)


@EXAMPLES
@given(actions(), st.data())
def test_removing_an_argument_changes_the_digest(
    action: dict[str, Any], data: st.DataObject
) -> None:
    assume(action["arguments"])
    key = data.draw(st.sampled_from(sorted(action["arguments"])), label="key")
    changed = copy.deepcopy(action)
    del changed["arguments"][key]
    assert not _same_digest(changed, action)


def _action(arguments: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "test.kind", "name": "test.name", "summary": "A test", "arguments": arguments}


def test_unicode_is_digested_unnormalized() -> None:
    composed = unicodedata.normalize("NFC", "café")
    decomposed = unicodedata.normalize("NFD", "café")
    assert action_digest(_action({"s": composed})) != action_digest(_action({"s": decomposed}))


def test_integral_float_and_integer_are_one_json_number() -> None:
    assert action_digest(_action({"n": 1.0})) == action_digest(_action({"n": 1}))


def test_negative_zero_and_zero_are_one_json_number() -> None:
    assert action_digest(_action({"n": -0.0})) == action_digest(_action({"n": 0}))


def test_safe_integer_bounds_are_digested_like_the_reference() -> None:
    action = _action({"max": 2**53 - 1, "min": -(2**53 - 1)})
    assert action_digest(action) == aais.action_digest(action)


# RFC 8785 Appendix B: IEEE 754 doubles and their canonical text.
RFC8785_NUMBERS = [
    ("0000000000000000", "0"),
    ("8000000000000000", "0"),
    ("0000000000000001", "5e-324"),
    ("8000000000000001", "-5e-324"),
    ("7fefffffffffffff", "1.7976931348623157e+308"),
    ("ffefffffffffffff", "-1.7976931348623157e+308"),
    ("4340000000000000", "9007199254740992"),
    ("c340000000000000", "-9007199254740992"),
    ("4430000000000000", "295147905179352830000"),
    ("44b52d02c7e14af5", "9.999999999999997e+22"),
    ("44b52d02c7e14af6", "1e+23"),
    ("44b52d02c7e14af7", "1.0000000000000001e+23"),
    ("444b1ae4d6e2ef4e", "999999999999999700000"),
    ("444b1ae4d6e2ef4f", "999999999999999900000"),
    ("444b1ae4d6e2ef50", "1e+21"),
    ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
    ("3eb0c6f7a0b5ed8d", "0.000001"),
    ("41b3de4355555553", "333333333.3333332"),
    ("41b3de4355555554", "333333333.33333325"),
    ("41b3de4355555555", "333333333.3333333"),
    ("41b3de4355555556", "333333333.3333334"),
    ("41b3de4355555557", "333333333.33333343"),
    ("becbf647612f3696", "-0.0000033333333333333333"),
    ("43143ff3c1cb0959", "1424953923781206.2"),
]


@pytest.mark.parametrize(("bits", "text"), RFC8785_NUMBERS, ids=[b for b, _ in RFC8785_NUMBERS])
def test_numbers_are_canonicalized_as_rfc8785_appendix_b(bits: str, text: str) -> None:
    import struct

    (number,) = struct.unpack(">d", bytes.fromhex(bits))
    assert canonical_json([number]) == f"[{text}]".encode()


def test_keys_are_sorted_by_utf16_code_units_as_rfc8785_section_3_2_3() -> None:
    members = {
        "\u20ac": "Euro Sign",
        "\r": "Carriage Return",
        "\ufb33": "Hebrew Letter Dalet With Dagesh",
        "1": "One",
        "\U0001f600": "Emoji: Grinning Face",
        "\u0080": "Control",
        "\u00f6": "Latin Small Letter O With Diaeresis",
    }
    expected_order = ["\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001f600", "\ufb33"]
    expected = ",".join(
        f"{json.dumps(key, ensure_ascii=False)}:{json.dumps(members[key])}"
        for key in expected_order
    )
    assert canonical_json(members) == ("{" + expected + "}").encode()


# --- A model's arguments are a plain dict: the digest reads them as they are now ----------


def _validated(arguments: dict[str, Any]) -> Action:
    return Action.model_validate(_action(arguments))


def test_model_digest_follows_a_change_to_its_arguments() -> None:
    action = _validated({"command": "ls"})
    action.arguments["command"] = "rm -rf /"
    assert action_digest(action) == aais.action_digest(_action({"command": "rm -rf /"}))


@pytest.mark.parametrize(
    ("key", "value", "pointer"),
    [
        pytest.param("n", float("nan"), "/arguments/n", id="nan"),
        pytest.param("n", 2**53, "/arguments/n", id="2**53"),
        pytest.param("s", "\ud800", "/arguments/s", id="lone-surrogate"),
        pytest.param(5, "five", "/arguments", id="int-key"),
        pytest.param("b", b"bytes", "/arguments/b", id="bytes"),
    ],
)
def test_model_digest_refuses_arguments_made_non_ijson_after_validation(
    key: Any, value: Any, pointer: str
) -> None:
    # JSON-mode dumping would have digested NaN as null and 5 as "5".
    action = _validated({"command": "ls"})
    action.arguments[key] = value
    with pytest.raises(AAISValidationError) as caught:
        action_digest(action)
    assert caught.value.pointer == pointer

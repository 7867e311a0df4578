"""Hypothesis strategies for I-JSON values and AAIS actions."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

MAX_SAFE_INTEGER = 2**53 - 1

# Every code point but surrogates; astral characters are drawn on purpose as well.
unicode_characters = st.characters(exclude_categories=("Cs",))
astral_characters = st.characters(min_codepoint=0x10000, max_codepoint=0x10FFFF)
strings = st.one_of(
    st.text(unicode_characters, max_size=12),
    st.text(st.one_of(astral_characters, st.sampled_from('aé€\x00\n"\\/\u2028')), max_size=6),
)
keys = strings

special_floats = st.sampled_from(
    [-0.0, 0.0, 1e21, 1e-7, 5e-324, -5e-324, 1.7976931348623157e308, 0.1, 1e16, 9007199254740993.0]
)
integers = st.one_of(
    st.sampled_from([0, 1, -1, MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER]),
    st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER),
)
floats = st.one_of(special_floats, st.floats(allow_nan=False, allow_infinity=False))
scalars = st.one_of(st.none(), st.booleans(), integers, floats, strings)


def nested(
    leaves: st.SearchStrategy[Any], member_names: st.SearchStrategy[Any]
) -> st.SearchStrategy[Any]:
    """Lists and objects of ``leaves`` (objects named by ``member_names``), nested."""
    return st.recursive(
        leaves,
        lambda children: st.one_of(
            st.lists(children, max_size=4),
            st.dictionaries(member_names, children, max_size=4),
        ),
        max_leaves=20,
    )


json_values: st.SearchStrategy[Any] = nested(scalars, keys)
arguments = st.dictionaries(keys, json_values, max_size=5)

ids = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9._:-]{0,15}\Z")
texts = st.text(unicode_characters, min_size=1, max_size=30)


@st.composite
def actions(draw: st.DrawFn) -> dict[str, Any]:
    """A schema-valid action with arbitrary I-JSON arguments and optional members."""
    action: dict[str, Any] = {
        "kind": draw(ids),
        "name": draw(ids),
        "summary": draw(texts),
        "arguments": draw(arguments),
    }
    if draw(st.booleans()):
        action["resource"] = draw(texts)
    if draw(st.booleans()):
        action["effects"] = draw(st.lists(texts, max_size=3))
    if draw(st.booleans()):
        action["presentation"] = {"redacted": True, "binding_hint": draw(texts)}
    return action

"""Ids derived from client-chosen text: injective, always valid AAIS ids."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aais_langgraph.protocol import Origin, id_for
from hostile.report import record


def _collides(left: str, right: str) -> bool:
    """Counted in the hostile-input table: a collision would let one thread's grant
    approve in another's (failed open)."""
    collided = id_for(left) == id_for(right)
    record("library", 1, failed_open=int(collided))
    return collided


# Text shaped like ids (valid ones, near-valid ones, ones wearing the digest prefix) and any text.
_ID_ALPHABET = st.sampled_from("ab01._:-/ é_x")
_TEXT = st.one_of(
    st.text(min_size=1),
    st.text(_ID_ALPHABET, min_size=1, max_size=12),
    st.text(_ID_ALPHABET, min_size=195, max_size=205),
    st.builds(lambda tail: "sha256:" + tail, st.text(st.sampled_from("0123456789abcdef"))),
)


def _valid(identifier: str) -> bool:
    return Origin.from_data({"harness": "h", "session_id": identifier}).session_id == identifier


@pytest.mark.parametrize(
    ("left", "right"),
    [
        ("alice/work", "alice work"),
        ("bobé", "bob_"),
        ("_abc", "x_abc"),
        ("p" * 200 + "-alice", "p" * 200 + "-mallory"),
    ],
)
def test_text_a_lossy_sanitiser_merged_gets_distinct_ids(left: str, right: str) -> None:
    assert not _collides(left, right)


def test_a_valid_id_is_kept_as_it_is() -> None:
    assert id_for("thread-1.a:b_c") == "thread-1.a:b_c"


def test_a_valid_id_wearing_the_digest_prefix_is_digested_too() -> None:
    digested = id_for("alice/work")
    assert digested.startswith("sha256:")
    assert id_for(digested) != digested


@settings(max_examples=500)
@given(_TEXT)
def test_every_derived_id_is_a_valid_aais_id(text: str) -> None:
    assert _valid(id_for(text))


@settings(max_examples=500)
@given(_TEXT, _TEXT)
def test_distinct_text_never_maps_to_the_same_id(left: str, right: str) -> None:
    if left != right:
        assert not _collides(left, right)

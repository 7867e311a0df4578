"""Line framing of the stdio presenter: any chunking gives the same bounded lines."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from aais_langgraph.cli.ndjson import LineFrames, encode_line, error_line


def _expected(data: bytes, limit: int) -> list[bytes | None]:
    pieces = data.split(b"\n")
    if pieces[-1] == b"":
        pieces.pop()
    return [None if len(piece) > limit else piece for piece in pieces]


@given(
    data=st.binary(max_size=300).map(lambda b: b.replace(b"\x00", b"\n")),
    cuts=st.lists(st.integers(min_value=0, max_value=300), max_size=10),
    limit=st.integers(min_value=1, max_value=40),
)
def test_any_chunking_yields_the_same_bounded_lines(
    data: bytes, cuts: list[int], limit: int
) -> None:
    frames = LineFrames(limit)
    lines: list[bytes | None] = []
    start = 0
    for cut in sorted({min(cut, len(data)) for cut in cuts}):
        lines += frames.feed(data[start:cut])
        start = cut
    lines += frames.feed(data[start:])
    lines += frames.finish()
    assert lines == _expected(data, limit)


@given(limit=st.integers(min_value=1, max_value=64), size=st.integers(min_value=0, max_value=200))
def test_an_oversized_line_is_dropped_as_it_arrives(limit: int, size: int) -> None:
    frames = LineFrames(limit)
    for _ in range(size):
        assert frames.feed(b"x") == []
        assert len(frames._buffer) <= limit
    assert frames.feed(b"\n") == [None if size > limit else b"x" * size]


def test_output_lines_are_ascii_json_and_errors_name_the_pointer() -> None:
    line = encode_line({"summary": "caf\u00e9 \u202e", "n": 1})
    assert line == '{"summary":"caf\\u00e9 \\u202e","n":1}\n' and line.isascii()
    assert error_line("aais.invalid_envelope", "/decision/scope", "m", line=3) == {
        "error": {
            "code": "aais.invalid_envelope",
            "pointer": "/decision/scope",
            "message": "m",
            "line": 3,
        }
    }

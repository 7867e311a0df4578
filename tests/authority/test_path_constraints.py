"""Path constraints compare normalised path components, never characters."""

from __future__ import annotations

import posixpath
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aais_langgraph.authority import constraints_match
from aais_langgraph.protocol import Action

from .support import action


def covered(constraints: dict[str, Any], **fields: Any) -> bool:
    return constraints_match(constraints, Action.from_data(action(**fields)))


def path_covered(prefix: Any, path: Any) -> bool:
    return covered({"argument_prefixes": {"path": prefix}}, arguments={"path": path})


@pytest.mark.parametrize(
    ("prefix", "path", "expected"),
    [
        ("/srv/a", "/srv/a", True),
        ("/srv/a", "/srv/a/b.txt", True),
        ("/srv/a/", "/srv/a/b/c", True),
        ("/srv/a", "/srv/ab", False),
        ("/srv/a", "/srv/a-evil/x", False),
        ("/srv/a", "/srv/a/../b", False),
        ("/srv/a", "/srv/a/b/../../a/c", True),
        ("/srv/a", "/srv/a/./b", True),
        ("/srv/a", "/srv//a/b", True),
        ("/srv/a", "//srv/a/b", False),
        ("/srv/a", "srv/a/b", False),
        ("/srv/a", "./srv/a", False),
        ("/srv/a", "/srv/a/b\x00", False),
        ("/srv/a", "/srv/a\\..\\..\\etc", False),
        ("/srv/a", "/srv/a\u202e/x", False),
        ("/srv/a", "/srv/a/\n/x", False),
        ("/srv/a", ["/srv/a"], False),
        ("/", "/anything/at/all", True),
        ("srv/a", "srv/a/b", False),
        ("", "/srv", False),
        ("/srv/../etc", "/etc/passwd", True),
    ],
)
def test_argument_path_prefixes(prefix: str, path: Any, expected: bool) -> None:
    assert path_covered(prefix, path) is expected


@pytest.mark.parametrize(
    ("prefix", "resource", "expected"),
    [
        ("file:///workspace/", "file:///workspace/b.js", True),
        ("file:///workspace", "file:///workspace-evil/b.js", False),
        ("file:///workspace/", "file:///workspace/../etc/shadow", False),
        ("file:///workspace/", "file:///workspace/%2e%2e/etc/shadow", False),
        ("file:///workspace/", "file:///workspace/a%2F..%2F..%2Fetc", False),
        ("file:///workspace/", "file:///workspace/a%zz", False),
        ("file:///workspace/", "file:///workspace/caf%C3%A9", True),
        ("file:///workspace/", "file:///workspace/%ff", False),
        ("https://api.example.com/v1", "https://api.example.com/v1/items?x=1", True),
        ("https://api.example.com/v1", "https://api.example.com/v10", False),
        ("https://api.example.com", "https://api.example.com.evil.org/", False),
        ("https://api.example.com", "https://api.example.com@evil.org/", False),
        ("https://api.example.com", "http://api.example.com/", False),
        ("https://api.example.com", "https://API.example.com/", False),
        ("mcp://notes/", "mcp://notes/write_note", True),
        ("mcp://notes", "mcp://notes/write_note", True),
        ("mcp://notes/", "mcp://Notes/write_note", False),
        ("mcp://notes/", "mcp://notes-evil/write_note", False),
        ("mcp://notes/", "mcp://notes%2Fevil/write_note", False),
        ("mcp://a%20b/", "mcp://a%20b/%C3%A9", True),
        ("mcp://notes/a", "mcp://notes/a%2Fb", False),
        ("mcp://notes/a%2Fb", "mcp://notes/a%2Fb", True),
        ("mcp://notes/", "mcp://notes/a%2F..%2Fb", False),
        ("mcp://notes/", "mcp://notes/%00", False),
        ("mcp://notes/", "mcp://notes/a%5C..", False),
        ("/srv", "file:///srv/x", False),
        ("/srv", "/srv/x", True),
        ("api.example.com", "api.example.com/x", False),
    ],
)
def test_resource_prefixes(prefix: str, resource: str, expected: bool) -> None:
    assert covered({"resource_prefix": prefix}, resource=resource) is expected


@pytest.mark.parametrize(
    ("directory", "expected"),
    [
        ("/workspace/example", True),
        ("/workspace/example/", True),
        ("/workspace/example/sub/..", True),
        ("/workspace/example/..", False),
        ("/workspace/example/sub", False),
        ("/workspace/examplex", False),
        ("workspace/example", False),
    ],
)
def test_working_directory_is_compared_normalised(directory: str, expected: bool) -> None:
    assert covered({"working_directory": "/workspace/example"}, working_directory=directory) is (
        expected
    )


_SEGMENT = st.sampled_from(["a", "b", "ab", "..", ".", "", "srv"])


@settings(max_examples=400)
@given(st.lists(_SEGMENT, max_size=8), st.lists(_SEGMENT, min_size=1, max_size=3))
def test_with_dot_dot_segments_the_normalised_path_decides(
    segments: list[str], prefix_segments: list[str]
) -> None:
    path = "/" + "/".join(segments)
    prefix = "/" + "/".join(prefix_segments)
    normal, normal_prefix = posixpath.normpath(path), posixpath.normpath(prefix)
    inside = not normal.startswith("//") and (
        normal_prefix == "/" or normal == normal_prefix or normal.startswith(normal_prefix + "/")
    )
    assert path_covered(prefix, path) is inside


def test_the_explanation_shows_the_normalised_place() -> None:
    from aais_langgraph.authority import explain_constraints

    assert explain_constraints({"argument_prefixes": {"path": "/srv/a/../../etc/"}}) == [
        "argument 'path' at or under '/etc'"
    ]
    assert explain_constraints({"resource_prefix": "srv/a"}) == [
        "malformed constraint(s) 'resource_prefix': the grant will never apply"
    ]

"""Paths and URLs as components: what a path, resource or directory constraint covers.

``/srv/a`` covers ``/srv/a`` and ``/srv/a/b``, never ``/srv/ab``. ``.`` and ``..``
are resolved lexically (``posixpath.normpath``) before comparing, so the
normalised path decides: ``/srv/a/../b`` is ``/srv/b``. A URL (``scheme://``)
covers by scheme, then authority compared exactly as written (``mcp://notes``
is not ``mcp://Notes``), then path components, each percent-decoded on its own
(so ``%2F`` stays inside its component, as :func:`~aais_langgraph.tools.mcp.mcp_resource`
encodes names, and ``%2E%2E`` is a ``..``). What could be read two ways never
matches: a relative path, a leading ``//``, a backslash, a NUL, control, format
(bidi) or unassigned character (encoded or not), a malformed or non-UTF-8
escape, and an encoded separator next to a dot segment (``a%2F..``).
"""

from __future__ import annotations

import posixpath
import re
import unicodedata
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import quote, unquote, urlsplit

__all__ = ["location", "location_covers", "path_parts", "show_location"]

Location = tuple[str, ...]
"""``(scheme, authority, "/", component, ...)``; scheme and authority are empty for a path."""

_ODD = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://", re.ASCII)
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})", re.ASCII)
_DOTS = frozenset({"", ".", ".."})


def _odd(text: str) -> bool:
    return "\\" in text or any(unicodedata.category(ch) in _ODD for ch in text)


def path_parts(value: Any) -> tuple[str, ...] | None:
    """Normalised components of an absolute POSIX path (``("/", "srv", "a")``), or None."""
    if not isinstance(value, str) or not value.startswith("/") or _odd(value):
        return None
    normal = posixpath.normpath(value)
    if normal.startswith("//"):  # POSIX leaves the meaning of exactly two slashes open
        return None
    return PurePosixPath(normal).parts


def _url_path_parts(path: str) -> tuple[str, ...] | None:
    """Components of a URL path, each percent-decoded on its own, dot segments resolved."""
    if (path and not path.startswith("/")) or _BAD_ESCAPE.search(path):
        return None
    components: list[str] = []
    for segment in path.split("/")[1:]:
        piece = unquote(segment, errors="strict")
        if _odd(piece) or ("/" in piece and _DOTS & set(piece.split("/"))):
            return None
        if piece == "..":
            if components:
                components.pop()
        elif piece not in ("", "."):
            components.append(piece)
    return ("/", *components)


def location(value: Any, *, prefix: bool = False) -> Location | None:
    """An absolute path or URL as comparable components, or None if it is neither or odd.

    A ``prefix`` may not carry a query or fragment (it names a place, not a request).
    """
    if not isinstance(value, str):
        return None
    if value.startswith("/"):
        parts = path_parts(value)
        return None if parts is None else ("", "", *parts)
    if _SCHEME.match(value) is None or _odd(value):
        return None
    try:
        split = urlsplit(value)
        parts = _url_path_parts(split.path)
    except (ValueError, UnicodeDecodeError):
        return None
    if parts is None or (prefix and (split.query or split.fragment)):
        return None
    return (split.scheme.lower(), split.netloc, *parts)


def location_covers(prefix: Any, value: Any) -> bool:
    """True if ``value`` is the place ``prefix`` names or lies under it, component-wise."""
    base = location(prefix, prefix=True)
    target = location(value)
    return base is not None and target is not None and target[: len(base)] == base


def show_location(value: Any) -> str | None:
    """The normalised form of a path or URL prefix, as a human should read it; None if odd."""
    parts = location(value, prefix=True)
    if parts is None:
        return None
    scheme, authority, _root, *components = parts
    if not scheme:
        return str(PurePosixPath("/", *components))
    path = "/".join(quote(component, safe="!$&'()*+,;=:@-._~") for component in components)
    return f"{scheme}://{authority}/{path}"

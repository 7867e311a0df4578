"""Paths and URLs as components: what a path, resource or directory constraint covers.

``/srv/a`` covers ``/srv/a`` and ``/srv/a/b``, never ``/srv/ab``. ``.`` and ``..``
are resolved lexically (``posixpath.normpath``) before comparing, so the
normalised path decides: ``/srv/a/../b`` is ``/srv/b``. A URL (``scheme://``)
covers by scheme, authority (host and port, exactly) and then path components,
after decoding percent escapes. What could be read two ways never matches: a
relative path, a leading ``//``, a backslash, a NUL, control, format (bidi) or
unassigned character, and in URLs an encoded separator (``%2F``, ``%5C``,
``%00``), a malformed escape or one that is not UTF-8.
"""

from __future__ import annotations

import posixpath
import re
import unicodedata
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import unquote, urlsplit

__all__ = ["location", "location_covers", "path_parts", "show_location"]

Location = tuple[str, ...]
"""``(scheme, authority, "/", component, ...)``; scheme and authority are empty for a path."""

_ODD = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://", re.ASCII)
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})|%(2[fF]|5[cC]|00)", re.ASCII)


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
        raw_path = split.path or "/"
        if _BAD_ESCAPE.search(raw_path) or "%" in split.netloc:
            return None
        parts = path_parts(unquote(raw_path, errors="strict"))
    except (ValueError, UnicodeDecodeError):
        return None
    if parts is None or (prefix and (split.query or split.fragment)):
        return None
    return (split.scheme.lower(), split.netloc.lower(), *parts)


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
    scheme, authority, *components = parts
    path = str(PurePosixPath(*components))
    return f"{scheme}://{authority}{path}" if scheme else path

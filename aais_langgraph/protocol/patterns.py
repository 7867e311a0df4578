"""The schema's string patterns, written once: compiled for the parser and anchored for
JSON Schema, so the Python check and the published ``pattern`` cannot drift apart.

Patterns use the dialect Python and ECMA-262 share. A JSON-Schema pattern ends with
:data:`END` rather than ``$``, which in Python also matches before a final newline.
"""

from __future__ import annotations

import re

__all__ = [
    "DIGEST",
    "DIGEST_PATTERN",
    "END",
    "EXTENSION_KEY",
    "EXTENSION_KEY_PATTERN",
    "ID",
    "ID_PATTERN",
    "MAX_ID_LENGTH",
    "schema_pattern",
]

MAX_ID_LENGTH = 200
"""The longest AAIS id this library emits or accepts."""

ID_PATTERN = "[A-Za-z0-9][A-Za-z0-9._:-]*"
"""An AAIS id: letters, digits and ``. _ : -``, starting with a letter or digit."""

DIGEST_PATTERN = "sha256:[0-9a-f]{64}"
"""An action digest: ``sha256:`` and 64 lowercase hex digits."""

EXTENSION_KEY_PATTERN = "(https?://|[A-Za-z0-9-]+\\.[A-Za-z0-9.-]+/)"
"""The start of a namespaced extension key: a URL or a ``domain/`` prefix."""

END = "(?![\\s\\S])"
"""End of text in every regex dialect (Python's ``$`` also matches before a final newline)."""

ID = re.compile(ID_PATTERN, re.ASCII)
DIGEST = re.compile(DIGEST_PATTERN, re.ASCII)
EXTENSION_KEY = re.compile(EXTENSION_KEY_PATTERN, re.ASCII)


def schema_pattern(pattern: str, *, whole: bool = True) -> str:
    """``pattern`` anchored for JSON Schema: the whole string, or (``whole=False``) its start,
    the way the parser applies it (``fullmatch`` / ``match``)."""
    return "^" + pattern + (END if whole else "")

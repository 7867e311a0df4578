"""Injective AAIS ids for client-chosen text (thread ids, run ids, user names).

A text that already is a valid AAIS id is its own id, so ordinary ids read as
given. Any other text (and any valid id that starts with the digest prefix)
becomes ``sha256:`` + the hex SHA-256 of its UTF-8 bytes. The two spaces are
disjoint, so distinct texts never share an id; a lossy sanitiser (replace odd
characters, cut at 200) would let ``alice/work`` and ``alice work`` share one
session, and with it every "for this session" grant.
"""

from __future__ import annotations

import hashlib

from .patterns import ID as _ID
from .patterns import MAX_ID_LENGTH

__all__ = ["DERIVED_ID_PREFIX", "MAX_ID_LENGTH", "id_for", "is_id"]

DERIVED_ID_PREFIX = "sha256:"
"""Prefix of a digest-derived id; a raw id never starts with it (such text is digested)."""


def is_id(text: str) -> bool:
    """True if ``text`` is a valid AAIS id (letters, digits and ``. _ : -``, at most 200)."""
    return 0 < len(text) <= MAX_ID_LENGTH and _ID.fullmatch(text) is not None


def id_for(text: str) -> str:
    """The AAIS id standing for ``text``: ``text`` itself when it is a valid id outside the
    digest space, otherwise :data:`DERIVED_ID_PREFIX` + hex SHA-256 of its UTF-8 bytes."""
    if is_id(text) and not text.startswith(DERIVED_ID_PREFIX):
        return text
    # surrogatepass: a lone surrogate encodes to bytes no valid string encodes to.
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return DERIVED_ID_PREFIX + digest

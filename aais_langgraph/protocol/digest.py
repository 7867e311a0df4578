"""The action digest: ``sha256:`` + hex SHA-256 of the RFC 8785 form of the action."""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import rfc8785

from .errors import AAISValidationError
from .ijson import DEFAULT_MAX_DEPTH, MAX_SAFE_INTEGER, check_ijson

if TYPE_CHECKING:
    from .parts import Action


def canonical_json(
    value: Any, *, max_depth: int = DEFAULT_MAX_DEPTH, pointer: str = "", checked: bool = False
) -> bytes:
    """RFC 8785 bytes of an I-JSON value; non-I-JSON input raises AAISValidationError.

    Args:
        value: the value to write.
        max_depth: the deepest nesting accepted.
        pointer: the JSON Pointer of ``value`` in its document (errors name it).
        checked: ``value`` passed :func:`check_ijson` already and has not changed since
            (a detached copy the caller just made), so it is not walked again; what
            ``rfc8785`` cannot write still raises AAISValidationError, without the
            walk's pointer.
    """
    if not checked:
        check_ijson(value, max_depth=max_depth, pointer=pointer)
    return _canonical(value, pointer)


_PLAIN_DEPTH = 64
_compact = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, sort_keys=True, separators=(",", ":")
).encode


def _plain(value: Any) -> bool:
    """True when ``json`` writes ``value`` exactly as RFC 8785 does, several times faster.

    That holds for plain dicts, lists, strings, booleans, null and integers in the
    I-JSON range, with ASCII object keys (for those, order by code point is order by
    UTF-16 code unit). It holds for the floats :func:`_positional` admits too: RFC
    8785 writes numbers the ECMAScript way, which for them is Python's shortest
    ``repr``. Both escape only ``"``, ``\\`` and control characters, in the same
    forms. Anything else (and deep or cyclic nesting) goes to ``rfc8785``;
    ``tests/protocol/test_canonical_fast_path.py`` checks the two agree.
    """
    return _plain_at(value, 0)


def _plain_at(value: Any, depth: int) -> bool:
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is int:
        return bool(-MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER)
    if kind is float:
        return _positional(value)
    if depth >= _PLAIN_DEPTH:
        return False
    if kind is dict:
        for key, child in value.items():
            if type(key) is not str or not key.isascii():
                return False
            if type(child) is not str and not _plain_at(child, depth + 1):
                return False
        return True
    if kind is list:
        return all(type(child) is str or _plain_at(child, depth + 1) for child in value)
    return False


def _positional(value: float) -> bool:
    """True for a float both ECMAScript and ``repr`` write as the same shortest digits
    without an exponent: not integral (``repr`` adds ``.0``), and from 1e-4 (where
    ``repr`` starts writing exponents) up to 1e16 (every float beyond 2**52 is
    integral anyway). Timestamps in epoch seconds are such floats."""
    return 1e-4 <= abs(value) < 1e16 and not value.is_integer()


def _canonical(value: Any, pointer: str) -> bytes:
    if _plain(value):
        try:
            return _compact(value).encode("utf-8")
        except (UnicodeEncodeError, RecursionError):
            pass  # a lone surrogate or deep nesting: rfc8785 gives the verdict
    try:
        return rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, RecursionError):
        raise AAISValidationError(pointer, "value cannot be canonicalized") from None


def plain_canonical(value: Any) -> bytes | None:
    """The RFC 8785 bytes of ``value`` when ``json`` writes them exactly so (plain data
    of exact JSON types: :func:`_plain`), else None (for anything else, and a lone
    surrogate). Not an I-JSON check: a comparison's fast path, for which equal bytes
    mean equal values of the same JSON types."""
    if not _plain(value):
        return None
    try:
        return _compact(value).encode("utf-8")
    except (UnicodeEncodeError, RecursionError):
        return None


def sha256_digest(value: Any, *, checked: bool = False) -> str:
    """``sha256:`` + lowercase hex of the canonical form of ``value`` (``checked`` as in
    :func:`canonical_json`)."""
    return "sha256:" + hashlib.sha256(canonical_json(value, checked=checked)).hexdigest()


def action_digest(action: Action | Mapping[str, Any]) -> str:
    """Digest that binds a decision to the exact action a human saw.

    Accepts an :class:`Action` or a plain mapping; a mapping is validated as an
    AAIS action first, so a malformed action never yields a digest.
    """
    from .parts import Action

    # Python-mode dumps keep values as they are; JSON mode would turn NaN into
    # null and an int key into a string, and digest something else.
    if isinstance(action, Action):
        # ``arguments`` is a plain dict that may have changed since the model was
        # validated, so check it again. Nesting was bounded at validation time,
        # possibly under a raised bound, so no bound here.
        content = canonical_json(action.model_dump(warnings=False), max_depth=sys.maxsize)
    else:
        # Validated just now from the caller's data, so the dump is I-JSON already
        # (and rfc8785 refuses anything else).
        return validated_action_digest(Action.from_data(action, pointer="/action"))
    return "sha256:" + hashlib.sha256(content).hexdigest()


def validated_action_digest(action: Action) -> str:
    """The digest of an action model a validation built a moment ago from plain data,
    which checked its arguments as I-JSON with nothing run since: its dump is not
    walked again (``rfc8785`` still refuses anything it cannot write)."""
    content = _canonical(action.model_dump(warnings=False), "/action")
    return "sha256:" + hashlib.sha256(content).hexdigest()


def same_action(digest: str, action: Action | Mapping[str, Any] | str) -> bool:
    """Whether ``digest`` is the digest of ``action`` (an action, or a digest already
    taken): the one comparison that binds an answer to the exact action."""
    return digest == (action if isinstance(action, str) else action_digest(action))

"""Strict I-JSON (RFC 7493) reading and checking, so nothing ambiguous reaches a digest.

Python's ``json`` module accepts duplicate keys (last wins), ``NaN`` and
``Infinity``, and lone surrogates; a digest over such input would not bind what
a human saw. Everything here rejects them with :class:`AAISValidationError`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from itertools import accumulate
from typing import Any

from .errors import AAISValidationError, join_pointer

MAX_SAFE_INTEGER = 2**53 - 1
DEFAULT_MAX_DEPTH = 32
DEFAULT_MAX_BYTES = 1_000_000

# JSON strings (so brackets inside them do not count) and then everything but brackets.
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_BRACKET_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


class _DuplicateKeyObject(dict):  # type: ignore[type-arg]
    """A decoded JSON object that repeated ``duplicate``; found again to name its location."""

    duplicate: str


def _object_hook(found: list[bool]) -> Any:
    """An ``object_pairs_hook`` that marks objects with a repeated key and notes it in ``found``."""

    def pairs_to_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = dict(pairs)
        if len(result) == len(pairs):
            return result
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                marked = _DuplicateKeyObject(result)
                marked.duplicate = key
                found.append(True)
                return marked
            seen.add(key)
        raise AssertionError("unreachable: a shorter dict implies a repeated key")

    return pairs_to_object


def _raise_duplicate(value: Any) -> None:
    """Raise at the first repeated member of ``value`` if the decoder marked one."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, where = stack.pop()
        if isinstance(item, _DuplicateKeyObject):
            raise AAISValidationError(
                join_pointer(where, item.duplicate), "duplicate object key in JSON text"
            )
        if isinstance(item, dict):
            stack.extend((child, join_pointer(where, key)) for key, child in item.items())
        elif isinstance(item, list):
            stack.extend((child, join_pointer(where, index)) for index, child in enumerate(item))


def _check_text_depth(text: str, max_depth: int) -> None:
    """Refuse deep nesting before the recursive decoder sees it."""
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    if brackets and max(accumulate(map(_BRACKET_STEP.__getitem__, brackets))) > max_depth:
        raise AAISValidationError("", f"nesting deeper than {max_depth} levels")


def loads_strict(
    data: str | bytes,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> Any:
    """Decode JSON text as I-JSON: UTF-8, no duplicate keys, no NaN, bounded size and depth."""
    if isinstance(data, (bytes, bytearray)):
        if len(data) > max_bytes:
            raise AAISValidationError("", f"document larger than {max_bytes} bytes")
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError:
            raise AAISValidationError("", "JSON text is not valid UTF-8") from None
    elif isinstance(data, str):
        text = data
        if len(text) > max_bytes or len(text.encode("utf-8", "surrogatepass")) > max_bytes:
            raise AAISValidationError("", f"document larger than {max_bytes} bytes")
    else:
        raise AAISValidationError("", "JSON text must be str or bytes")
    _check_text_depth(text, max_depth)
    duplicates: list[bool] = []
    try:
        # NaN and Infinity decode to non-finite floats and huge numbers to inf or big
        # ints; check_ijson below rejects them with their location.
        value = json.loads(text, object_pairs_hook=_object_hook(duplicates))
    except (ValueError, RecursionError):
        raise AAISValidationError("", "not well-formed JSON text") from None
    if duplicates:
        _raise_duplicate(value)
    check_ijson(value, max_depth=max_depth)
    return value


def check_unique_keys(data: str | bytes) -> None:
    """Raise at the first repeated object key anywhere in JSON text (RFC 8259 leaves its
    meaning open, and Python and pydantic silently keep the last one).

    Only duplicates are checked: a document that carries AAIS envelopes among other
    data (an AG-UI run body) is refused here before any decoder can pick a member;
    the envelopes are held to I-JSON when they are parsed. Text that is not JSON at
    all raises too.
    """
    duplicates: list[bool] = []
    try:
        value = json.loads(data, object_pairs_hook=_object_hook(duplicates))
    except (ValueError, RecursionError):
        raise AAISValidationError("", "not well-formed JSON text") from None
    if duplicates:
        _raise_duplicate(value)


def _valid_string(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _valid_scalar(item: Any) -> bool | None:
    """True/False for a valid/invalid JSON scalar, None for anything else."""
    kind = type(item)
    if kind is str:
        return item.isascii() or _valid_string(item)
    if kind is bool or item is None:
        return True
    if kind is int:
        return bool(-MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER)
    if kind is float:
        return math.isfinite(item)
    return None


def _is_ijson(value: Any, max_depth: int) -> bool:
    """Fast acceptance test; pointers are only worked out when it says no.

    Exact types only: subclasses (IntEnum, OrderedDict), tuples and other mappings
    make it say no, and the thorough walk decides. The scalar checks of
    :func:`_valid_scalar` are written out in the loop over a container's members,
    which is where nearly all of a document's values are met."""
    low, high, finite = -MAX_SAFE_INTEGER, MAX_SAFE_INTEGER, math.isfinite
    stack: list[tuple[Any, int]] = [(value, 0)]
    push, pop = stack.append, stack.pop
    while stack:
        item, depth = pop()
        kind = type(item)
        if kind is dict:
            if depth >= max_depth:
                return False
            for key in item:
                if type(key) is not str or not (key.isascii() or _valid_string(key)):
                    return False
            members: Any = item.values()
        elif kind is list:
            if depth >= max_depth:
                return False
            members = item
        else:
            if not _valid_scalar(item):  # None (another type) or False
                return False
            continue
        depth += 1
        for child in members:
            kind = type(child)
            if kind is str:
                if not (child.isascii() or _valid_string(child)):
                    return False
            elif kind is dict or kind is list:
                push((child, depth))
            elif kind is int:
                if not low <= child <= high:
                    return False
            elif kind is float:
                if not finite(child):
                    return False
            elif not (kind is bool or child is None):
                return False
    return True


def check_ijson(value: Any, *, max_depth: int = DEFAULT_MAX_DEPTH, pointer: str = "") -> None:
    """Raise unless ``value`` is plain I-JSON data (dict/list/str/int/float/bool/None).

    Integers must lie within +/-(2**53-1), floats must be finite, object keys must
    be strings, strings must be valid Unicode, and nesting is bounded.
    """
    if not _is_ijson(value, max_depth):
        _locate_violation(value, max_depth, pointer)


class _NotPlain(Exception):
    """Raised inside :func:`_plain_copy` at the first item it cannot copy as it is."""


def _plain_copy(value: Any, depth: int, max_depth: int) -> Any:
    """A copy of exact-typed I-JSON data (new dicts and lists, immutable scalars shared);
    raises :class:`_NotPlain` at anything else (the thorough walk then decides). Depth is
    bounded by ``max_depth`` before each descent, so the recursion is too."""
    kind = type(value)
    if kind is dict:
        if depth >= max_depth:
            raise _NotPlain
        copied: dict[str, Any] = {}
        for key, child in value.items():
            if type(key) is not str or not (key.isascii() or _valid_string(key)):
                raise _NotPlain
            child_kind = type(child)
            if child_kind is dict or child_kind is list:
                copied[key] = _plain_copy(child, depth + 1, max_depth)
            elif _valid_scalar(child):
                copied[key] = child
            else:
                raise _NotPlain
        return copied
    if kind is list:
        if depth >= max_depth:
            raise _NotPlain
        items: list[Any] = []
        for child in value:
            child_kind = type(child)
            if child_kind is dict or child_kind is list:
                items.append(_plain_copy(child, depth + 1, max_depth))
            elif _valid_scalar(child):
                items.append(child)
            else:
                raise _NotPlain
        return items
    if _valid_scalar(value):
        return value
    raise _NotPlain


def ijson_copy(value: Any, *, max_depth: int = DEFAULT_MAX_DEPTH, pointer: str = "") -> Any:
    """A detached plain-JSON copy of I-JSON data, checked as :func:`check_ijson` checks it.

    The copy equals a round trip through JSON text: dicts and lists are new, strings,
    numbers, booleans and null shared (they are immutable). Exact-typed data is checked
    and copied in one walk; anything else (a mapping or sequence of another type, a
    subclass of a scalar) goes through :func:`check_ijson`, which raises with the
    location, and then through JSON text, which turns it into plain data.
    """
    try:
        return _plain_copy(value, 0, max_depth)
    except _NotPlain:
        pass
    check_ijson(value, max_depth=max_depth, pointer=pointer)
    return json.loads(json.dumps(value, ensure_ascii=False, allow_nan=False))


def _locate_violation(value: Any, max_depth: int, pointer: str) -> None:
    """The thorough walk: raise at the first violation in document order, with its pointer."""
    # Iterative walk: adversarial depth must not hit Python's recursion limit.
    stack: list[tuple[Any, str, int]] = [(value, pointer, 0)]
    while stack:
        item, where, depth = stack.pop()
        if isinstance(item, bool) or item is None:
            continue
        if isinstance(item, int):
            if not -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
                raise AAISValidationError(where, "integer outside the I-JSON range +/-(2**53-1)")
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise AAISValidationError(where, "NaN and infinities are not I-JSON")
        elif isinstance(item, str):
            if not _valid_string(item):
                raise AAISValidationError(where, "string contains a lone surrogate")
        elif isinstance(item, Mapping):
            if depth >= max_depth:
                raise AAISValidationError(where, f"nesting deeper than {max_depth} levels")
            members = []
            for key, child in item.items():
                if not isinstance(key, str):
                    raise AAISValidationError(where, "object keys must be strings")
                if not _valid_string(key):
                    raise AAISValidationError(where, "object key contains a lone surrogate")
                members.append((child, join_pointer(where, key), depth + 1))
            stack.extend(reversed(members))
        elif isinstance(item, (list, tuple)):
            if depth >= max_depth:
                raise AAISValidationError(where, f"nesting deeper than {max_depth} levels")
            stack.extend(
                (child, join_pointer(where, index), depth + 1)
                for index, child in reversed(list(enumerate(item)))
            )
        else:
            raise AAISValidationError(where, "value is not a JSON type")

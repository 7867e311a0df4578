"""The action digest: ``sha256:`` + hex SHA-256 of the RFC 8785 form of the action."""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import rfc8785

from .errors import AAISValidationError
from .ijson import DEFAULT_MAX_DEPTH, check_ijson

if TYPE_CHECKING:
    from .parts import Action


def canonical_json(value: Any, *, max_depth: int = DEFAULT_MAX_DEPTH, pointer: str = "") -> bytes:
    """RFC 8785 bytes of an I-JSON value; non-I-JSON input raises AAISValidationError."""
    check_ijson(value, max_depth=max_depth, pointer=pointer)
    return _canonical(value, pointer)


def _canonical(value: Any, pointer: str) -> bytes:
    try:
        return rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, RecursionError):
        raise AAISValidationError(pointer, "value cannot be canonicalized") from None


def sha256_digest(value: Any) -> str:
    """``sha256:`` + lowercase hex of the canonical form of ``value``."""
    return "sha256:" + hashlib.sha256(canonical_json(value)).hexdigest()


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
        model = Action.from_data(action, pointer="/action")
        content = _canonical(model.model_dump(warnings=False), "/action")
    return "sha256:" + hashlib.sha256(content).hexdigest()

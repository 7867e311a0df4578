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

    model = action if isinstance(action, Action) else Action.from_data(action, pointer="/action")
    # The model bounded its nesting when it was validated (possibly under a raised
    # bound); the content is checked again because ``arguments`` is a mutable dict.
    content = canonical_json(model.model_dump(mode="json"), max_depth=sys.maxsize)
    return "sha256:" + hashlib.sha256(content).hexdigest()

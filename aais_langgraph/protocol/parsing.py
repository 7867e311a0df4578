"""Strict parsing of AAIS envelopes from JSON text, bytes, mappings or models."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, overload

from pydantic import BaseModel

from .envelopes import ENVELOPE_TYPES, AnyEnvelope, Envelope
from .errors import AAISValidationError
from .ijson import DEFAULT_MAX_BYTES, DEFAULT_MAX_DEPTH, check_ijson, loads_strict

E = TypeVar("E", bound=Envelope)


@overload
def parse_envelope(
    data: str | bytes | Mapping[str, Any] | BaseModel,
    *,
    expected: type[E],
    max_bytes: int = ...,
    max_depth: int = ...,
) -> E: ...


@overload
def parse_envelope(
    data: str | bytes | Mapping[str, Any] | BaseModel,
    *,
    expected: None = None,
    max_bytes: int = ...,
    max_depth: int = ...,
) -> AnyEnvelope: ...


def parse_envelope(
    data: str | bytes | Mapping[str, Any] | BaseModel,
    *,
    expected: type[Envelope] | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> Envelope:
    """Parse one AAIS 1.0 envelope strictly, or raise :class:`AAISValidationError`.

    JSON text is read as I-JSON (no duplicate keys, NaN, huge integers, lone
    surrogates), bounded by ``max_bytes`` and ``max_depth``. ``expected`` narrows
    the accepted envelope type. An envelope model passes through unchanged.

    Args:
        data: JSON text, a JSON object or an envelope model.
        expected: the one envelope type accepted (None: any AAIS 1.0 envelope).
        max_bytes: the longest JSON text read.
        max_depth: the deepest nesting read.
    """
    if isinstance(data, Envelope):
        document: Any = data
    elif isinstance(data, (str, bytes, bytearray)):
        document = loads_strict(data, max_bytes=max_bytes, max_depth=max_depth)
    elif isinstance(data, (Mapping, BaseModel)):
        # Python mode keeps values as they are; JSON mode would turn NaN into null.
        document = data.model_dump(warnings=False) if isinstance(data, BaseModel) else data
        check_ijson(document, max_depth=max_depth)
    else:
        raise AAISValidationError("", "expected JSON text or a JSON object")
    if isinstance(document, Envelope):
        model_type: type[Envelope] = type(document)
    else:
        if not isinstance(document, Mapping):
            raise AAISValidationError("", "an envelope must be a JSON object")
        kind = document.get("type")
        if not isinstance(kind, str) or kind not in ENVELOPE_TYPES:
            raise AAISValidationError("/type", "not an AAIS 1.0 envelope type")
        model_type = ENVELOPE_TYPES[kind]
    if expected is not None and model_type is not expected:
        names = {cls: name for name, cls in ENVELOPE_TYPES.items()}
        raise AAISValidationError("/type", f"expected an {names.get(expected, 'other')} envelope")
    if isinstance(document, Envelope):
        return document
    return model_type.from_data(document, max_depth=max_depth)

"""JSON Schema of the ``approval.decided`` envelopes that can answer one request.

Clients build answer forms from it (LangGraph's ``response_schema``, AG-UI's
``Interrupt.response_schema``): ``request_id`` and ``action_digest`` are
constants and ``(decision, scope)`` is one of the offered pairs, so a form
built from it cannot invent a scope.

The schema states every rule the parser applies to such an envelope, so a
document validates exactly when it parses, except the rules of the JSON text
itself (I-JSON: integers within +/-(2**53-1) and written as integers, no lone
surrogates, no duplicate keys, nesting within the server's bound), which JSON
Schema cannot express. The patterns are the parser's own (:mod:`.patterns`),
anchored for JSON Schema.
"""

from __future__ import annotations

from typing import Any

from .builders import AAIS_VERSION
from .ijson import MAX_SAFE_INTEGER
from .parts import Request
from .patterns import EXTENSION_KEY_PATTERN, ID_PATTERN, MAX_ID_LENGTH, schema_pattern
from .timestamps import RFC3339_PATTERN

_ID_PATTERN = schema_pattern(ID_PATTERN)
_TIMESTAMP_PATTERN = schema_pattern(RFC3339_PATTERN)
_EXTENSION_KEY_PATTERN = schema_pattern(EXTENSION_KEY_PATTERN, whole=False)

# Every schema below is built from fresh literals on each call, so a caller may change
# the document it got without changing the next one (and nothing needs a deep copy).


def _id() -> dict[str, Any]:
    return {"type": "string", "minLength": 1, "maxLength": MAX_ID_LENGTH, "pattern": _ID_PATTERN}


def _timestamp() -> dict[str, Any]:
    return {"type": "string", "format": "date-time", "pattern": _TIMESTAMP_PATTERN}


def _extensions() -> dict[str, Any]:
    return {"type": "object", "propertyNames": {"pattern": _EXTENSION_KEY_PATTERN}}


def _actor() -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["id", "type"],
        "properties": {
            "id": _id(),
            "type": {"enum": ["human", "policy"]},
            "display_name": {"type": "string", "minLength": 1, "maxLength": 200},
            "authenticated_by": {"type": "string", "minLength": 1, "maxLength": 200},
        },
        "additionalProperties": False,
    }


def envelope_schema(kind: str, member: str, body: dict[str, Any]) -> dict[str, Any]:
    """An AAIS envelope of type ``kind`` whose payload ``member`` matches ``body``; a
    fresh document every time, holding ``body`` itself."""
    return {
        "type": "object",
        "required": ["aais", "type", "id", "occurred_at", "sequence", member],
        "properties": {
            "aais": {"const": AAIS_VERSION},
            "type": {"const": kind},
            "id": _id(),
            "occurred_at": _timestamp(),
            "sequence": {"type": "integer", "minimum": 0, "maximum": MAX_SAFE_INTEGER},
            "stream": _id(),
            "extensions": _extensions(),
            member: body,
        },
        "additionalProperties": False,
    }


def decided_schema(request: Request) -> dict[str, Any]:
    """JSON Schema of an ``approval.decided`` envelope that can answer ``request``."""
    decision: dict[str, Any] = {
        "type": "object",
        "required": [
            "id",
            "request_id",
            "action_digest",
            "decided_at",
            "decision",
            "scope",
            "actor",
        ],
        "properties": {
            "id": _id(),
            "request_id": {"const": request.id},
            "action_digest": {"const": request.action_digest},
            "decided_at": _timestamp(),
            "decision": {"enum": sorted({c.decision for c in request.choices})},
            "scope": {"enum": sorted({c.scope for c in request.choices})},
            "actor": _actor(),
            "extensions": _extensions(),
        },
        "oneOf": [
            {
                "title": choice.label,
                "properties": {
                    "decision": {"const": choice.decision},
                    "scope": {"const": choice.scope},
                },
            }
            for choice in request.choices
        ],
        "additionalProperties": False,
    }
    return envelope_schema("approval.decided", "decision", decision)

"""The resume value a gate accepts, as a pydantic type LangGraph validates for us.

LangGraph validates a resume value against a pydantic ``response_schema`` and, on
mismatch, raises without saving anything, so the interrupt stays pending. The
type accepts only an ``approval.decided`` for this request id and digest with an
offered (decision, scope) pair, or an ``approval.resolved`` notice for this
request (used when the decision was recorded elsewhere, e.g. a cancel).

LangGraph builds a ``TypeAdapter`` of the type on every ``interrupt()`` call (the
first run and every resume), so the type is an ``Annotated`` union of the two
envelope models, whose schemas pydantic has already built, plus a check bound to
the request: building it costs a fraction of a millisecond, where creating
pydantic models per request cost several. The JSON Schema surfaced to clients is
precomputed once and specialised per request with ``const``/``anyOf`` constraints.
"""

from __future__ import annotations

import functools
import json
from typing import Annotated, Any, Union

from pydantic import AfterValidator, BaseModel, BeforeValidator, Field, TypeAdapter, WithJsonSchema

from ..protocol import ApprovalDecided, ApprovalResolved, Request

_Envelopes = Annotated[Union[ApprovalDecided, ApprovalResolved], Field(discriminator="type")]  # noqa: UP007


def _plain_model(data: Any) -> Any:
    """Let callers resume with any envelope model as well as a plain dict."""
    if isinstance(data, BaseModel) and not isinstance(data, (ApprovalDecided, ApprovalResolved)):
        return data.model_dump(mode="json")
    return data


def _check_answer(
    request_id: str, digest: str, offered: frozenset[tuple[str, str]], value: Any
) -> Any:
    """Bind the answer to this request; messages never echo the submitted values."""
    if isinstance(value, ApprovalDecided):
        decision = value.decision
        if decision.request_id != request_id:
            raise ValueError("decision.request_id: the decision is for another request")
        if decision.action_digest != digest:
            raise ValueError("decision.action_digest: does not match the requested action")
        if (decision.decision, decision.scope) not in offered:
            raise ValueError("decision: this decision and scope were not offered")
        return value
    if isinstance(value, ApprovalResolved) and value.resolution.request_id == request_id:
        return value
    raise ValueError("resolution.request_id: the resolution is for another request")


def _inline(node: Any, definitions: dict[str, Any]) -> Any:
    """Replace local ``$ref``s by their definitions (the envelope schemas are not recursive)."""
    if isinstance(node, dict):
        reference = node.get("$ref")
        if isinstance(reference, str) and reference.startswith("#/$defs/"):
            return _inline(definitions[reference.removeprefix("#/$defs/")], definitions)
        return {key: _inline(value, definitions) for key, value in node.items()}
    if isinstance(node, list):
        return [_inline(item, definitions) for item in node]
    return node


@functools.lru_cache(maxsize=1)
def _base_schema_text() -> str:
    # Self-contained (no $defs): pydantic re-reads ``$ref``s inside WithJsonSchema.
    generated = TypeAdapter(_Envelopes).json_schema()
    definitions = generated.pop("$defs")
    return json.dumps(
        {
            "oneOf": _inline(generated["oneOf"], definitions),
            "discriminator": {"propertyName": "type"},
        }
    )


def response_json_schema(request: Request) -> dict[str, Any]:
    """JSON Schema of the answers ``request`` accepts (a fresh dict each call)."""
    schema: dict[str, Any] = json.loads(_base_schema_text())
    decided, resolved = schema["oneOf"]
    decision = decided["properties"]["decision"]
    decision["properties"]["request_id"]["const"] = request.id
    decision["properties"]["action_digest"]["const"] = request.action_digest
    decision["anyOf"] = [
        {
            "properties": {
                "decision": {"const": choice.decision},
                "scope": {"const": choice.scope},
            }
        }
        for choice in request.choices
    ]
    resolved["properties"]["resolution"]["properties"]["request_id"]["const"] = request.id
    return schema


def response_type(request: Request) -> Any:
    """A pydantic type matching exactly the answers this request can take."""
    offered = frozenset((choice.decision, choice.scope) for choice in request.choices)
    check = functools.partial(_check_answer, request.id, request.action_digest, offered)
    return Annotated[  # type: ignore[valid-type]
        _Envelopes,
        BeforeValidator(_plain_model),
        AfterValidator(check),
        WithJsonSchema(response_json_schema(request)),
    ]

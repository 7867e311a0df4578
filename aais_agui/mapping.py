"""AAIS envelopes <-> AG-UI 1.0 interrupts and resume entries, as pure functions.

An ``approval.requested`` envelope becomes one :class:`ag_ui.core.Interrupt`
(the complete envelope under ``metadata.aais``); the answer comes back as a
:class:`ag_ui.core.ResumeEntry` carrying an ``approval.decided`` envelope as its
``payload`` (what the interrupt's ``response_schema`` describes), wrapped as
``payload.aais``, or under ``metadata.aais`` (the AAIS integration guide's place).
Every malformed shape raises :class:`AAISValidationError` with a JSON pointer
and a reason that never echoes the offending value.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, TypeVar

from ag_ui.core import Interrupt, ResumeEntry
from pydantic import ValidationError

from aais_langgraph.authority import judge
from aais_langgraph.protocol import (
    TOOL_CALL_ID_EXTENSION,
    AAISValidationError,
    ApprovalDecided,
    ApprovalRequested,
    Request,
    decided_schema,
    join_pointer,
    parse_envelope,
)
from aais_langgraph.threads import Cancellation

METADATA_KEY = "aais"
"""Key of the AAIS envelope inside ``Interrupt.metadata`` / ``ResumeEntry.metadata``."""

TOOL_CALL_EXTENSION = TOOL_CALL_ID_EXTENSION
"""Request extension naming the LangChain tool call a tool approval gates."""

E = TypeVar("E", ApprovalRequested, ApprovalDecided)

APPROVAL_REASON = "aais:approval"
TOOL_CALL_REASON = "tool_call"

__all__ = [
    "APPROVAL_REASON",
    "METADATA_KEY",
    "TOOL_CALL_EXTENSION",
    "TOOL_CALL_REASON",
    "carries_aais",
    "decided_response_schema",
    "interrupt_to_request",
    "is_approval_request",
    "parse_resume_entry",
    "request_to_interrupt",
    "resume_entry_for",
    "run_agent_input",
    "tool_call_id_of",
]


def is_approval_request(value: Any) -> bool:
    """True when a LangGraph interrupt value looks like an ``approval.requested`` envelope."""
    return isinstance(value, Mapping) and value.get("type") == "approval.requested"


def carries_aais(item: Interrupt | ResumeEntry) -> bool:
    """True when an AG-UI interrupt offers an AAIS approval, or a resume entry carries an
    AAIS answer (``metadata.aais``, or a ``payload`` with an ``aais`` member): what only the
    resume planner may turn into a resume."""
    metadata = item.metadata
    if isinstance(metadata, Mapping) and METADATA_KEY in metadata:
        return True
    payload = item.payload if isinstance(item, ResumeEntry) else None
    return isinstance(payload, Mapping) and METADATA_KEY in payload


def tool_call_id_of(request: Request) -> str | None:
    """The gated tool call's id from the request's extensions, if it gates one."""
    extensions = request.extensions or {}
    if TOOL_CALL_EXTENSION not in extensions:
        return None
    value = extensions[TOOL_CALL_EXTENSION]
    if not isinstance(value, str) or not value:
        raise AAISValidationError(
            join_pointer("/request/extensions", TOOL_CALL_EXTENSION), "must be a non-empty string"
        )
    return value


def decided_response_schema(request: Request) -> dict[str, Any]:
    """JSON Schema of the ``ResumeEntry.payload`` values that answer ``request``.

    Exactly what :func:`parse_resume_entry` accepts as a payload: the
    ``approval.decided`` envelope itself, or ``{"aais": envelope}``. In both,
    ``request_id`` and ``action_digest`` are constants and ``(decision, scope)``
    is one of the offered pairs, so a form built from it cannot invent a scope.
    """
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "AAIS approval.decided",
        "description": "An approval.decided envelope answering this request with an offered "
        'choice, sent as the resume payload itself or wrapped as {"aais": envelope}.',
        "oneOf": [
            {"$ref": "#/$defs/decided"},
            {
                "type": "object",
                "required": [METADATA_KEY],
                "properties": {METADATA_KEY: {"$ref": "#/$defs/decided"}},
                "additionalProperties": False,
            },
        ],
        "$defs": {"decided": decided_schema(request)},
    }


def request_to_interrupt(
    requested: ApprovalRequested | Mapping[str, Any], *, interrupt_id: str
) -> Interrupt:
    """The AG-UI interrupt for one pending request, answered by ``interrupt_id``.

    ``interrupt_id`` is the LangGraph ``Interrupt.id``; the resume entry must name it.
    """
    if not isinstance(interrupt_id, str) or not interrupt_id:
        raise AAISValidationError("/interrupt_id", "must be a non-empty string")
    envelope = parse_envelope(requested, expected=ApprovalRequested)
    request = envelope.request
    tool_call_id = tool_call_id_of(request)
    return Interrupt(
        id=interrupt_id,
        reason=APPROVAL_REASON if tool_call_id is None else TOOL_CALL_REASON,
        message=request.action.summary,
        tool_call_id=tool_call_id,
        response_schema=decided_response_schema(request),
        expires_at=request.expires_at,
        metadata={METADATA_KEY: envelope.to_json()},
    )


def interrupt_to_request(interrupt: Interrupt | Mapping[str, Any]) -> ApprovalRequested:
    """Read the ``approval.requested`` envelope back out of an AG-UI interrupt."""
    model = _model(Interrupt, interrupt, "")
    metadata = model.metadata
    if not isinstance(metadata, Mapping) or METADATA_KEY not in metadata:
        raise AAISValidationError("/metadata/aais", "an approval.requested envelope is required")
    return _envelope(metadata[METADATA_KEY], ApprovalRequested, "/metadata/aais")


def resume_entry_for(
    decided: ApprovalDecided | Mapping[str, Any], *, interrupt_id: str
) -> ResumeEntry:
    """The resume entry that answers ``interrupt_id`` with a decision (client-side helper)."""
    envelope = parse_envelope(decided, expected=ApprovalDecided)
    return ResumeEntry(
        interrupt_id=interrupt_id,
        status="resolved",
        metadata={METADATA_KEY: envelope.to_json()},
    )


def run_agent_input(
    thread_id: str, *, text: str | None = None, resume: Any = None
) -> dict[str, Any]:
    """An AG-UI ``RunAgentInput`` in its wire form: a user message, or a resume
    (a list of resume entries as JSON) for the thread's open interrupts (client-side helper)."""
    body: dict[str, Any] = {
        "threadId": thread_id,
        "runId": f"run_{uuid.uuid4().hex}",
        "messages": []
        if text is None
        else [{"id": f"u_{uuid.uuid4().hex}", "role": "user", "content": text}],
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    if resume is not None:
        body["resume"] = resume
    return body


def parse_resume_entry(
    entry: ResumeEntry | Mapping[str, Any],
    *,
    request: Request | None = None,
    pointer: str = "",
) -> ApprovalDecided | Cancellation:
    """The AAIS answer carried by a resume entry.

    ``status: "resolved"`` needs an ``approval.decided`` envelope: the
    ``payload`` itself (its ``aais`` is the version string), ``payload.aais``
    (an object; nothing else beside it), or ``metadata.aais``; when payload and
    metadata both carry one they must agree. ``status: "cancelled"`` is an AAIS
    cancel of ``request`` (an envelope, if any, must still name that request).
    With ``request`` given, the decision must name it. Digest, choice and expiry
    are the authority's to judge.
    """
    model = _model(ResumeEntry, entry, pointer)
    from_metadata = _member(model.metadata, pointer + "/metadata")
    from_payload = _payload_envelope(model.payload, pointer + "/payload", model.status)
    if (
        from_metadata is not None
        and from_payload is not None
        and from_metadata[0] != from_payload[0]
    ):
        raise AAISValidationError(
            from_payload[1], "disagrees with metadata.aais; send one envelope"
        )
    found = from_metadata if from_metadata is not None else from_payload
    raw, where = found if found is not None else (None, pointer + "/metadata/aais")
    if model.status == "cancelled":
        return _cancellation(model, raw, where, request, pointer)
    if raw is None:
        raise AAISValidationError(
            pointer + "/payload",
            "an approval.decided envelope is required (the payload, payload.aais or metadata.aais)",
        )
    decided: ApprovalDecided = _envelope(raw, ApprovalDecided, where)
    _check_names(decided, request, where)
    return decided


def _check_names(decided: ApprovalDecided, request: Request | None, where: str) -> None:
    """The judgement's first rule, at parse time: the decision names this interrupt's
    request (the others are the resume planner's, which answers each in its code)."""
    if request is None:
        return
    verdict = judge(request, decided.decision, now=None, expires_at=None)
    if verdict.rule == "request":
        raise AAISValidationError(
            where + verdict.pointer, "does not name the request of this interrupt"
        )


def _cancellation(
    model: ResumeEntry,
    raw: Any,
    where: str,
    request: Request | None,
    pointer: str,
) -> Cancellation:
    request_id = request.id if request is not None else None
    if raw is not None:
        decided = _envelope(raw, ApprovalDecided, where)
        _check_names(decided, request, where)
        request_id = decided.decision.request_id
    if request_id is None:
        raise AAISValidationError(
            pointer + "/interrupt_id", "a cancelled entry must answer a known approval request"
        )
    reason = None
    if isinstance(model.payload, Mapping) and "reason" in model.payload:
        candidate = model.payload["reason"]
        if not isinstance(candidate, str) or not 0 < len(candidate) <= 2000:
            raise AAISValidationError(pointer + "/payload/reason", "must be 1 to 2000 characters")
        reason = candidate
    return Cancellation(request_id=request_id, reason=reason)


def _member(container: Any, where: str) -> tuple[Any, str] | None:
    """``(metadata["aais"], its pointer)`` when the metadata object has it."""
    if container is None:
        return None
    if not isinstance(container, Mapping):
        raise AAISValidationError(where, "must be a JSON object")
    if METADATA_KEY not in container:
        return None
    if not isinstance(container[METADATA_KEY], Mapping):
        raise AAISValidationError(where + "/aais", "must be an approval.decided envelope")
    return container[METADATA_KEY], where + "/aais"


def _payload_envelope(payload: Any, where: str, status: str) -> tuple[Any, str] | None:
    """The envelope a payload carries: itself when its ``aais`` is the version string,
    ``payload.aais`` when that is an object; None when it has no ``aais`` member."""
    if not isinstance(payload, Mapping) or METADATA_KEY not in payload:
        return None
    version = payload[METADATA_KEY]
    if isinstance(version, str):
        return payload, where
    if not isinstance(version, Mapping):
        raise AAISValidationError(
            where + "/aais",
            'must be an approval.decided envelope (an object) or the version "1.0" of the '
            "envelope the payload is",
        )
    allowed = {METADATA_KEY, "reason"} if status == "cancelled" else {METADATA_KEY}
    for key in payload:
        if key not in allowed:
            raise AAISValidationError(
                join_pointer(where, key) if isinstance(key, str) else where,
                'not allowed beside "aais"; send the envelope, or {"aais": envelope}',
            )
    return version, where + "/aais"


def _envelope(raw: Any, expected: type[E], where: str) -> E:
    if not isinstance(raw, Mapping):
        raise AAISValidationError(where, "must be a JSON object (an AAIS envelope)")
    try:
        return parse_envelope(raw, expected=expected)
    except AAISValidationError as error:
        raise AAISValidationError(where + error.pointer, error.reason) from None


def _model(cls: type[Any], value: Any, pointer: str) -> Any:
    """Validate an AG-UI model from a model or its wire (camelCase) mapping."""
    if isinstance(value, cls):
        return value
    if not isinstance(value, Mapping):
        raise AAISValidationError(pointer, "expected a JSON object")
    try:
        return cls.model_validate(dict(value))
    except ValidationError as error:
        first = error.errors(include_input=False, include_url=False)[0]
        location = join_pointer(pointer, *(str(part) for part in first["loc"]))
        raise AAISValidationError(location, first["msg"]) from None

"""AAIS envelopes <-> AG-UI 1.0 interrupts and resume entries, as pure functions.

An ``approval.requested`` envelope becomes one :class:`ag_ui.core.Interrupt`
(the complete envelope under ``metadata.aais``, the contract; the action digest as
the approval-bound fingerprint AG-UI's interrupts page proposes,
``metadata.governance.actionFingerprint``). The answer comes back as a
:class:`ag_ui.core.ResumeEntry` whose ``payload`` is one of what the interrupt's
``response_schema`` describes:

- the bound answer a client that knows nothing of AAIS can build from the schema and
  the fingerprint alone, ``{"approved": true | false, "approvedActionFingerprint":
  <fingerprint>}`` (:class:`BoundAnswer`; the resume planner makes it the AAIS
  decision of the authenticated actor, with the echoed fingerprint as its
  ``action_digest``, so a drifted echo is refused as any digest mismatch is);
- an ``approval.decided`` envelope, or ``{"aais": envelope}``;

or the envelope comes under ``metadata.aais`` (the AAIS integration guide's place).
Every malformed shape raises :class:`AAISValidationError` with a JSON pointer
and a reason that never echoes the offending value.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from ag_ui.core import Interrupt, ResumeEntry
from pydantic import ValidationError

from aais_langgraph.authority import judge
from aais_langgraph.protocol import (
    DIGEST_PATTERN,
    TOOL_CALL_ID_EXTENSION,
    AAISValidationError,
    Actor,
    ApprovalDecided,
    ApprovalRequested,
    Choice,
    Request,
    build_decision_for_request,
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

GOVERNANCE_KEY = "governance"
"""Key of the approval-bound action metadata inside ``Interrupt.metadata`` (AG-UI's
interrupts page, "Approval-bound action metadata": an open proposal)."""

FINGERPRINT_KEY = "actionFingerprint"
"""``metadata.governance.actionFingerprint``: the fingerprint of the proposed action,
which is the request's ``action_digest``."""

APPROVED_KEY = "approved"
"""The bound answer's yes or no (``ResumeEntry.payload.approved``)."""

ECHO_KEY = "approvedActionFingerprint"
"""The bound answer's echo of the fingerprint it approves or denies."""

#: The scopes a bound answer may take, narrowest first: it takes the narrowest offered.
BOUND_SCOPES = ("once", "session", "persistent")

__all__ = [
    "APPROVAL_REASON",
    "APPROVED_KEY",
    "ECHO_KEY",
    "FINGERPRINT_KEY",
    "GOVERNANCE_KEY",
    "METADATA_KEY",
    "TOOL_CALL_EXTENSION",
    "TOOL_CALL_REASON",
    "BoundAnswer",
    "bound_answer_schema",
    "bound_choice",
    "bound_decision",
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
    AAIS answer (``metadata.aais``, a ``payload`` with an ``aais`` member, or one that echoes
    an approved action's fingerprint): what only the resume planner may turn into a resume."""
    metadata = item.metadata
    if isinstance(metadata, Mapping) and METADATA_KEY in metadata:
        return True
    payload = item.payload if isinstance(item, ResumeEntry) else None
    return isinstance(payload, Mapping) and (METADATA_KEY in payload or ECHO_KEY in payload)


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


@dataclass(frozen=True)
class BoundAnswer:
    """A generic AG-UI client's answer to an approval: yes or no, bound to the action by
    the fingerprint it echoes (``{"approved": ..., "approvedActionFingerprint": ...}``).

    It carries no actor, id or time: the resume planner makes it an ``approval.decided``
    of the authenticated actor (:func:`bound_decision`) and judges it as any decision,
    so an echo that is not the request's ``action_digest`` is a digest mismatch.
    """

    approved: bool
    fingerprint: str


def bound_choice(request: Request, approved: bool) -> Choice | None:
    """The offered choice a bound answer takes: the narrowest-scoped ``approve`` when
    ``approved``, else the ``deny``; None when the request offers no such choice."""
    wanted = "approve" if approved else "deny"
    offered = [choice for choice in request.choices if choice.decision == wanted]
    if not offered:
        return None
    return min(offered, key=lambda choice: BOUND_SCOPES.index(choice.scope))


def bound_answer_schema(request: Request) -> dict[str, Any] | None:
    """JSON Schema of the bound answers to ``request`` (:class:`BoundAnswer`): ``approved``
    limited to what is offered, the fingerprint a constant, nothing else; None when the
    request offers neither ``approve`` nor ``deny``."""
    offered = [flag for flag in (True, False) if bound_choice(request, flag) is not None]
    if not offered:
        return None
    approved: dict[str, Any] = {"type": "boolean"} if len(offered) == 2 else {"const": offered[0]}
    return {
        "title": "Approve or deny this action",
        "description": "approved: true approves this action, false denies it (it does not "
        "run). approvedActionFingerprint echoes metadata.governance.actionFingerprint: "
        "the answer holds only for this exact action.",
        "type": "object",
        "required": [APPROVED_KEY, ECHO_KEY],
        "properties": {
            APPROVED_KEY: approved,
            ECHO_KEY: {"const": request.action_digest},
        },
        "additionalProperties": False,
    }


def decided_response_schema(request: Request) -> dict[str, Any]:
    """JSON Schema of the ``ResumeEntry.payload`` values that answer ``request``.

    Exactly what :func:`parse_resume_entry` accepts as a payload (and the resume
    planner then accepts, before expiry and any policy): the bound answer
    (:func:`bound_answer_schema`, first, for clients that know nothing of AAIS), the
    ``approval.decided`` envelope itself, or ``{"aais": envelope}``. In the envelopes,
    ``request_id`` and ``action_digest`` are constants and ``(decision, scope)`` is one
    of the offered pairs, so a form built from it cannot invent a scope.
    """
    bound = bound_answer_schema(request)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Answer to this approval",
        "description": '{"approved": true|false, "approvedActionFingerprint": '
        "metadata.governance.actionFingerprint}, or an AAIS approval.decided envelope "
        "answering this request with an offered choice, sent as the resume payload itself "
        'or wrapped as {"aais": envelope}.',
        "oneOf": [
            *([] if bound is None else [bound]),
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


def bound_decision(
    request: Request, answer: BoundAnswer, *, actor: Actor, pointer: str = ""
) -> ApprovalDecided:
    """The ``approval.decided`` a bound answer stands for: the choice it takes
    (:func:`bound_choice`), by ``actor`` (the authenticated one), with the echoed
    fingerprint as its ``action_digest`` (judged against the request's, as any
    decision's is). Raises :class:`AAISValidationError` (at ``pointer``, the payload's)
    when the choice is not offered.

    Args:
        request: the request the interrupt shows.
        answer: the bound answer read from the resume payload.
        actor: the authenticated actor.
        pointer: the JSON pointer of the payload, for errors.
    """
    choice = bound_choice(request, answer.approved)
    if choice is None:
        raise AAISValidationError(
            join_pointer(pointer, APPROVED_KEY),
            "the request does not offer this answer; see responseSchema",
        )
    decided = build_decision_for_request(
        request, decision=choice.decision, scope=choice.scope, actor=actor
    )
    if answer.fingerprint == request.action_digest:
        return decided
    document = decided.to_json()
    document["decision"]["action_digest"] = answer.fingerprint
    return parse_envelope(document, expected=ApprovalDecided)


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
        metadata={
            METADATA_KEY: envelope.to_json(),
            GOVERNANCE_KEY: {FINGERPRINT_KEY: request.action_digest},
        },
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
) -> ApprovalDecided | Cancellation | BoundAnswer:
    """The answer carried by a resume entry.

    ``status: "resolved"`` needs a bound answer as the ``payload``
    (``{"approved": ..., "approvedActionFingerprint": ...}``, nothing else; a
    :class:`BoundAnswer`) or an ``approval.decided`` envelope: the ``payload`` itself
    (its ``aais`` is the version string), ``payload.aais`` (an object; nothing else
    beside it), or ``metadata.aais``; when payload and metadata both carry an envelope
    they must agree, and a bound answer comes alone. ``status: "cancelled"`` is an
    AAIS cancel of ``request`` (an envelope, if any, must still name that request).
    With ``request`` given, the decision must name it. Digest (a bound answer's echo
    included), choice and expiry are the authority's to judge.
    """
    model = _model(ResumeEntry, entry, pointer)
    from_metadata = _member(model.metadata, pointer + "/metadata")
    if model.status == "resolved" and _is_bound(model.payload):
        if from_metadata is not None:
            raise AAISValidationError(
                from_metadata[1], "not allowed beside a bound answer in the payload; send one"
            )
        return _bound(model.payload, pointer + "/payload")
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
            'an answer is required: {"approved": true|false, "approvedActionFingerprint": '
            "the interrupt's metadata.governance.actionFingerprint}, or an approval.decided "
            "envelope (the payload, payload.aais or metadata.aais)",
        )
    decided: ApprovalDecided = _envelope(raw, ApprovalDecided, where)
    _check_names(decided, request, where)
    return decided


def _is_bound(payload: Any) -> bool:
    """True when a payload is meant as a bound answer: an object without ``aais`` that
    has either of its members."""
    return (
        isinstance(payload, Mapping)
        and METADATA_KEY not in payload
        and (APPROVED_KEY in payload or ECHO_KEY in payload)
    )


def _bound(payload: Mapping[str, Any], where: str) -> BoundAnswer:
    """The bound answer of a payload (see :func:`bound_answer_schema`)."""
    for key in payload:
        if key not in (APPROVED_KEY, ECHO_KEY):
            raise AAISValidationError(
                join_pointer(where, key) if isinstance(key, str) else where,
                f'not allowed in a bound answer (only "{APPROVED_KEY}" and "{ECHO_KEY}")',
            )
    if APPROVED_KEY not in payload:
        raise AAISValidationError(join_pointer(where, APPROVED_KEY), "is required")
    approved = payload[APPROVED_KEY]
    if not isinstance(approved, bool):
        raise AAISValidationError(join_pointer(where, APPROVED_KEY), "must be true or false")
    if ECHO_KEY not in payload:
        raise AAISValidationError(
            join_pointer(where, ECHO_KEY),
            "is required: echo the interrupt's metadata.governance.actionFingerprint",
        )
    echo = payload[ECHO_KEY]
    if not isinstance(echo, str) or re.fullmatch(DIGEST_PATTERN, echo, re.ASCII) is None:
        raise AAISValidationError(
            join_pointer(where, ECHO_KEY),
            f"must be the interrupt's action fingerprint ({DIGEST_PATTERN})",
        )
    return BoundAnswer(approved=approved, fingerprint=echo)


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

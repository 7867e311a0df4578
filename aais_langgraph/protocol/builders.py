"""Builders for requests and decisions that are valid by construction."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar, get_args

from pydantic import BaseModel, ValidationError

from .base import MAX_DEPTH_CONTEXT, TAKEN_DIGEST_CONTEXT, pydantic_error_to_aais
from .envelopes import ApprovalDecided, ApprovalRequested, Envelope
from .errors import AAISValidationError
from .ijson import DEFAULT_MAX_DEPTH
from .parts import (
    Action,
    Actor,
    Choice,
    DecisionKind,
    Origin,
    Request,
    Risk,
    RiskLevel,
    Scope,
)
from .timestamps import format_timestamp, parse_timestamp, utc_now

E = TypeVar("E", bound=Envelope)

DEFAULT_EXPIRY = timedelta(minutes=15)

DEFAULT_CHOICES: tuple[Choice, ...] = (
    Choice(decision="approve", scope="once", label="Approve once"),
    Choice(decision="deny", scope="once", label="Deny"),
)

DEFAULT_RISK = Risk(level="medium", reasons=["The action has side effects outside the agent"])

RISK_LEVELS: tuple[RiskLevel, ...] = get_args(RiskLevel)


def risk_from(value: Risk | RiskLevel | Mapping[str, Any], pointer: str) -> Risk:
    """``value`` as a :class:`Risk`: a risk object, or a level alone (``"high"``, as
    ``interrupt_on`` takes it), given one reason that says the caller rated it so."""
    if isinstance(value, str):
        if value not in RISK_LEVELS:
            raise AAISValidationError(
                pointer, f"expected a risk object or one of {', '.join(RISK_LEVELS)}"
            )
        return Risk(level=value, reasons=[f"The requester rated this action {value} risk"])
    return Risk.from_data(value, pointer=pointer)


def new_id(prefix: str) -> str:
    """A fresh random AAIS id such as ``dec_3f2a...``."""
    return f"{prefix}_{uuid.uuid4().hex}"


AAIS_VERSION = "1.0"
"""The ``aais`` member of every envelope this library writes."""


def envelope_document(
    kind: str,
    member: str,
    body: Any,
    *,
    occurred_at: str,
    sequence: int,
    stream: str | None = None,
    event_id: str | None = None,
    extensions: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON document of an AAIS envelope: the common header (``aais``, ``type``, a fresh
    event ``id``, ``occurred_at``, ``sequence``, optional ``stream`` and ``extensions``)
    around the payload ``body`` under ``member``. Validate it with the envelope's model.

    Args:
        kind: the envelope ``type``.
        member: the member holding the payload (``request``, ``decision``, ...).
        body: the payload.
        occurred_at: its RFC 3339 time.
        sequence: the envelope's ``sequence`` (0 until a ledger assigns one).
        stream: the envelope's ``stream`` id.
        event_id: the envelope's event ``id`` (default: a fresh one).
        extensions: namespaced envelope extensions.
    """
    envelope: dict[str, Any] = {
        "aais": AAIS_VERSION,
        "type": kind,
        "id": event_id or new_id("evt"),
        "occurred_at": occurred_at,
        "sequence": sequence,
        member: body,
    }
    if stream is not None:
        envelope["stream"] = stream
    if extensions:
        envelope["extensions"] = dict(extensions)
    return envelope


def _moment(value: datetime | str | None, pointer: str) -> tuple[datetime, str]:
    """The instant and its RFC 3339 text; a caller's string is kept as given."""
    if value is None:
        value = utc_now()
    if isinstance(value, str):
        return parse_timestamp(value, pointer), value
    if value.tzinfo is None:
        raise AAISValidationError(pointer, "datetime must be timezone-aware")
    return value, format_timestamp(value)


def build_request(
    action: Action | Mapping[str, Any],
    *,
    origin: Origin | Mapping[str, Any],
    risk: Risk | RiskLevel | Mapping[str, Any] | None = None,
    choices: Sequence[Choice | Mapping[str, Any]] | None = None,
    request_id: str | None = None,
    created_at: datetime | str | None = None,
    expires_in: timedelta | None = None,
    expires_at: datetime | str | None = None,
    sequence: int = 0,
    stream: str | None = None,
    event_id: str | None = None,
    extensions: Mapping[str, Any] | None = None,
) -> ApprovalRequested:
    """Build an ``approval.requested`` envelope with a computed digest and a finite expiry.

    The default offers approve-once and deny and expires after 15 minutes. ``risk`` is a
    risk object or a level alone (``"high"``); the default is medium.

    Args:
        action: the action to approve: kind, name, summary, arguments.
        origin: where it comes from: harness, session, graph.
        risk: a risk object or a level alone (default: medium).
        choices: the decisions offered (default: approve once or deny).
        request_id: the request's id (default: a fresh one).
        created_at: when it was made (default: now).
        expires_in: how long it stays answerable (default: 15 minutes).
        expires_at: when it expires (instead of ``expires_in``).
        sequence: the envelope's ``sequence`` (0 until a ledger assigns one).
        stream: the envelope's ``stream`` id.
        event_id: the envelope's event ``id`` (default: a fresh one).
        extensions: namespaced envelope extensions.
    """
    from .digest import action_digest

    action_model = Action.from_data(action, pointer="/request/action")
    created, created_text = _moment(created_at, "/request/created_at")
    if expires_at is not None:
        _, expiry_text = _moment(expires_at, "/request/expires_at")
    else:
        lifetime = DEFAULT_EXPIRY if expires_in is None else expires_in
        if lifetime <= timedelta(0):
            raise AAISValidationError("/request/expires_at", "expires_in must be positive")
        expiry_text = format_timestamp(created + lifetime)
    digest = action_digest(action_model)
    request: dict[str, Any] = {
        "id": request_id or new_id("apr"),
        "created_at": created_text,
        "expires_at": expiry_text,
        "status": "pending",
        "origin": Origin.from_data(origin, pointer="/request/origin"),
        "action": action_model,
        "action_digest": digest,
        "risk": risk_from(risk if risk is not None else DEFAULT_RISK, "/request/risk"),
        "choices": [
            Choice.from_data(choice, pointer=f"/request/choices/{index}")
            for index, choice in enumerate(DEFAULT_CHOICES if choices is None else choices)
        ],
    }
    if extensions is not None:
        request["extensions"] = dict(extensions)
    envelope = envelope_document(
        "approval.requested",
        "request",
        request,
        occurred_at=request["created_at"],
        sequence=sequence,
        stream=stream,
        event_id=event_id,
    )
    # The parts are validated models already (pydantic takes them as they are), and the
    # digest was taken of this very action: one validation, no second digest.
    return _built(ApprovalRequested, envelope, taken=(action_model, digest))


def build_decision(
    requested: ApprovalRequested | Mapping[str, Any],
    *,
    decision: DecisionKind,
    actor: Actor | Mapping[str, Any],
    scope: Scope = "once",
    decision_id: str | None = None,
    decided_at: datetime | str | None = None,
    sequence: int = 0,
    stream: str | None = None,
    event_id: str | None = None,
) -> ApprovalDecided:
    """Build an ``approval.decided`` envelope bound to ``requested`` by id and digest.

    ``requested`` is the whole ``approval.requested`` envelope (an interrupt's value,
    ``metadata.aais`` of an AG-UI interrupt); for a request listed in a snapshot use
    :func:`build_decision_for_request`. The other parameters are as there.

    Args:
        requested: the whole ``approval.requested`` envelope answered.
        decision: ``approve``, ``deny`` or ``cancel``.
        actor: who decides; a served channel replaces it with its authenticated actor.
        scope: ``once``, ``session`` or ``persistent``.
        decision_id: the decision's id (default: a fresh ``dec_...`` id).
        decided_at: when it was decided (default: now).
        sequence: the envelope's ``sequence`` (0 until a ledger assigns one).
        stream: the envelope's ``stream`` id.
        event_id: the envelope's event ``id`` (default: a fresh one).
    """
    if isinstance(requested, Mapping) and "aais" not in requested and "action_digest" in requested:
        raise AAISValidationError(
            "/aais",
            "Field required: this is a request, not an approval.requested envelope; "
            "build its decision with build_decision_for_request",
        )
    request = ApprovalRequested.from_data(requested).request
    return _decided(
        request, decision, actor, scope, decision_id, decided_at, sequence, stream, event_id
    )


def build_decision_for_request(
    request: Request | Mapping[str, Any],
    *,
    decision: DecisionKind,
    actor: Actor | Mapping[str, Any],
    scope: Scope = "once",
    decision_id: str | None = None,
    decided_at: datetime | str | None = None,
    sequence: int = 0,
    stream: str | None = None,
    event_id: str | None = None,
) -> ApprovalDecided:
    """Build an ``approval.decided`` envelope answering a request as a snapshot lists it.

    ``request`` is one entry of ``snapshot.pending``: a :class:`Request` (from
    ``pending_approvals(...).snapshot.pending`` or ``authority.snapshot()``) or its JSON
    object (from ``GET /approvals/snapshot``). It is validated like any request (its
    ``action_digest`` must match its ``action``); an error names the field, as
    ``/request/<field>``, and never echoes a value.

    Args:
        request: the request answered, as a snapshot lists it.
        decision: ``approve``, ``deny`` or ``cancel``; the authority resolves a pair
            (``decision``, ``scope``) the request does not offer as ``invalid``.
        actor: who decides; a served channel replaces it with its authenticated actor.
        scope: ``once``, ``session`` or ``persistent``.
        decision_id: the decision's id (default: a fresh ``dec_...`` id).
        decided_at: when it was decided (default: now).
        sequence: the envelope header's ``sequence``, as in :func:`envelope_document`.
        stream: the envelope header's ``stream``.
        event_id: the envelope header's event ``id`` (default: a fresh one).
    """
    if isinstance(request, Mapping) and "request" in request and "action_digest" not in request:
        raise AAISValidationError(
            "/request",
            "expected a request as a snapshot lists it, not an envelope; build the decision "
            "of an approval.requested envelope with build_decision",
        )
    model = Request.from_data(request, pointer="/request")
    return _decided(
        model, decision, actor, scope, decision_id, decided_at, sequence, stream, event_id
    )


def _decided(
    request: Request,
    decision: DecisionKind,
    actor: Actor | Mapping[str, Any],
    scope: Scope,
    decision_id: str | None,
    decided_at: datetime | str | None,
    sequence: int,
    stream: str | None,
    event_id: str | None,
) -> ApprovalDecided:
    """The ``approval.decided`` envelope bound to the validated ``request``."""
    _, moment = _moment(decided_at, "/decision/decided_at")
    body = {
        "id": decision_id or new_id("dec"),
        "request_id": request.id,
        "action_digest": request.action_digest,
        "decided_at": moment,
        "decision": decision,
        "scope": scope,
        "actor": actor if isinstance(actor, Actor) else dict(_mapping(actor, "/decision/actor")),
    }
    envelope = envelope_document(
        "approval.decided",
        "decision",
        body,
        occurred_at=moment,
        sequence=sequence,
        stream=stream,
        event_id=event_id,
    )
    return _built(ApprovalDecided, envelope)


def _mapping(value: Any, pointer: str) -> Mapping[str, Any]:
    """``value`` as a mapping (a model's fields, for a model of another class)."""
    if isinstance(value, BaseModel):
        return value.model_dump(warnings=False)
    if not isinstance(value, Mapping):
        raise AAISValidationError(pointer, "expected a JSON object")
    return value


def _built(
    model: type[E], document: dict[str, Any], *, taken: tuple[Action, str] | None = None
) -> E:
    """Validate, once, an envelope this module assembled from validated parts and the
    caller's values. ``taken``: the action model and the digest taken of it just now."""
    context: dict[str, Any] = {MAX_DEPTH_CONTEXT: DEFAULT_MAX_DEPTH}
    if taken is not None:
        context[TAKEN_DIGEST_CONTEXT] = taken
    try:
        return model.model_validate(document, context=context)
    except ValidationError as error:
        raise pydantic_error_to_aais(error) from None

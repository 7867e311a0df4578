"""The parts of AAIS 1.0 envelopes, mirroring ``$defs`` of the public JSON Schema."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictBool, ValidationInfo, model_validator
from typing_extensions import Self

from .base import (
    TAKEN_DIGEST_CONTEXT,
    AAISModel,
    Digest,
    Extensions,
    Id,
    JsonObject,
    Sequence,
    Text200,
    Text1000,
    Text2000,
    Text4096,
    Text10000,
    Timestamp,
    absent,
)
from .digest import same_action, validated_action_digest
from .errors import AAISValidationError
from .timestamps import parse_timestamp

_VALIDATED_ACTIONS = "aais_validated_actions"
"""Validation context key: id -> each Action model the current validation built."""

DecisionKind = Literal["approve", "deny", "cancel"]
Scope = Literal["once", "session", "persistent"]
RiskLevel = Literal["low", "medium", "high", "critical"]
Outcome = Literal["approved", "denied", "cancelled", "expired", "stale", "conflict", "invalid"]
ActorType = Literal["human", "policy"]


class Origin(AAISModel):
    """Where the request comes from: harness, session, and the run coordinates."""

    harness: Id
    session_id: Id
    run_id: Id | None = absent()
    task_id: Id | None = absent()
    graph_id: Id | None = absent()
    node_id: Id | None = absent()
    agent_id: Id | None = absent()
    profile: Id | None = absent()
    subagent_run_id: Id | None = absent()
    parent_run_id: Id | None = absent()
    project: Text4096 | None = absent()


class Presentation(AAISModel):
    """How to show the action; ``redacted`` values travel as opaque references."""

    redacted: StrictBool | None = absent()
    binding_hint: Text1000 | None = absent()
    details: Text10000 | None = absent()

    @model_validator(mode="after")
    def _redacted_needs_hint(self) -> Self:
        if self.redacted is True and self.binding_hint is None:
            raise AAISValidationError("/binding_hint", "required when redacted is true")
        return self


class Action(AAISModel):
    """The exact action the human is asked about; its digest binds the decision."""

    kind: Id
    name: Id
    summary: Text1000
    arguments: JsonObject
    resource: Text4096 | None = absent()
    working_directory: Text4096 | None = absent()
    effects: list[Text1000] | None = absent(max_length=100)
    presentation: Presentation | None = absent()

    @model_validator(mode="after")
    def _note_validated(self, info: ValidationInfo) -> Self:
        # The request validated around this action digests it without walking its
        # arguments again: they were checked as I-JSON a moment ago, by this validation.
        context = info.context
        if isinstance(context, dict):
            context.setdefault(_VALIDATED_ACTIONS, {})[id(self)] = self
        return self


class Risk(AAISModel):
    """The requester's risk assessment, with at least one reason."""

    level: RiskLevel
    reasons: list[Text1000] = Field(min_length=1, max_length=20)


class Choice(AAISModel):
    """One answer the human may give; only offered choices can resolve a request."""

    decision: DecisionKind
    scope: Scope
    label: Text200
    scope_constraints: JsonObject | None = absent(min_length=1)

    @model_validator(mode="after")
    def _scope_rules(self) -> Self:
        if self.decision in ("deny", "cancel") and self.scope != "once":
            raise AAISValidationError("/scope", "deny and cancel choices must use scope once")
        if self.scope in ("session", "persistent") and self.scope_constraints is None:
            raise AAISValidationError(
                "/scope_constraints", "session and persistent choices need scope_constraints"
            )
        return self


class Request(AAISModel):
    """A pending approval request: the action, its digest, risk and offered choices."""

    id: Id
    created_at: Timestamp
    expires_at: Timestamp | None = absent()
    status: Literal["pending"]
    origin: Origin
    action: Action
    action_digest: Digest
    risk: Risk
    choices: list[Choice] = Field(min_length=1, max_length=10)
    extensions: Extensions | None = absent()

    @model_validator(mode="after")
    def _request_rules(self, info: ValidationInfo) -> Self:
        if self.expires_at is not None and parse_timestamp(self.expires_at) <= parse_timestamp(
            self.created_at
        ):
            raise AAISValidationError("/expires_at", "must be later than created_at")
        if not _digest_taken(self, info) and not _digest_matches(self, info):
            raise AAISValidationError("/action_digest", "does not match the action")
        offered: set[tuple[str, str]] = set()
        for index, choice in enumerate(self.choices):
            if (choice.decision, choice.scope) in offered:
                raise AAISValidationError(
                    f"/choices/{index}", "repeats an offered decision and scope pair"
                )
            offered.add((choice.decision, choice.scope))
        if not any(choice.decision in ("deny", "cancel") for choice in self.choices):
            raise AAISValidationError("/choices", "must offer at least one deny or cancel")
        return self

    def offers(self, decision: str, scope: str) -> Choice | None:
        """The offered choice with this decision and scope, if any."""
        return next((c for c in self.choices if c.decision == decision and c.scope == scope), None)


def _digest_taken(request: Request, info: ValidationInfo) -> bool:
    """Whether the builder validating ``request`` took its action's digest just now: the
    context names this very action object and the digest taken of it (a builder's own
    envelope is checked once, not digested twice)."""
    context = info.context
    taken = context.get(TAKEN_DIGEST_CONTEXT) if isinstance(context, dict) else None
    return (
        isinstance(taken, tuple)
        and taken[0] is request.action
        and taken[1] == request.action_digest
    )


def _digest_matches(request: Request, info: ValidationInfo) -> bool:
    """Whether the request's digest is its action's: taken without walking the arguments
    again when this validation built the action from plain data (and so just checked
    them), as :func:`~.digest.action_digest` takes it of an action model otherwise."""
    context = info.context
    validated = context.get(_VALIDATED_ACTIONS) if isinstance(context, dict) else None
    action = request.action
    if isinstance(validated, dict) and validated.pop(id(action), None) is action:
        return request.action_digest == validated_action_digest(action)
    return same_action(request.action_digest, action)


class Actor(AAISModel):
    """Who decided: a human or a policy, as the authenticated channel names them."""

    id: Id
    type: ActorType
    display_name: Text200 | None = absent()
    authenticated_by: Text200 | None = absent()


class Decision(AAISModel):
    """A presenter's answer to one request, bound to it by id and action digest."""

    id: Id
    request_id: Id
    action_digest: Digest
    decided_at: Timestamp
    decision: DecisionKind
    scope: Scope
    actor: Actor
    extensions: Extensions | None = absent()

    @model_validator(mode="after")
    def _deny_is_once(self) -> Self:
        if self.decision in ("deny", "cancel") and self.scope != "once":
            raise AAISValidationError("/scope", "deny and cancel decisions must use scope once")
        return self


class Resolution(AAISModel):
    """The authority's terminal verdict on a request."""

    id: Id
    request_id: Id
    decision_id: Id | None = absent()
    action_digest: Digest
    resolved_at: Timestamp
    outcome: Outcome
    message: Text2000
    effective_scope: Scope | None = absent()
    extensions: Extensions | None = absent()


class Snapshot(AAISModel):
    """Pending requests as of a sequence number."""

    as_of_sequence: Sequence
    pending: list[Request]


class Activity(AAISModel):
    """Progress on an approved action, for presenters."""

    request_id: Id
    message: Text2000
    stage: Id | None = absent()

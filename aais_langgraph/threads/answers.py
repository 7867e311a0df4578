"""Answers to a paused thread: what a presenter may send, and the resume map they make.

:meth:`~.driver.ThreadDriver.resume_with_decisions` parses every answer before
anything changes (:func:`parse_answers`), then under the thread's run lease has
the authority record each one and resumes the graph by interrupt id, matched
through the request id carried in each interrupt's value, never by position
(:func:`record_answers`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..authority import TERMINAL, ApprovalAuthority, Principal, UnknownRequestError, Verb
from ..protocol import (
    AAISValidationError,
    Actor,
    ApprovalDecided,
    ApprovalResolved,
    parse_envelope,
)
from .views import ThreadView


@dataclass(frozen=True)
class Cancellation:
    """Cancel one pending request (a presenter's "dismiss"), resuming its run."""

    request_id: str
    reason: str | None = None


Answer = ApprovalDecided | Cancellation | Mapping[str, Any] | str | bytes


def parse_answers(
    authority: ApprovalAuthority, thread_id: str, answers: Sequence[Answer] | Answer
) -> list[ApprovalDecided | Cancellation]:
    """Validate every answer before anything changes: shape, known request, this thread."""
    items: Sequence[Answer] = (
        [answers]
        if isinstance(answers, (ApprovalDecided, Cancellation, Mapping, str, bytes))
        else answers
    )
    if not items:
        raise AAISValidationError("/decisions", "at least one decision is required")
    parsed: list[ApprovalDecided | Cancellation] = []
    for index, item in enumerate(items):
        answer = item if isinstance(item, Cancellation) else _parse_decided(item, index)
        request_id = (
            answer.request_id if isinstance(answer, Cancellation) else answer.decision.request_id
        )
        stored = authority.get_stored_request(request_id)
        if stored is None:
            raise UnknownRequestError(f"/decisions/{index}/decision/request_id")
        if stored.thread_id is not None and stored.thread_id != thread_id:
            raise AAISValidationError(
                f"/decisions/{index}/decision/request_id", "request belongs to another thread"
            )
        parsed.append(answer)
    return parsed


def _parse_decided(item: Answer, index: int) -> ApprovalDecided:
    try:
        return parse_envelope(item, expected=ApprovalDecided)  # type: ignore[arg-type]
    except AAISValidationError as error:
        raise AAISValidationError(f"/decisions/{index}{error.pointer}", error.reason) from None


def _superseded(authority: ApprovalAuthority, view: ThreadView, request_id: str) -> bool:
    """True when the thread no longer waits for this unresolved request (its task is gone)."""
    stored = authority.get_stored_request(request_id)
    if stored is None or authority.get_resolution(request_id) is not None:
        return False
    return not view.waiting(stored)


def record_answers(
    authority: ApprovalAuthority,
    answers: list[ApprovalDecided | Cancellation],
    view: ThreadView,
    actor: Principal | Actor | Mapping[str, Any] | None,
) -> tuple[list[ApprovalResolved], dict[str, Any]]:
    """Record each answer; collect the resume map for the ones whose run still waits.

    Every answer ``actor`` may not give raises :class:`~aais_langgraph.authority.ForbiddenError`
    before any answer is recorded."""
    for answer in answers:
        if isinstance(answer, Cancellation):
            authority.require(actor, "cancel", answer.request_id, decision="cancel")
        else:
            kind = answer.decision.decision
            verb: Verb = "cancel" if kind == "cancel" else "decide"
            authority.require(actor, verb, answer.decision.request_id, decision=kind)
    results: list[ApprovalResolved] = []
    resume: dict[str, Any] = {}
    for answer in answers:
        request_id = (
            answer.request_id if isinstance(answer, Cancellation) else answer.decision.request_id
        )
        interrupt_id = view.interrupts.get(request_id)
        if isinstance(answer, Cancellation):
            resolved = authority.cancel(request_id, reason=answer.reason, actor=actor)
        elif interrupt_id is None and _superseded(authority, view, request_id):
            # The run moved on (e.g. state was edited): the action this decision saw is gone.
            resolved = authority.supersede(request_id)
        else:
            resolved = authority.decide(answer, actor=actor)
        results.append(resolved)
        if interrupt_id is None:
            continue
        # A stale, invalid or conflicting answer changed nothing; resume only with
        # what the ledger holds (a conflict's recorded resolution unsticks the run).
        recorded = (
            resolved
            if resolved.resolution.outcome in TERMINAL
            else authority.get_resolution(request_id)
        )
        if recorded is not None:
            resume[interrupt_id] = recorded.to_json()
    return results, resume


def recorded_resume(
    authority: ApprovalAuthority, view: ThreadView, *, only: Collection[str] | None = None
) -> tuple[dict[str, Any], list[ApprovalResolved]]:
    """Resume with what is recorded: interrupt id -> the recorded resolution of each request
    the thread waits on (of ``only``, when given) that has one, and those resolutions."""
    resume: dict[str, Any] = {}
    results: list[ApprovalResolved] = []
    for request_id, interrupt_id in view.interrupts.items():
        if only is not None and request_id not in only:
            continue
        recorded = authority.get_resolution(request_id)
        if recorded is not None:
            resume[interrupt_id] = recorded.to_json()
            results.append(recorded)
    return resume, results

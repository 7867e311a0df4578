"""``resume_with_decisions``: what a server or CLI calls to answer a paused thread.

Decisions are judged by the authority first, under the thread's run lease, then
the graph is resumed by interrupt id, matched through the request id carried in
each interrupt's value, never by position.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig

from ..authority import DEFAULT_LEASE_TTL, TERMINAL, ApprovalAuthority, UnknownRequestError
from ..protocol import (
    AAISValidationError,
    Actor,
    ApprovalDecided,
    ApprovalResolved,
    parse_envelope,
)
from .driver import DEFAULT_LEASE_WAIT, adrive, drive, thread_of
from .run_context import find_authority
from .views import ThreadView


@dataclass(frozen=True)
class Cancellation:
    """Cancel one pending request (a presenter's "dismiss"), resuming its run."""

    request_id: str
    reason: str | None = None


Answer = ApprovalDecided | Cancellation | Mapping[str, Any] | str | bytes


def _parse_answers(
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


def _judge_all(
    authority: ApprovalAuthority,
    answers: list[ApprovalDecided | Cancellation],
    view: ThreadView,
    actor: Actor | Mapping[str, Any] | None,
) -> tuple[list[ApprovalResolved], dict[str, Any]]:
    """Record each answer; collect the resume map for the ones whose run still waits."""
    results: list[ApprovalResolved] = []
    resume: dict[str, Any] = {}
    for answer in answers:
        request_id = (
            answer.request_id if isinstance(answer, Cancellation) else answer.decision.request_id
        )
        interrupt_id = view.interrupts.get(request_id)
        if isinstance(answer, Cancellation):
            resolved = authority.cancel(request_id, reason=answer.reason)
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


def resume_with_decisions(
    graph: Any,
    config: RunnableConfig,
    decisions: Sequence[Answer] | Answer,
    *,
    actor: Actor | Mapping[str, Any] | None,
    authority: ApprovalAuthority | None = None,
    context: Any = None,
    lease_ttl: float = DEFAULT_LEASE_TTL,
    lease_wait: float = DEFAULT_LEASE_WAIT,
) -> list[ApprovalResolved]:
    """Answer pending approvals of one thread and resume it; returns one resolution per answer.

    Holds the thread's run lease throughout, so concurrent presenters cannot both
    drive the same paused node. A decision for a request that already resolved
    returns that resolution (or ``conflict``) without touching the graph; an
    unknown request id raises before anything changes. ``actor`` is the
    authenticated actor and replaces the actor in each decision body.
    """
    found = find_authority(authority, config, context=context)
    answers = _parse_answers(found, thread_of(config), decisions)

    def plan(view: ThreadView) -> tuple[dict[str, Any], list[ApprovalResolved]]:
        results, resume = _judge_all(found, answers, view, actor)
        return resume, results

    return drive(
        graph,
        config,
        plan,
        authority=found,
        context=context,
        lease_ttl=lease_ttl,
        lease_wait=lease_wait,
    )


async def aresume_with_decisions(
    graph: Any,
    config: RunnableConfig,
    decisions: Sequence[Answer] | Answer,
    *,
    actor: Actor | Mapping[str, Any] | None,
    authority: ApprovalAuthority | None = None,
    context: Any = None,
    lease_ttl: float = DEFAULT_LEASE_TTL,
    lease_wait: float = DEFAULT_LEASE_WAIT,
) -> list[ApprovalResolved]:
    """Async twin of :func:`resume_with_decisions`."""
    found = find_authority(authority, config, context=context)
    answers = await asyncio.to_thread(_parse_answers, found, thread_of(config), decisions)

    def plan(view: ThreadView) -> tuple[dict[str, Any], list[ApprovalResolved]]:
        results, resume = _judge_all(found, answers, view, actor)
        return resume, results

    return await adrive(
        graph,
        config,
        plan,
        authority=found,
        context=context,
        lease_ttl=lease_ttl,
        lease_wait=lease_wait,
    )

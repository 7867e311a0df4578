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
from langgraph.types import Command

from ..authority import (
    DEFAULT_LEASE_TTL,
    TERMINAL,
    ApprovalAuthority,
    UnknownRequestError,
    arun_lease,
    run_lease,
)
from ..protocol import (
    AAISValidationError,
    Actor,
    ApprovalDecided,
    ApprovalResolved,
    parse_envelope,
)
from ..server_env import authority_from_env, env_authority_configured
from .run_context import (
    AUTHORITY_KEY,
    CLAIM_TTL_KEY,
    MISSING_AUTHORITY,
    authority_in,
    claim_ttl_for_lease,
)


@dataclass(frozen=True)
class Cancellation:
    """Cancel one pending request (a presenter's "dismiss"), resuming its run."""

    request_id: str
    reason: str | None = None


Answer = ApprovalDecided | Cancellation | Mapping[str, Any] | str | bytes


def _authority_of(
    authority: ApprovalAuthority | None, config: RunnableConfig, context: Any
) -> ApprovalAuthority:
    """The explicit authority, else the one the run context or ``configurable`` carries,
    else the one ``AAIS_LEDGER_URL`` configures."""
    if authority is not None:
        return authority
    found = authority_in(context, config)
    if found is None and env_authority_configured():
        found = authority_from_env()
    if found is None:
        raise ValueError(MISSING_AUTHORITY)
    return found


def _carrying(
    config: RunnableConfig, authority: ApprovalAuthority, lease_ttl: float
) -> RunnableConfig:
    """``config`` for a lease-driven resume: the authority in ``configurable`` (for
    gates that look there) and the lease TTL as the execution-claim lifetime."""
    configurable = dict(config.get("configurable") or {})
    configurable.setdefault(AUTHORITY_KEY, authority)
    configurable[CLAIM_TTL_KEY] = claim_ttl_for_lease(lease_ttl)
    return {**config, "configurable": configurable}


def _thread_of(config: RunnableConfig) -> str:
    thread_id = (config.get("configurable") or {}).get("thread_id")
    if thread_id is None:
        raise ValueError("config: configurable.thread_id is required")
    return str(thread_id)


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


def pending_interrupt_ids(state_interrupts: Sequence[Any]) -> dict[str, str]:
    """Map request id -> LangGraph interrupt id for interrupts raised by gates."""
    found: dict[str, str] = {}
    for pending in state_interrupts:
        value = getattr(pending, "value", None)
        if isinstance(value, Mapping) and value.get("type") == "approval.requested":
            request = value.get("request")
            if isinstance(request, Mapping) and isinstance(request.get("id"), str):
                found[request["id"]] = pending.id
    return found


@dataclass(frozen=True)
class ThreadView:
    """What the checkpoint says about a paused thread."""

    interrupts: dict[str, str]
    live_tasks: frozenset[str]

    @classmethod
    def of(cls, state: Any) -> ThreadView:
        return cls(
            interrupts=pending_interrupt_ids(state.interrupts),
            live_tasks=frozenset(f"{task.name}:{task.id}" for task in state.tasks),
        )

    def superseded(self, authority: ApprovalAuthority, request_id: str) -> bool:
        """True when the task that raised the request is no longer in the checkpoint."""
        stored = authority.get_stored_request(request_id)
        if stored is None or authority.get_resolution(request_id) is not None:
            return False
        namespace = str(stored.context.get("checkpoint_ns", ""))
        return namespace.split("|")[0] not in self.live_tasks


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
        elif interrupt_id is None and view.superseded(authority, request_id):
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
    lease_wait: float = 10.0,
) -> list[ApprovalResolved]:
    """Answer pending approvals of one thread and resume it; returns one resolution per answer.

    Holds the thread's run lease throughout, so concurrent presenters cannot both
    drive the same paused node. A decision for a request that already resolved
    returns that resolution (or ``conflict``) without touching the graph; an
    unknown request id raises before anything changes. ``actor`` is the
    authenticated actor and replaces the actor in each decision body.
    """
    found = _authority_of(authority, config, context)
    thread_id = _thread_of(config)
    answers = _parse_answers(found, thread_id, decisions)
    with run_lease(found.ledger, thread_id, ttl=lease_ttl, wait=lease_wait):
        view = ThreadView.of(graph.get_state(config))
        results, resume = _judge_all(found, answers, view, actor)
        if resume:
            kwargs = {} if context is None else {"context": context}
            graph.invoke(Command(resume=resume), _carrying(config, found, lease_ttl), **kwargs)
    return results


async def aresume_with_decisions(
    graph: Any,
    config: RunnableConfig,
    decisions: Sequence[Answer] | Answer,
    *,
    actor: Actor | Mapping[str, Any] | None,
    authority: ApprovalAuthority | None = None,
    context: Any = None,
    lease_ttl: float = DEFAULT_LEASE_TTL,
    lease_wait: float = 10.0,
) -> list[ApprovalResolved]:
    """Async twin of :func:`resume_with_decisions`."""
    found = _authority_of(authority, config, context)
    thread_id = _thread_of(config)
    answers = await asyncio.to_thread(_parse_answers, found, thread_id, decisions)
    async with arun_lease(found.ledger, thread_id, ttl=lease_ttl, wait=lease_wait):
        view = ThreadView.of(await graph.aget_state(config))
        results, resume = await asyncio.to_thread(_judge_all, found, answers, view, actor)
        if resume:
            kwargs = {} if context is None else {"context": context}
            await graph.ainvoke(
                Command(resume=resume), _carrying(config, found, lease_ttl), **kwargs
            )
    return results

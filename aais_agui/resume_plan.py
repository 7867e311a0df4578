"""Turn an AG-UI ``resume[]`` into a LangGraph id-keyed resume map, through the one planner.

This module translates, nothing more: every entry must name an open interrupt, once,
and every open interrupt must be answered; each AAIS entry becomes an answer
(:func:`~aais_agui.mapping.parse_resume_entry`) to the request its interrupt carries (a
generic client's bound answer, ``{"approved", "approvedActionFingerprint"}``, becomes the
authenticated actor's decision with the echoed fingerprint as its digest:
:func:`~aais_agui.mapping.bound_decision`), and the answers go to the driver's planner
all or nothing (:meth:`aais_langgraph.threads.AnswerPlanner.record_all`: judged, authorized, then
recorded under the authenticated actor, or handed to the run whose gate records each
decision with its execution claim in one write; one refused answer refuses them all). Its
refusals become ``RUN_ERROR`` codes here (:class:`ResumeRejected`). Plain LangGraph
interrupts get the entry's payload (or the cancel sentinel). Callers hold the thread's
run lease around planning and the run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ag_ui.core import ResumeEntry
from langchain_core.runnables import RunnableConfig

from aais_langgraph.authority import ApprovalAuthority, Principal
from aais_langgraph.gate import AuthorizedAnswers
from aais_langgraph.protocol import (
    AAISValidationError,
    Actor,
    ApprovalDecided,
    ApprovalRequested,
    Refusal,
    decision_note,
    outcome_refusal,
)
from aais_langgraph.threads import (
    AnswerPlanner,
    AnswerRefused,
    Cancellation,
    OpenAnswer,
    run_config,
)

from .mapping import BoundAnswer, bound_decision, is_approval_request, parse_resume_entry

#: ag-ui-langgraph's sentinel for a cancelled plain (non-AAIS) interrupt.
PLAIN_CANCELLED = "__agui_cancelled__"

#: The refusal of an answer that reached the agent with no authenticated actor: what to serve
#: it with instead (ag-ui-langgraph's stock endpoint authenticates nobody).
UNAUTHENTICATED_ANSWER = (
    "answering an approval needs an authenticated actor: serve the agent with "
    "aais_agui.create_app, or give add_langgraph_fastapi_endpoint "
    "dependencies=[aais_agui.stock_endpoint_dependency(security)]"
)


class ResumeRejected(Refusal):
    """A resume the run must refuse (``RUN_ERROR``); nothing was recorded or resumed.

    ``code`` is a stable machine-readable ``aais.*`` code; the message names
    interrupt ids and rules, never decision or action values.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.pointer = ""
        self.message = message


def _check_coverage(entries: Sequence[ResumeEntry], pending: Mapping[str, Any]) -> None:
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        if entry.interrupt_id not in pending:
            raise ResumeRejected(
                "aais.unknown_interrupt",
                f"resume[{index}] names an interrupt that is not pending on this thread; "
                "reconnect (run without resume) to get the open interrupts",
            )
        if entry.interrupt_id in seen:
            raise ResumeRejected(
                "aais.invalid_resume",
                f"resume[{index}] answers interrupt {entry.interrupt_id} a second time",
            )
        seen.add(entry.interrupt_id)
    missing = [interrupt_id for interrupt_id in pending if interrupt_id not in seen]
    if missing:
        raise ResumeRejected(
            "aais.partial_resume",
            f"resume must answer every open interrupt; {len(missing)} not answered: "
            + ", ".join(sorted(missing)),
        )


def _answer_of(
    index: int,
    entry: ResumeEntry,
    value: Any,
    actor: Principal | Actor | Mapping[str, Any] | None,
) -> OpenAnswer:
    """The AAIS answer an entry carries, to the request of the interrupt it names; a bound
    answer is the decision of ``actor`` (refused without one)."""
    requested = ApprovalRequested.from_data(value, pointer=f"/interrupts/{entry.interrupt_id}")
    request = requested.request
    try:
        answer = parse_resume_entry(entry, request=request, pointer=f"/resume/{index}")
        if isinstance(answer, BoundAnswer):
            if actor is None:
                raise ResumeRejected("aais.unauthenticated", UNAUTHENTICATED_ANSWER)
            answer = bound_decision(
                request, answer, actor=_actor_of(actor), pointer=f"/resume/{index}/payload"
            )
        if isinstance(answer, ApprovalDecided):
            decision_note(answer.decision)  # a bad reviewer note is refused before any record
    except AAISValidationError as error:
        raise ResumeRejected("aais.invalid_resume", f"resume[{index}]: {error}") from None
    return OpenAnswer(entry.interrupt_id, request, answer)


def _actor_of(actor: Principal | Actor | Mapping[str, Any]) -> Actor:
    """The actor a bound answer's decision names (the authority records the authenticated
    actor in its place whatever a decision names)."""
    if isinstance(actor, Principal):
        return actor.actor
    if isinstance(actor, Actor):
        return actor
    return Actor.from_data(actor, pointer="/actor")


def _rejected(refused: AnswerRefused, entries: Sequence[ResumeEntry]) -> ResumeRejected:
    """The ``RUN_ERROR`` for the planner's refusal (names ids and rules, never values)."""
    interrupt_id = refused.answer.interrupt_id
    index = [entry.interrupt_id for entry in entries].index(interrupt_id)
    rule = refused.rule
    if rule == "unauthenticated":
        return ResumeRejected("aais.unauthenticated", UNAUTHENTICATED_ANSWER)
    if rule == "forbidden":
        return ResumeRejected(
            refused.code, f"interrupt {interrupt_id}: forbidden: {refused.reason}"
        )
    if rule == "digest":
        return ResumeRejected(
            "aais.digest_mismatch",
            f"resume[{index}]: the decision's action_digest does not match the action "
            f"of interrupt {interrupt_id}; nothing was run",
        )
    if rule == "expired":
        return ResumeRejected(
            "aais.expired",
            f"resume[{index}]: interrupt {interrupt_id} expired at "
            f"{refused.answer.request.expires_at}; cancel it to continue the thread",
        )
    if rule == "request":
        return ResumeRejected(
            "aais.invalid_resume",
            f"resume[{index}]: the decision does not name the request of interrupt {interrupt_id}",
        )
    if rule in ("choice", "action"):
        return ResumeRejected(
            "aais.invalid_resume",
            f"resume[{index}]: the decision and scope were not offered by the request",
        )
    if rule == "conflict" and isinstance(refused.answer.answer, Cancellation):
        return ResumeRejected(
            "aais.conflict",
            f"interrupt {interrupt_id}: already resolved {refused.reason}; "
            "reconnect to continue the thread",
        )
    return ResumeRejected(
        outcome_refusal(rule), f"interrupt {interrupt_id}: {rule}: {refused.reason}"
    )


def plan_resume(
    authority: ApprovalAuthority,
    pending: Mapping[str, Any],
    entries: Sequence[ResumeEntry],
    *,
    actor: Principal | Actor | Mapping[str, Any] | None,
    handed: AuthorizedAnswers | None = None,
) -> dict[str, Any]:
    """The ``Command(resume=...)`` map answering every pending interrupt, or ResumeRejected.

    AAIS interrupts resume with the recorded ``approval.resolved`` envelope, or, with
    ``handed``, with the authorized decision the run's gate records in one write;
    plain LangGraph interrupts get the entry's payload (or the cancel sentinel).

    Args:
        authority: the authority that records the answers.
        pending: interrupt id -> value of the thread's open interrupts (an approval's
            value may be its validated :class:`ApprovalRequested` already).
        entries: the run's ``resume[]`` entries.
        actor: the authenticated actor (None: refused as unauthenticated).
        handed: the run's handed answers (its ``configurable`` holds them), filled here.
    """
    _check_coverage(entries, pending)
    planner = AnswerPlanner(authority)
    answers: list[OpenAnswer] = []
    resume: dict[str, Any] = {}
    try:
        for index, entry in enumerate(entries):
            value = pending[entry.interrupt_id]
            if isinstance(value, ApprovalRequested) or is_approval_request(value):
                try:
                    answers.append(_answer_of(index, entry, value, actor))
                except (ResumeRejected, AAISValidationError):
                    planner.check(answers)  # an earlier entry's refusal is named first
                    raise
            elif entry.status == "cancelled":
                resume[entry.interrupt_id] = {
                    PLAIN_CANCELLED: True,
                    "interrupt_id": entry.interrupt_id,
                }
            else:
                resume[entry.interrupt_id] = entry.payload
        return {**resume, **planner.record_all(answers, actor, handed=handed)}
    except AnswerRefused as refused:
        raise _rejected(refused, entries) from None


def served_config(config: Mapping[str, Any] | None, authority: ApprovalAuthority) -> RunnableConfig:
    """``config`` for every run this server drives: the authority in ``configurable``,
    and gates that accept only resolutions the authority already recorded
    (:data:`~aais_langgraph.gate.answer_sources.RECORDED_ONLY_KEY`; no caller can switch it off)."""
    return run_config(config, authority, recorded_only=True)

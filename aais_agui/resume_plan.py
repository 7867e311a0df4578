"""Turn an AG-UI ``resume[]`` into a LangGraph id-keyed resume map, through the authority.

Everything is checked before anything is recorded: every entry names an open
interrupt, every open interrupt is answered, and each AAIS decision carries
the request's digest and an offered choice (the authority's judgement,
:func:`~aais_langgraph.authority.judge`). A decision that arrives at or after
expiry resolves its request ``expired``, as on every channel, and the run is
refused (``aais.expired``). Only then are the decisions recorded (with the
authenticated actor) and the map built from the *recorded* resolutions, as
:func:`aais_langgraph.aresume_with_decisions` does. Callers hold the thread's run
lease around planning and the run.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from ag_ui.core import ResumeEntry
from langchain_core.runnables import RunnableConfig

from aais_langgraph.authority import (
    TERMINAL,
    ApprovalAuthority,
    ForbiddenError,
    Principal,
    judge,
)
from aais_langgraph.protocol import (
    AAISValidationError,
    Actor,
    ApprovalDecided,
    ApprovalRequested,
    ApprovalResolved,
    Refusal,
    decision_note,
    outcome_refusal,
)
from aais_langgraph.threads import Cancellation, run_config

from .mapping import is_approval_request, parse_resume_entry

logger = logging.getLogger(__name__)

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


@dataclass(frozen=True)
class _Answer:
    interrupt_id: str
    requested: ApprovalRequested
    answer: ApprovalDecided | Cancellation
    expired: bool


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


def _judge_entry(
    authority: ApprovalAuthority, index: int, entry: ResumeEntry, value: Any
) -> _Answer:
    """Parse one AAIS answer and apply the checks that must pass before anything is recorded."""
    requested = ApprovalRequested.from_data(value, pointer=f"/interrupts/{entry.interrupt_id}")
    request = requested.request
    try:
        answer = parse_resume_entry(entry, request=request, pointer=f"/resume/{index}")
        if isinstance(answer, ApprovalDecided):
            decision_note(answer.decision)  # a bad reviewer note is refused before any record
    except AAISValidationError as error:
        raise ResumeRejected("aais.invalid_resume", f"resume[{index}]: {error}") from None
    now, expires_at = authority.clock(), authority.expiry_of(request)
    if isinstance(answer, ApprovalDecided):
        # The authority's judgement, asked before anything is recorded; each refusing
        # rule is answered with its AG-UI code. Digest first: a forged digest is named
        # as such even on an expired request.
        verdict = judge(request, answer.decision, now=None, expires_at=None)
        if verdict.rule not in ("request", "digest"):
            verdict = judge(request, answer.decision, now=now, expires_at=expires_at)
        if not verdict.passed and verdict.rule != "expired":
            raise _refusal(verdict.rule, index, entry.interrupt_id, request)
    return _Answer(entry.interrupt_id, requested, answer, now >= expires_at)


def _refusal(rule: str, index: int, interrupt_id: str, request: Any) -> ResumeRejected:
    """The ``RUN_ERROR`` for a decision the judgement refused (names ids, never values)."""
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
            f"{request.expires_at}; cancel it to continue the thread",
        )
    if rule == "request":
        return ResumeRejected(
            "aais.invalid_resume",
            f"resume[{index}]: the decision does not name the request of interrupt {interrupt_id}",
        )
    return ResumeRejected(
        "aais.invalid_resume",
        f"resume[{index}]: the decision and scope were not offered by the request",
    )


def _record(
    authority: ApprovalAuthority, judged: _Answer, actor: Principal | Actor | Mapping[str, Any]
) -> ApprovalResolved:
    """Record one answer; return the request's recorded resolution or refuse."""
    request_id = judged.requested.request.id
    if isinstance(judged.answer, Cancellation):
        closed = (
            authority.expire(request_id, actor=actor)
            if judged.expired
            else authority.cancel(request_id, reason=judged.answer.reason, actor=actor)
        ).resolution
        if closed.outcome == "invalid":  # the policy refused this actor's cancel
            raise ResumeRejected(
                "aais.invalid", f"interrupt {judged.interrupt_id}: invalid: {closed.message}"
            )
        if closed.outcome not in ("cancelled", "expired"):
            raise ResumeRejected(
                "aais.conflict",
                f"interrupt {judged.interrupt_id}: already resolved {closed.outcome}; "
                "reconnect to continue the thread",
            )
    else:
        outcome = authority.decide(judged.answer, actor=actor).resolution
        if outcome.outcome not in TERMINAL:
            raise ResumeRejected(
                outcome_refusal(outcome.outcome),
                f"interrupt {judged.interrupt_id}: {outcome.outcome}: {outcome.message}",
            )
    recorded = authority.get_resolution(request_id)
    if recorded is None:  # pragma: no cover - a terminal outcome is always recorded
        raise ResumeRejected("aais.invalid_resume", f"interrupt {judged.interrupt_id}: unresolved")
    return recorded


def _authorize(
    authority: ApprovalAuthority,
    judged: _Answer,
    actor: Principal | Actor | Mapping[str, Any] | None,
) -> None:
    """Refuse (``aais.forbidden``) an answer the authenticated principal may not give."""
    answer = judged.answer
    kind = "cancel" if isinstance(answer, Cancellation) else answer.decision.decision
    try:
        authority.require(
            actor,
            "cancel" if kind == "cancel" else "decide",
            judged.requested.request.id,
            decision=kind,
        )
    except ForbiddenError as error:
        raise ResumeRejected(
            error.code, f"interrupt {judged.interrupt_id}: forbidden: {error.reason}"
        ) from None


def plan_resume(
    authority: ApprovalAuthority,
    pending: Mapping[str, Any],
    entries: Sequence[ResumeEntry],
    *,
    actor: Principal | Actor | Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The ``Command(resume=...)`` map answering every pending interrupt, or ResumeRejected.

    AAIS interrupts resume with the recorded ``approval.resolved`` envelope;
    plain LangGraph interrupts get the entry's payload (or the cancel sentinel).
    """
    _check_coverage(entries, pending)
    judged: list[_Answer] = []
    resume: dict[str, Any] = {}
    for index, entry in enumerate(entries):
        value = pending[entry.interrupt_id]
        if is_approval_request(value):
            judged.append(_judge_entry(authority, index, entry, value))
        elif entry.status == "cancelled":
            resume[entry.interrupt_id] = {PLAIN_CANCELLED: True, "interrupt_id": entry.interrupt_id}
        else:
            resume[entry.interrupt_id] = entry.payload
    if judged and actor is None:
        raise ResumeRejected("aais.unauthenticated", UNAUTHENTICATED_ANSWER)
    for item in judged:  # every answer is allowed, or none is recorded
        _authorize(authority, item, actor)
    late = [item for item in judged if item.expired and isinstance(item.answer, ApprovalDecided)]
    if late:
        # SPEC §11: a decision at or after expiry resolves the request ``expired`` (as
        # on every channel, under the authenticated actor); the run is refused, and the
        # resolution's resume work continues the thread past it.
        for item in late:
            authority.decide(cast(ApprovalDecided, item.answer), actor=actor)
        first = late[0]
        index = [entry.interrupt_id for entry in entries].index(first.interrupt_id)
        raise _refusal("expired", index, first.interrupt_id, first.requested.request)
    for item in judged:
        assert actor is not None
        resume[item.interrupt_id] = _record(authority, item, actor).to_json()
    return resume


def served_config(config: Mapping[str, Any] | None, authority: ApprovalAuthority) -> RunnableConfig:
    """``config`` for every run this server drives: the authority in ``configurable``,
    and gates that accept only resolutions the authority already recorded
    (:data:`~aais_langgraph.gate.answer_sources.RECORDED_ONLY_KEY`; no caller can switch it off)."""
    return run_config(config, authority, recorded_only=True)

"""The one answer planner: what a presenter may send a paused thread, authorized and recorded.

:class:`AnswerPlanner` is the only place that authorizes answers for a paused thread
(and records them, unless it hands a decision to the resumed run, whose gate records
it); every channel hands it parsed answers and gets back the resolutions and
the ``Command(resume=...)`` map, keyed by interrupt id and matched through the request
id carried in each interrupt's value, never by position. Two modes:

- one by one (:meth:`AnswerPlanner.record`, a plan that records, then resumes under
  the thread's lease): every answer is authorized before any is recorded, then each
  is recorded and its outcome returned, whatever it is (``stale`` and ``invalid``
  included);
- one by one, answered with the resume (:meth:`AnswerPlanner.hand_over`, the
  driver's :meth:`~.driver.ThreadDriver.resume_with_decisions`): as :meth:`record`,
  except that a decision the run waits on and is sure to accept is authorized and
  handed to the run unrecorded (:class:`~aais_langgraph.gate.answer_sources.AuthorizedAnswers`):
  its gate records the resolution, the execution claim and the resume work in one
  ledger write (a crash before that write leaves the request pending and answerable;
  the lease's release marks the work done, as it does for a recorded answer);
- all or nothing (:meth:`AnswerPlanner.record_all`, an AG-UI ``resume[]``): each answer
  is judged against the request its interrupt carries and authorized before any is
  recorded, and the first refused answer refuses the set (:class:`AnswerRefused`); the
  served agent hands its decisions to the run as :meth:`hand_over` does;
- one decision for one request (:meth:`AnswerPlanner.record_decision` and its async
  twin, the bindings that answer a request rather than a thread: the HTTP decisions
  route, the WebSocket binding, the CLI's ``approve``/``deny``, the stdio presenter),
  and one cancel (:meth:`AnswerPlanner.record_cancel`: the HTTP cancel route, the
  CLI's ``cancel``).

One answer reads its stored request once: the row read while parsing (or
authorizing) is carried through authorization into the authority's record
(:class:`ParsedAnswer`).

:func:`recorded_resume` is the one map of "resume with what is recorded".
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from ..authority import (
    TERMINAL,
    ApprovalAuthority,
    ForbiddenError,
    Principal,
    UnknownRequestError,
    Verb,
    judge,
)
from ..gate.answer_sources import AuthorizedAnswer, AuthorizedAnswers
from ..ledger import StoredRequest
from ..protocol import (
    AAISValidationError,
    Actor,
    ApprovalDecided,
    ApprovalResolved,
    Request,
    decision_note,
    parse_envelope,
)
from .views import ThreadView

__all__ = [
    "Answer",
    "AnswerPlanner",
    "AnswerRefused",
    "Cancellation",
    "OpenAnswer",
    "ParsedAnswer",
    "recorded_resume",
]


@dataclass(frozen=True)
class Cancellation:
    """Cancel one pending request (a presenter's "dismiss"), resuming its run."""

    request_id: str
    reason: str | None = None


Answer = ApprovalDecided | Cancellation | Mapping[str, Any] | str | bytes
"""What a presenter may send: a decision (an envelope, its JSON or its text) or a
:class:`Cancellation`."""


@dataclass(frozen=True)
class OpenAnswer:
    """An answer to one interrupt the thread waits on, with the request that interrupt
    carries (all-or-nothing planning judges it against that request)."""

    interrupt_id: str
    request: Request
    answer: ApprovalDecided | Cancellation


@dataclass(frozen=True)
class ParsedAnswer:
    """An answer checked against its stored request, with the row it was checked against
    (carried into authorization and the record, so one answer reads its request once)."""

    answer: ApprovalDecided | Cancellation
    stored: StoredRequest


class AnswerRefused(Exception):
    """One answer refused an all-or-nothing set (:meth:`AnswerPlanner.record_all`).

    ``index`` is the answer's place in the set and ``rule`` why it was refused: a check
    of the judgement (``request``, ``digest``, ``choice``), ``expired``,
    ``unauthenticated``, ``forbidden`` (``code`` is the authorization's), or the outcome
    the authority answered while recording (``invalid``, ``conflict``, ``stale``).
    ``reason`` never echoes a value.

    Args:
        rule: why the answer was refused.
        index: the answer's place in the set.
        answer: the refused answer, with its interrupt and request.
        reason: words that say why, never a value.
        code: the authorization's refusal code, for ``forbidden``.
    """

    def __init__(
        self, rule: str, index: int, answer: OpenAnswer, reason: str = "", code: str = ""
    ) -> None:
        super().__init__(f"answer {index}: {rule}")
        self.rule = rule
        self.index = index
        self.answer = answer
        self.reason = reason
        self.code = code


def _request_id(answer: ApprovalDecided | Cancellation) -> str:
    return answer.request_id if isinstance(answer, Cancellation) else answer.decision.request_id


def _verb(answer: ApprovalDecided | Cancellation) -> tuple[Verb, str]:
    """The authorization question an answer asks: its verb and its decision kind."""
    kind = "cancel" if isinstance(answer, Cancellation) else answer.decision.decision
    return ("cancel" if kind == "cancel" else "decide"), kind


@dataclass(frozen=True)
class AnswerPlanner:
    """Authorizes and records the answers to one paused thread (see the module)."""

    authority: ApprovalAuthority

    def parse(self, thread_id: str, answers: Sequence[Answer] | Answer) -> list[ParsedAnswer]:
        """Validate every answer before anything changes: shape, known request, this thread."""
        items: Sequence[Answer] = (
            [answers]
            if isinstance(answers, (ApprovalDecided, Cancellation, Mapping, str, bytes))
            else answers
        )
        if not items:
            raise AAISValidationError("/decisions", "at least one decision is required")
        parsed: list[ParsedAnswer] = []
        for index, item in enumerate(items):
            answer = item if isinstance(item, Cancellation) else _parse_decided(item, index)
            pointer = f"/decisions/{index}/decision/request_id"
            stored = self._stored(_request_id(answer), pointer)
            if stored.thread_id is not None and stored.thread_id != thread_id:
                raise AAISValidationError(pointer, "request belongs to another thread")
            parsed.append(ParsedAnswer(answer, stored))
        return parsed

    def authorize(
        self, answers: Sequence[ParsedAnswer], actor: Principal | Actor | Mapping[str, Any] | None
    ) -> None:
        """Raise :class:`~aais_langgraph.authority.ForbiddenError` for the first answer
        ``actor`` may not give (asked for all before any is recorded)."""
        for item in answers:
            verb, kind = _verb(item.answer)
            self.authority.require(
                actor, verb, item.stored.request_id, decision=kind, stored=item.stored
            )

    def record(
        self,
        answers: Sequence[ParsedAnswer],
        view: ThreadView,
        actor: Principal | Actor | Mapping[str, Any] | None,
    ) -> tuple[list[ApprovalResolved], dict[str, Any]]:
        """Record each answer; collect the resume map for the ones whose run still waits.

        Every answer ``actor`` may not give raises
        :class:`~aais_langgraph.authority.ForbiddenError` before any answer is recorded."""
        self.authorize(answers, actor)
        results: list[ApprovalResolved] = []
        resume: dict[str, Any] = {}
        for item in answers:
            results.append(self._record_item(item, view, actor, resume))
        return results, resume

    def hand_over(
        self,
        answers: Sequence[ParsedAnswer],
        view: ThreadView,
        actor: Principal | Actor | Mapping[str, Any] | None,
        handed: AuthorizedAnswers,
    ) -> tuple[list[ApprovalResolved | AuthorizedAnswer], dict[str, Any]]:
        """As :meth:`record`, but each decision the run waits on and will accept (pending,
        bound to its request and digest, an offered choice, no policy objection) is
        added to ``handed`` unrecorded, and the run is resumed with it: its gate records
        it (the resolution and the execution claim in one write). The others are
        recorded here. Every answer is authorized before any is handed or recorded.

        Args:
            answers: the parsed answers.
            view: the thread's checkpoint, read under its lease.
            actor: the authenticated actor (None: trusted in-process code).
            handed: the run's handed answers (in its ``configurable``), filled here.
        """
        self.authorize(answers, actor)
        results: list[ApprovalResolved | AuthorizedAnswer] = []
        resume: dict[str, Any] = {}
        for item in answers:
            interrupt_id = view.interrupts.get(item.stored.request_id)
            answer = item.answer
            if (
                interrupt_id is not None
                and isinstance(answer, ApprovalDecided)
                and self._accepted(answer, item.stored, actor)
            ):
                entry = AuthorizedAnswer(answer, actor, item.stored)
                handed.add(entry)
                resume[interrupt_id] = answer.to_json()
                results.append(entry)
                continue
            results.append(self._record_item(item, view, actor, resume))
        return results, resume

    def _accepted(
        self,
        answer: ApprovalDecided,
        stored: StoredRequest,
        actor: Principal | Actor | Mapping[str, Any] | None,
    ) -> bool:
        """True when the gate will take ``answer`` without a refusal: its request is
        pending, the binding and choice hold (or it is late: recorded ``expired``) and
        the policy does not object (checked again where it is recorded). A bad reviewer
        note raises here, as recording it would, before anything is handed or recorded."""
        decision_note(answer.decision)
        if stored.status != "pending":
            return False
        authority = self.authority
        request = authority.vouched_request(stored).request
        decision = answer.decision
        verdict = judge(
            request, decision, now=authority.clock(), expires_at=authority.expiry_of(request)
        )
        if verdict.broken == ("expired",):
            return True  # the gate records it ``expired`` (SPEC §11), as this planner would
        if not verdict.passed:
            return False
        if actor is not None:  # the policy sees the decision as it is recorded
            recorded = (
                actor.actor
                if isinstance(actor, Principal)
                else Actor.from_data(actor, pointer="/decision/actor")
            )
            decision = decision.model_copy(update={"actor": recorded})
        return authority.policy.on_decision(request, decision) is None

    def _record_item(
        self,
        item: ParsedAnswer,
        view: ThreadView,
        actor: Principal | Actor | Mapping[str, Any] | None,
        resume: dict[str, Any],
    ) -> ApprovalResolved:
        """Record one authorized answer; add its recorded resolution to ``resume`` when
        its run still waits on it."""
        authority = self.authority
        answer, stored = item.answer, item.stored
        request_id = stored.request_id
        interrupt_id = view.interrupts.get(request_id)
        if isinstance(answer, Cancellation):
            resolved = authority.cancel(
                request_id, reason=answer.reason, actor=actor, stored=stored
            )
        elif interrupt_id is None and self._superseded(view, stored):
            # The run moved on (e.g. state was edited): the action this decision saw is gone.
            resolved = authority.supersede(request_id)
        else:
            resolved = authority.decide(answer, actor=actor, stored=stored)
        if interrupt_id is None:
            return resolved
        # A stale, invalid or conflicting answer changed nothing; resume only with
        # what the ledger holds (a conflict's recorded resolution unsticks the run).
        recorded = (
            resolved
            if resolved.resolution.outcome in TERMINAL
            else authority.get_resolution(request_id)
        )
        if recorded is not None:
            resume[interrupt_id] = recorded.to_json()
        return resolved

    def record_decision(
        self,
        decided: ApprovalDecided,
        actor: Principal | Actor | Mapping[str, Any] | None,
        *,
        stored: StoredRequest | None = None,
    ) -> ApprovalResolved:
        """Record one decision for the request it names, as ``actor`` (the bindings that
        answer a request, not a thread); every outcome is a resolution (``conflict``,
        ``stale``, ``invalid`` included). Raises
        :class:`~aais_langgraph.authority.UnknownRequestError` for an unknown request and
        :class:`~aais_langgraph.authority.ForbiddenError` (nothing recorded) for an
        answer ``actor`` may not give. ``stored``: the request's row, when the caller
        already read it (:meth:`~aais_langgraph.authority.ApprovalAuthority.get_stored_request`);
        otherwise it is read here, once. A thread paused on the request is resumed by
        its durable resume work, written with the resolution."""
        request_id = decided.decision.request_id
        row = stored if stored is not None else self._stored(request_id, "/decision/request_id")
        return self.authority.decide(decided, actor=actor, stored=row)

    async def arecord_decision(
        self,
        decided: ApprovalDecided,
        actor: Principal | Actor | Mapping[str, Any] | None,
        *,
        stored: StoredRequest | None = None,
    ) -> ApprovalResolved:
        """Async twin of :meth:`record_decision` (one hop off the event loop)."""
        return await asyncio.to_thread(self.record_decision, decided, actor, stored=stored)

    def record_cancel(
        self,
        cancellation: Cancellation,
        actor: Principal | Actor | Mapping[str, Any] | None,
        *,
        stored: StoredRequest | None = None,
    ) -> ApprovalResolved:
        """Cancel one request as ``actor`` (a presenter's "dismiss"): its ``cancelled``
        resolution, the one already recorded, or ``invalid`` when the policy objects.
        Raises :class:`~aais_langgraph.authority.UnknownRequestError` and
        :class:`~aais_langgraph.authority.ForbiddenError` (nothing recorded) as
        :meth:`record_decision` does; ``stored`` likewise."""
        request_id = cancellation.request_id
        row = stored if stored is not None else self._stored(request_id, "/request_id")
        return self.authority.cancel(
            request_id, reason=cancellation.reason, actor=actor, stored=row
        )

    async def arecord_cancel(
        self,
        cancellation: Cancellation,
        actor: Principal | Actor | Mapping[str, Any] | None,
        *,
        stored: StoredRequest | None = None,
    ) -> ApprovalResolved:
        """Async twin of :meth:`record_cancel` (one hop off the event loop)."""
        return await asyncio.to_thread(self.record_cancel, cancellation, actor, stored=stored)

    def _stored(self, request_id: str, pointer: str) -> StoredRequest:
        """The vouched stored row of ``request_id``, read once per answer."""
        stored = self.authority.get_stored_request(request_id)
        if stored is None:
            raise UnknownRequestError(pointer)
        return stored

    def check(self, answers: Sequence[OpenAnswer], *, now: datetime | None = None) -> list[int]:
        """Judge each decision once against the request its interrupt carries, in order;
        raise :class:`AnswerRefused` for the first whose binding is wrong (``request``, then
        ``digest``, named before an expiry) or whose choice was not offered. Returns the
        places of the decisions that arrived at or after their request's expiry (by ``now``,
        default the authority's clock)."""
        authority = self.authority
        now = authority.clock() if now is None else now
        late: list[int] = []
        for index, item in enumerate(answers):
            if isinstance(item.answer, ApprovalDecided):
                expires_at = authority.expiry_of(item.request)
                verdict = judge(item.request, item.answer.decision, now=now, expires_at=expires_at)
                rule = verdict.first_of(("request", "digest"))
                if rule not in ("ok", "expired"):
                    raise AnswerRefused(rule, index, item, verdict.message)
                if now >= expires_at:
                    late.append(index)
        return late

    def record_all(
        self,
        answers: Sequence[OpenAnswer],
        actor: Principal | Actor | Mapping[str, Any] | None,
        *,
        handed: AuthorizedAnswers | None = None,
    ) -> dict[str, Any]:
        """All or nothing: the resume map with the recorded resolution of every answer, or
        :class:`AnswerRefused` for the first refused one.

        In order, before anything is recorded: each decision's judgement (:meth:`check`);
        an actor (``unauthenticated``); every answer's authorization (``forbidden``). A
        decision at or after expiry then resolves its request ``expired``, as on every
        channel (SPEC §11), and refuses the set (``expired``). Only then is each answer
        recorded; the authority's own refusal of one (a policy objection, a race lost:
        ``invalid``, ``conflict``) stops there.

        ``handed``: the run's handed answers (in its ``configurable``): a decision the
        gate will accept (pending, no policy objection) is added there instead of being
        recorded, and the run is resumed with it; its gate records the resolution, the
        execution claim and the resume work in one ledger write.
        """
        authority = self.authority
        now = authority.clock()
        late = self.check(answers, now=now)
        if answers and actor is None:
            raise AnswerRefused("unauthenticated", 0, answers[0])
        parsed = [
            ParsedAnswer(item.answer, self._stored(item.request.id, "/request_id"))
            for item in answers
        ]
        for index, item in enumerate(answers):
            try:
                self.authorize([parsed[index]], actor)
            except ForbiddenError as error:
                raise AnswerRefused("forbidden", index, item, error.reason, error.code) from None
        if late:
            for index in late:
                authority.decide(
                    cast(ApprovalDecided, answers[index].answer),
                    actor=actor,
                    stored=parsed[index].stored,
                )
            raise AnswerRefused("expired", late[0], answers[late[0]])
        resume: dict[str, Any] = {}
        for index, item in enumerate(answers):
            stored = parsed[index].stored
            answer = item.answer
            if (
                handed is not None
                and isinstance(answer, ApprovalDecided)
                and self._accepted(answer, stored, actor)
            ):
                handed.add(AuthorizedAnswer(answer, actor, stored))
                resume[item.interrupt_id] = answer.to_json()
                continue
            expired = now >= authority.expiry_of(item.request)
            recorded = self._record_one(index, item, stored, expired, actor)
            resume[item.interrupt_id] = recorded.to_json()
        return resume

    def supersede(
        self, request_id: str, actor: Principal | Actor | Mapping[str, Any] | None
    ) -> ApprovalResolved | None:
        """Resolve ``stale`` a request whose action changed since it was shown (a page tool
        call whose page moved on), when ``actor`` may decide it; None (nothing recorded)
        when they may not, so their answer is planned as sent."""
        try:
            self.authority.require(actor, "decide", request_id)
        except ForbiddenError:
            return None
        return self.authority.supersede(request_id)

    def _record_one(
        self,
        index: int,
        item: OpenAnswer,
        stored: StoredRequest,
        expired: bool,
        actor: Principal | Actor | Mapping[str, Any] | None,
    ) -> ApprovalResolved:
        """Record one answer of an all-or-nothing set; its recorded resolution, or refuse."""
        authority = self.authority
        request_id = item.request.id
        if isinstance(item.answer, Cancellation):
            if expired:
                closed = authority.expire(request_id, actor=actor)
            else:
                closed = authority.cancel(
                    request_id, reason=item.answer.reason, actor=actor, stored=stored
                )
            outcome = closed.resolution
            if outcome.outcome == "invalid":  # the policy refused this actor's cancel
                raise AnswerRefused("invalid", index, item, outcome.message)
            if outcome.outcome not in ("cancelled", "expired"):
                raise AnswerRefused("conflict", index, item, outcome.outcome)
            return closed
        resolved = authority.decide(item.answer, actor=actor, stored=stored)
        outcome = resolved.resolution
        if outcome.outcome not in TERMINAL:
            raise AnswerRefused(outcome.outcome, index, item, outcome.message)
        return resolved

    def _superseded(self, view: ThreadView, stored: StoredRequest) -> bool:
        """True when the thread no longer waits for this unresolved request (its task is gone)."""
        if self.authority.get_resolution(stored.request_id) is not None:
            return False
        return not view.waiting(stored)


def _parse_decided(item: Answer, index: int) -> ApprovalDecided:
    try:
        return parse_envelope(item, expected=ApprovalDecided)  # type: ignore[arg-type]
    except AAISValidationError as error:
        raise AAISValidationError(f"/decisions/{index}{error.pointer}", error.reason) from None


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

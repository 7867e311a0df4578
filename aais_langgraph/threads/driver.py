"""The one driver of paused threads: everything outside a run that answers, resumes or lists them.

A :class:`ThreadDriver` holds what every such path needs once — the graph, the
authority, the run-lease settings and whether it drives for a server (gates then
accept only resolutions the authority recorded) — and offers each operation as
a method with its ``a``-prefixed async twin::

    driver = ThreadDriver(graph, authority)
    driver.resume_with_decisions(config, decided, actor=actor)
    driver.resume_due()          # the durable resume work any process picks up

Every resume runs :meth:`ThreadDriver.drive`: take the thread's run lease, read
its checkpoint (a :class:`~.views.ThreadView`), plan the ``Command(resume=...)``
map, invoke (on a lease the caller holds, with ``thread=``). The answer paths of
``aais_agui`` (the AG-UI agent, the decisions endpoints, the watcher), edits and the
quickstart's module-level functions (thin wrappers at the end of this module) all go
through it, so they cannot drift apart; every answer is authorized by the one planner
(:attr:`ThreadDriver.planner`, :mod:`.answers`), which records it, or, for a decision
that arrives with the resume (:meth:`ThreadDriver.resume_with_decisions`), hands it
to the run: the gate records it with its execution claim and its resume work in one
ledger write.

Durable resume work (:mod:`aais_langgraph.ledger.resume_work`): an answer recorded
outside a run writes "this thread must be resumed" with the resolution.
:meth:`ThreadDriver.resume_due` picks up what is due, resumes it under the lease,
marks it done when the checkpoint shows the answer consumed, and otherwise counts
the attempt, names the error and backs off (never giving up silently); an
execution of unknown outcome hands it to a human (``unknown``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Collection, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig

from ..authority import (
    DEFAULT_LEASE_TTL,
    TERMINAL,
    ApprovalAuthority,
    LeaseHeldError,
    Principal,
    arun_lease,
    holder_origin,
    run_lease,
)
from ..authority.authority import RUN_MOVED_ON
from ..gate.answer_sources import AUTHORIZED_ANSWERS_KEY, AuthorizedAnswer, AuthorizedAnswers
from ..gate.execution import (
    ExecutionUnknownError,
    asettle_finished_claims,
    settle_finished_claims,
)
from ..gate.response import RejectedResumeError
from ..gate.run_context import REQUESTER_KEY, afind_authority, find_authority
from ..gate.seams import task_finished_in, task_of_namespace
from ..ledger import Execution, Lease, StoredRequest, ThreadRecord
from ..ledger.executions import ExecutionChange, presumed_change
from ..ledger.outbox import RESUME, retried_change, settled_change
from ..ledger.resume_work import RESUME_BACKOFF, ResumeWork
from ..observability.traces import RESUME_SPAN, resumed_attributes, traced
from ..protocol import Actor, ApprovalResolved, ApprovalSnapshot, parse_timestamp
from ..protocol.extensions import EXTENSION_NAMESPACE
from .answers import Answer, AnswerPlanner, recorded_resume
from .inbox import awaiting_snapshot, waiting_snapshot
from .recovery import astranded_threads, stranded_threads
from .runs import DEFAULT_LEASE_WAIT, LeasedThread, run_config, thread_of
from .views import ThreadView, checkpointer_of
from .visibility import visible_snapshot

__all__ = [
    "DueReport",
    "ThreadDriver",
    "apending_approvals",
    "aresume_with_decisions",
    "pending_approvals",
    "resume_with_decisions",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass
class DueReport:
    """What one pass over the due resume work did."""

    resumed: list[str] = field(default_factory=list)
    """Request ids whose thread was resumed with their recorded resolution."""
    settled: list[str] = field(default_factory=list)
    """Request ids whose thread no longer waited on them (nothing to resume)."""
    deferred: list[str] = field(default_factory=list)
    """Request ids left due, with one more attempt counted (busy lease, an error)."""
    unknown: list[str] = field(default_factory=list)
    """Request ids whose execution outcome is unknown (a human reconciles them)."""
    stalled: list[str] = field(default_factory=list)
    """Request ids whose work was settled ``unknown`` after :data:`MAX_RESUME_ATTEMPTS`
    (its ``last_error`` names why), listed for a human instead of due for ever."""


MAX_RESUME_ATTEMPTS = 20
"""Failed attempts after which resume work is settled ``unknown`` with its reason (with
the backoff, about eight minutes); a thread whose run lease is held is never given up."""


@dataclass(frozen=True)
class ThreadDriver:
    """Drives paused threads of one graph from outside a run.

    Args:
        graph: The compiled graph (with its checkpointer).
        authority: The approval authority whose ledger holds requests, resolutions,
            leases and resume work.
        config: The base run config of every run this driver starts (the thread id
            is set per call).
        lease_ttl: Seconds a run lease lives without renewal (a holder that dies
            blocks its thread at most this long; one on this host not at all).
        lease_wait: Seconds a call waits for another holder's lease before raising
            :class:`~aais_langgraph.LeaseHeldError`.
        served: Drive for a server: gates accept only resolutions the authority
            already recorded (no caller can switch it off), and this authority
            replaces any other found in a config.
    """

    graph: Any
    authority: ApprovalAuthority
    config: Mapping[str, Any] | None = None
    lease_ttl: float = DEFAULT_LEASE_TTL
    lease_wait: float = DEFAULT_LEASE_WAIT
    served: bool = False

    # -- the mechanism ----------------------------------------------------------------

    def run_config(
        self, config: Mapping[str, Any] | None = None, *, thread_id: str | None = None
    ) -> RunnableConfig:
        """The config of a run this driver starts: its base config, then ``config``,
        the thread, the authority and the claim lifetime that fits the lease."""
        merged: dict[str, Any] = {**(self.config or {}), **(config or {})}
        configurable = {
            **((self.config or {}).get("configurable") or {}),
            **((config or {}).get("configurable") or {}),
        }
        merged["configurable"] = configurable
        return run_config(
            merged,
            self.authority,
            thread_id=thread_id,
            lease_ttl=self.lease_ttl,
            recorded_only=self.served,
        )

    @contextmanager
    def leased(
        self, config: Mapping[str, Any] | None = None, *, lease_wait: float | None = None
    ) -> Iterator[LeasedThread]:
        """Hold the thread's run lease (renewed while held) for the block; raises
        :class:`~aais_langgraph.LeaseHeldError` after ``lease_wait`` seconds (default:
        the driver's) if another holder keeps it."""
        driven = self.run_config(config)
        thread_id = thread_of(driven)
        driven = _acting_for(
            driven, lambda: _sender(self.authority.access.thread_record(thread_id))
        )
        wait = self.lease_wait if lease_wait is None else lease_wait
        finished: list[str] = []
        executions: dict[str, ExecutionChange] = {}
        ledger = self.authority.ledger
        with run_lease(
            ledger,
            thread_id,
            ttl=self.lease_ttl,
            wait=wait,
            done=finished,
            executions=executions,
        ):
            yield LeasedThread(self.graph, driven, thread_id, finished, executions)

    @asynccontextmanager
    async def aleased(
        self, config: Mapping[str, Any] | None = None, *, lease_wait: float | None = None
    ) -> AsyncIterator[LeasedThread]:
        """Async twin of :meth:`leased`."""
        driven = self.run_config(config)
        thread_id = thread_of(driven)
        sender = None
        if REQUESTER_KEY not in (driven.get("configurable") or {}):
            sender = _sender(await self.authority.ledger.athread_record(thread_id))
        driven = _acting_for(driven, lambda: sender)
        wait = self.lease_wait if lease_wait is None else lease_wait
        finished: list[str] = []
        executions: dict[str, ExecutionChange] = {}
        ledger = self.authority.ledger
        async with arun_lease(
            ledger,
            thread_id,
            ttl=self.lease_ttl,
            wait=wait,
            done=finished,
            executions=executions,
        ):
            yield LeasedThread(self.graph, driven, thread_id, finished, executions)

    @traced(RESUME_SPAN, resumed_attributes)
    def drive(
        self,
        config: Mapping[str, Any] | None,
        plan: Callable[[ThreadView], tuple[Mapping[str, Any], T]],
        *,
        context: Any = None,
        lease_wait: float | None = None,
        thread: LeasedThread | None = None,
    ) -> T:
        """Under the thread's lease: read its checkpoint, ``plan`` the resume map (empty:
        nothing is invoked), invoke; returns what ``plan`` returned with the map. The
        resume work of every request the thread was resumed with is then done (marked
        in the lease's release). ``thread``: a lease the caller holds (from
        :meth:`leased`), driven without taking another.

        Args:
            config: the run config naming the thread.
            plan: given the thread's view, the resume map and what to return.
            context: the LangGraph runtime context for the resumed run.
            lease_wait: seconds to wait for the lease (default: the driver's).
            thread: a lease the caller holds, driven without taking another.
        """
        if thread is not None:
            return _drive_held(thread, plan, context)
        with self.leased(config, lease_wait=lease_wait) as held:
            return _drive_held(held, plan, context)

    @traced(RESUME_SPAN, resumed_attributes)
    async def adrive(
        self,
        config: Mapping[str, Any] | None,
        plan: Callable[[ThreadView], tuple[Mapping[str, Any], T]],
        *,
        context: Any = None,
        lease_wait: float | None = None,
        thread: LeasedThread | None = None,
    ) -> T:
        """Async twin of :meth:`drive` (``plan`` runs in a worker thread, as the ledger
        calls in it block)."""
        if thread is not None:
            return await _adrive_held(thread, plan, context)
        async with self.aleased(config, lease_wait=lease_wait) as held:
            return await _adrive_held(held, plan, context)

    # -- reading ------------------------------------------------------------------

    def view(self, thread_id: str) -> ThreadView:
        """What the thread's checkpoint says (no lease taken)."""
        return LeasedThread(self.graph, self.run_config(thread_id=thread_id), thread_id).view()

    async def aview(self, thread_id: str) -> ThreadView:
        """Async twin of :meth:`view`."""
        thread = LeasedThread(self.graph, self.run_config(thread_id=thread_id), thread_id)
        return await thread.aview()

    def pending_approvals(
        self,
        *,
        session_id: str | None = None,
        now: datetime | None = None,
        reconcile: bool = True,
        viewer: Principal | None = None,
    ) -> ApprovalSnapshot:
        """``approval.snapshot`` of what the threads really wait for
        (:func:`~.inbox.waiting_snapshot`), with the answers still waiting to resume in
        its :data:`RESUMING_EXTENSION`; with ``viewer``, only what they may see
        (:func:`~.visibility.visible_snapshot`).

        Args:
            session_id: only this session's requests.
            now: the moment expiry is judged at (default: the authority's clock).
            reconcile: also report runs paused on requests the ledger does not hold.
            viewer: the authenticated principal: only what they may see (None: everything).
        """
        self.settle_claims()
        snapshot = waiting_snapshot(
            self.authority,
            self.graph,
            session_id=session_id,
            now=now,
            reconcile=reconcile,
            selection=self.authority.view_selection(viewer),
        )
        listed = with_resuming(snapshot, self.waiting_resumes(session_id=session_id))
        return visible_snapshot(self.authority, listed, viewer)

    async def apending_approvals(
        self,
        *,
        session_id: str | None = None,
        now: datetime | None = None,
        reconcile: bool = True,
        viewer: Principal | None = None,
    ) -> ApprovalSnapshot:
        """Async twin of :meth:`pending_approvals`."""
        await self.asettle_claims()
        snapshot = await awaiting_snapshot(
            self.authority,
            self.graph,
            session_id=session_id,
            now=now,
            reconcile=reconcile,
            selection=self.authority.view_selection(viewer),
        )
        resuming = await asyncio.to_thread(self.waiting_resumes, session_id=session_id)
        listed = with_resuming(snapshot, resuming)
        return await asyncio.to_thread(visible_snapshot, self.authority, listed, viewer)

    def waiting_resumes(self, *, session_id: str | None = None) -> list[dict[str, Any]]:
        """Answers recorded whose thread still has to be resumed (open resume work), each
        with its outcome, since, attempts, last error and lease holder."""
        return waiting_resumes(self.authority, session_id=session_id)

    # -- answering --------------------------------------------------------------------

    @property
    def planner(self) -> AnswerPlanner:
        """The one answer planner (:mod:`~.answers`): the only place that authorizes and
        records answers for a paused thread, one by one or all or nothing."""
        return AnswerPlanner(self.authority)

    def resume_with_decisions(
        self,
        config: Mapping[str, Any],
        decisions: Sequence[Answer] | Answer,
        *,
        actor: Principal | Actor | Mapping[str, Any] | None,
        context: Any = None,
    ) -> list[ApprovalResolved]:
        """Answer pending approvals of one thread and resume it (see the module-level
        :func:`resume_with_decisions`).

        Args:
            config: the run config naming the thread.
            decisions: one answer or several (decided envelopes, :class:`~.answers.Cancellation`).
            actor: the authenticated actor; replaces the actor of each decision body (None:
                trusted in-process code).
            context: the LangGraph runtime context for the resumed run.
        """
        planner = self.planner
        answers = planner.parse(thread_of(self.run_config(config)), decisions)
        handed = AuthorizedAnswers()
        planned: list[Planned] = []

        def plan(view: ThreadView) -> tuple[dict[str, Any], list[Planned]]:
            results, resume = planner.hand_over(answers, view, actor, handed)
            planned[:] = results
            return resume, results

        try:
            self.drive(_handing(config, handed), plan, context=context)
        except RejectedResumeError:
            if not _refused_in_run(handed):
                raise
        return [self._outcome(item) for item in planned]

    async def aresume_with_decisions(
        self,
        config: Mapping[str, Any],
        decisions: Sequence[Answer] | Answer,
        *,
        actor: Principal | Actor | Mapping[str, Any] | None,
        context: Any = None,
    ) -> list[ApprovalResolved]:
        """Async twin of :meth:`resume_with_decisions`."""
        planner = self.planner
        thread_id = thread_of(self.run_config(config))
        answers = await asyncio.to_thread(planner.parse, thread_id, decisions)
        handed = AuthorizedAnswers()
        planned: list[Planned] = []

        def plan(view: ThreadView) -> tuple[dict[str, Any], list[Planned]]:
            results, resume = planner.hand_over(answers, view, actor, handed)
            planned[:] = results
            return resume, results

        try:
            await self.adrive(_handing(config, handed), plan, context=context)
        except RejectedResumeError:
            if not _refused_in_run(handed):
                raise
        return [await asyncio.to_thread(self._outcome, item) for item in planned]

    def _outcome(self, item: Planned) -> ApprovalResolved:
        """What an answer came to: recorded by the planner, or by the gate it was handed
        to; a handed answer no gate took (its run did not reach it) is recorded now, with
        its durable resume work."""
        if isinstance(item, ApprovalResolved):
            return item
        if item.recorded is not None:
            return item.recorded
        return self.authority.decide(item.decided, actor=item.actor, stored=item.stored)

    # -- resuming what was recorded elsewhere ----------------------------------------

    def recorded_plan(
        self, thread_id: str | None = None, *, only: Collection[str] | None = None
    ) -> Callable[[ThreadView], tuple[dict[str, Any], list[ApprovalResolved]]]:
        """The plan that resumes every waiting request (of ``only``, when given) that has a
        recorded resolution with it (:func:`~.answers.recorded_resume`); with ``thread_id``,
        it also settles the open work of requests the thread no longer waits on."""
        authority = self.authority

        def plan(view: ThreadView) -> tuple[dict[str, Any], list[ApprovalResolved]]:
            resume, results = recorded_resume(authority, view, only=only)
            if thread_id is not None:
                _settle_gone(authority, thread_id, view)
            return resume, results

        return plan

    def resume_resolved(
        self,
        thread_id: str,
        *,
        config: Mapping[str, Any] | None = None,
        context: Any = None,
        lease_wait: float | None = None,
    ) -> list[ApprovalResolved]:
        """Resume a thread whose waiting requests were resolved elsewhere (CLI, sweep,
        cancel, a decisions endpoint), each with its recorded resolution; the others
        stay pending.

        Args:
            thread_id: the thread to resume.
            config: a run config to resume it with.
            context: the LangGraph runtime context for the resumed run.
            lease_wait: seconds to wait for the lease (default: the driver's).
        """
        return self.drive(
            _with_thread(config, thread_id),
            self.recorded_plan(thread_id),
            context=context,
            lease_wait=lease_wait,
        )

    async def aresume_resolved(
        self,
        thread_id: str,
        *,
        config: Mapping[str, Any] | None = None,
        context: Any = None,
        lease_wait: float | None = None,
    ) -> list[ApprovalResolved]:
        """Async twin of :meth:`resume_resolved`."""
        return await self.adrive(
            _with_thread(config, thread_id),
            self.recorded_plan(thread_id),
            context=context,
            lease_wait=lease_wait,
        )

    def resume_stranded(
        self, *, after_sequence: int = 0, context: Any = None
    ) -> list[ApprovalResolved]:
        """Resume every thread paused on a request that already has a resolution (found
        from the event stream after ``after_sequence``: also ledgers written before
        resume work existed).

        Each thread is resumed under its run lease, so a sweep racing a presenter's
        retry resumes it once. A thread whose lease stays held (a live run drives it, or
        a crashed remote holder's lease has not expired yet), or whose gate refuses the
        resume for now (another run's execution claim on the approval, or an outcome
        that is unknown until a human reconciles it), is left for the next sweep.
        Approvals an approval's own resume work waits for are resumed by
        :meth:`resume_due` too."""
        resumed: list[ApprovalResolved] = []
        self.settle_claims()
        for thread_id in stranded_threads(
            self.graph, self.authority, after_sequence=after_sequence
        ):
            try:
                resumed += self.resume_resolved(thread_id, context=context)
            except (LeaseHeldError, RejectedResumeError):
                continue
        return resumed

    async def aresume_stranded(
        self, *, after_sequence: int = 0, context: Any = None
    ) -> list[ApprovalResolved]:
        """Async twin of :meth:`resume_stranded`."""
        resumed: list[ApprovalResolved] = []
        await self.asettle_claims()
        for thread_id in await astranded_threads(
            self.graph, self.authority, after_sequence=after_sequence
        ):
            try:
                resumed += await self.aresume_resolved(thread_id, context=context)
            except (LeaseHeldError, RejectedResumeError):
                continue
        return resumed

    def sweep_expired(
        self, *, now: datetime | None = None, context: Any = None
    ) -> list[ApprovalResolved]:
        """Resolve overdue requests ``expired`` and resume their runs so none hangs forever
        (a busy thread is resumed later, from its resume work)."""
        expired = self.authority.expire_due(now=now)
        for thread_id in self._threads_of(expired):
            self._resume_soon(thread_id, context)
        return expired

    async def asweep_expired(
        self, *, now: datetime | None = None, context: Any = None
    ) -> list[ApprovalResolved]:
        """Async twin of :meth:`sweep_expired`."""
        expired = await asyncio.to_thread(self.authority.expire_due, now=now)
        for thread_id in await asyncio.to_thread(self._threads_of, expired):
            await self._aresume_soon(thread_id, context)
        return expired

    def cancel_thread(self, thread_id: str, *, context: Any = None) -> list[ApprovalResolved]:
        """Cancel every pending request of a thread and let its run continue past them."""
        cancelled = self.authority.cancel_thread(thread_id)
        if cancelled:
            self._resume_soon(thread_id, context)
        return cancelled

    async def acancel_thread(
        self, thread_id: str, *, context: Any = None
    ) -> list[ApprovalResolved]:
        """Async twin of :meth:`cancel_thread`."""
        cancelled = await asyncio.to_thread(self.authority.cancel_thread, thread_id)
        if cancelled:
            await self._aresume_soon(thread_id, context)
        return cancelled

    def _threads_of(self, resolved: Sequence[ApprovalResolved]) -> list[str]:
        threads: set[str] = set()
        for item in resolved:
            record = self.authority.get_stored_request(item.resolution.request_id)
            if record is not None and record.thread_id is not None:
                threads.add(record.thread_id)
        return sorted(threads)

    def _resume_soon(self, thread_id: str, context: Any) -> None:
        try:
            self.resume_resolved(thread_id, context=context)
        except LeaseHeldError:
            logger.info("a busy thread is resumed later, from its resume work")

    async def _aresume_soon(self, thread_id: str, context: Any) -> None:
        try:
            await self.aresume_resolved(thread_id, context=context)
        except LeaseHeldError:
            logger.info("a busy thread is resumed later, from its resume work")

    def cancel_orphans(
        self, *, thread_id: str | None = None, settled_for: float = 0.0
    ) -> list[ApprovalResolved]:
        """Cancel the pending requests (of one thread, or all) whose thread no longer waits
        on them: a forked or regenerated run left them behind. SPEC §11: a run's
        cancellation resolves its pending requests ``cancelled``; the resolution names
        ``aais-langgraph.run_moved_on``. A request whose task is still live (stored, not
        yet paused on) is left alone.

        ``settled_for``: a request created less than that many seconds ago (by the
        authority's clock) is left for a later sweep. A gate records its request before
        LangGraph has stored the checkpoint that shows its task, so a sweep of every
        thread (another process's, say) must not judge a request of that moment."""
        cancelled: list[ApprovalResolved] = []
        recorded_by = self._recorded_by(settled_for)
        for thread, stored in _pending_by_thread(self.authority, thread_id).items():
            view = self.view(thread)
            if not view.known:  # not this graph's thread: another graph may wait on it
                continue
            for item in stored:
                if _created_at(item) <= recorded_by and not view.waiting(item):
                    cancelled.append(self._orphaned(item.request_id))
        return cancelled

    async def acancel_orphans(
        self, *, thread_id: str | None = None, settled_for: float = 0.0
    ) -> list[ApprovalResolved]:
        """Async twin of :meth:`cancel_orphans`."""
        cancelled: list[ApprovalResolved] = []
        recorded_by = self._recorded_by(settled_for)
        pending = await asyncio.to_thread(_pending_by_thread, self.authority, thread_id)
        for thread, stored in pending.items():
            view = await self.aview(thread)
            if not view.known:  # not this graph's thread: another graph may wait on it
                continue
            for item in stored:
                if _created_at(item) <= recorded_by and not await view.awaiting(item):
                    cancelled.append(await asyncio.to_thread(self._orphaned, item.request_id))
        return cancelled

    def _recorded_by(self, settled_for: float) -> datetime:
        """The latest creation time of a request a sweep may judge."""
        if not 0 <= settled_for < float("inf"):
            raise ValueError("settled_for: expected a finite number of seconds, at least 0")
        return self.authority.clock() - timedelta(seconds=settled_for)

    def _orphaned(self, request_id: str) -> ApprovalResolved:
        return self.authority.cancel(
            request_id, reason="The run moved on without this request.", actor=RUN_MOVED_ON
        )

    # -- durable resume work ------------------------------------------------------------

    def resume_due(
        self, *, now: float | None = None, limit: int = 100, context: Any = None
    ) -> DueReport:
        """Pick up the resume work due now (at most ``limit`` rows): resume each thread
        under its lease without waiting; a busy lease, a refusal or an error counts an
        attempt and backs off; an unknown execution outcome goes to a human."""
        report = DueReport()
        moment = time.time() if now is None else now
        self.settle_claims()
        due = self.authority.ledger.list_work(
            RESUME, states=("due",), due_before=moment, limit=limit
        )
        for thread_id, work in _by_thread(due).items():
            try:
                resumed = self.resume_resolved(thread_id, context=context, lease_wait=0)
                left = _not_resumed(work, resumed)
                if left:
                    self._drive_on(thread_id, left, context)
            except Exception as error:  # every failure is counted, named and retried
                self._failed(work, error, report, moment)
                continue
            self._after(work, resumed, report, moment)
        return report

    async def aresume_due(
        self, *, now: float | None = None, limit: int = 100, context: Any = None
    ) -> DueReport:
        """Async twin of :meth:`resume_due`."""
        report = DueReport()
        moment = time.time() if now is None else now
        await self.asettle_claims()
        due = await self.authority.ledger.alist_work(
            RESUME, states=("due",), due_before=moment, limit=limit
        )
        for thread_id, work in _by_thread(due).items():
            try:
                resumed = await self.aresume_resolved(thread_id, context=context, lease_wait=0)
                left = _not_resumed(work, resumed)
                if left:
                    await self._adrive_on(thread_id, left, context)
            except Exception as error:  # every failure is counted, named and retried
                await asyncio.to_thread(self._failed, work, error, report, moment)
                continue
            await asyncio.to_thread(self._after, work, resumed, report, moment)
        return report

    def settle_claims(self) -> list[str]:
        """Record ``executed`` for the execution claims no run may still be holding (dead,
        or on a thread whose run lease is free) whose nodes finished: their task's writes
        are in the checkpoint (:func:`~aais_langgraph.gate.execution.settle_finished_claims`).
        Returns the request ids settled."""
        saver = checkpointer_of(self.graph)
        if saver is None:
            return []
        return settle_finished_claims(self.authority, saver, looked_at=self._unheld)

    async def asettle_claims(self) -> list[str]:
        """Async twin of :meth:`settle_claims`."""
        saver = checkpointer_of(self.graph)
        if saver is None:
            return []
        return await asettle_finished_claims(self.authority, saver, looked_at=self._unheld)

    def _unheld(self, record: Execution) -> bool:
        """True when no run may still be executing under ``record``'s claim."""
        now = time.time()
        if not record.live(now) or record.thread_id is None:
            return True
        lease = self.authority.ledger.get_lease(record.thread_id)
        return lease is None or lease.expires_at <= now

    def _stored_steps(self, latest: Any, work: Sequence[ResumeWork]) -> list[str]:
        """The requests of ``work`` whose task finished in the checkpoint ``latest``."""
        finished: list[str] = []
        for item in work:
            stored = self.authority.get_stored_request(item.request_id)
            namespace = "" if stored is None else str(stored.context.get("checkpoint_ns", ""))
            task = task_of_namespace(namespace)
            if latest is not None and task is not None and task_finished_in(latest, task):
                finished.append(item.request_id)
        return finished

    def _presume_unfinished(self, thread_id: str) -> None:
        """Before a thread is driven on from its checkpoint: a dead claim whose node did not
        finish turns ``unknown``, so the re-run does not run its action again."""
        now = time.time()
        for record in self.authority.ledger.list_executions(
            states=("executing",), thread_id=thread_id
        ):
            self.authority.change_execution(record.request_id, presumed_change(now))

    def _drive_on(self, thread_id: str, work: Sequence[ResumeWork], context: Any) -> None:
        """Drive on a thread whose answered step stored its task's writes but not the next
        checkpoint (a crash in between): under its lease, LangGraph continues the step from
        the stored writes (``invoke(None)``); the work of the finished tasks is done."""
        saver = checkpointer_of(self.graph)
        if saver is None:
            return
        with self.leased(_with_thread(None, thread_id), lease_wait=0) as thread:
            finished = self._stored_steps(saver.get_tuple(thread.config), work)
            if not finished:
                return
            thread.settle_claims()
            self._presume_unfinished(thread_id)
            thread.proceed(None, context)
            thread.finished.extend(finished)

    async def _adrive_on(self, thread_id: str, work: Sequence[ResumeWork], context: Any) -> None:
        """Async twin of :meth:`_drive_on`."""
        saver = checkpointer_of(self.graph)
        if saver is None:
            return
        async with self.aleased(_with_thread(None, thread_id), lease_wait=0) as thread:
            latest = await saver.aget_tuple(thread.config)
            finished = await asyncio.to_thread(self._stored_steps, latest, work)
            if not finished:
                return
            await thread.asettle_claims()
            await asyncio.to_thread(self._presume_unfinished, thread_id)
            await thread.aproceed(None, context)
            thread.finished.extend(finished)

    def _after(
        self,
        work: list[ResumeWork],
        resumed: list[ApprovalResolved],
        report: DueReport,
        now: float,
    ) -> None:
        """Sort a thread's work after a resume: resumed, settled, or still waiting for its
        run to pause (a live task that has not checkpointed its interrupt yet)."""
        ids = {item.resolution.request_id for item in resumed}
        ledger = self.authority.ledger
        for item in work:
            if item.request_id in ids:
                report.resumed.append(item.request_id)
                continue
            current = ledger.get_work(RESUME, item.request_id)
            if current is None or current.state != "due":
                report.settled.append(item.request_id)
                continue
            self._attempt(current, "the thread has not paused on the request yet", report, now)

    def _attempt(
        self,
        work: ResumeWork,
        reason: str,
        report: DueReport,
        now: float,
        *,
        retry_at: float | None = None,
        held: bool = False,
    ) -> None:
        """Count a failed attempt (``held``: the thread's lease was busy); past
        :data:`MAX_RESUME_ATTEMPTS` the work is settled ``unknown`` with ``reason``."""
        ledger = self.authority.ledger
        if not held and work.attempts + 1 >= MAX_RESUME_ATTEMPTS:
            given_up = f"{reason} after {work.attempts + 1} attempts; a human must look"
            ledger.update_work(
                RESUME, work.request_id, settled_change("unknown", now, reason=given_up)
            )
            report.stalled.append(work.request_id)
            return
        retried = retried_change(reason, now, backoff=RESUME_BACKOFF, sooner=retry_at)
        ledger.update_work(RESUME, work.request_id, retried)
        report.deferred.append(work.request_id)

    def _failed(
        self, work: list[ResumeWork], error: Exception, report: DueReport, now: float
    ) -> None:
        """Count the attempt on each row of the thread, naming why (never a value)."""
        ledger = self.authority.ledger
        retry_at: float | None = None
        if isinstance(error, LeaseHeldError):
            lease = ledger.get_lease(str(work[0].thread_id))
            reason = "the thread's run lease is held" + _held_by(lease)
            retry_at = None if lease is None else lease.expires_at
        elif isinstance(error, RejectedResumeError):
            reason = f"the gate refused the resume ({error.code})"
        else:
            reason = f"resuming failed: {type(error).__name__}"
            logger.warning("resume work: %s", reason)
        for item in work:
            if isinstance(error, ExecutionUnknownError) and error.request_id == item.request_id:
                ledger.update_work(RESUME, item.request_id, settled_change("unknown", now))
                report.unknown.append(item.request_id)
                continue
            if isinstance(error, ExecutionUnknownError):
                cause = "another approval of the thread has an unknown outcome"
            else:
                cause = reason
            self._attempt(
                item, cause, report, now, retry_at=retry_at, held=isinstance(error, LeaseHeldError)
            )


Planned = ApprovalResolved | AuthorizedAnswer
"""An answer as planned: recorded by the planner, or handed to the run's gate."""


def _handing(config: Mapping[str, Any], handed: AuthorizedAnswers) -> dict[str, Any]:
    """``config`` whose run is handed ``handed`` (the planner fills it under the lease)."""
    configurable = {**(config.get("configurable") or {}), AUTHORIZED_ANSWERS_KEY: handed}
    return {**config, "configurable": configurable}


def _refused_in_run(handed: AuthorizedAnswers) -> bool:
    """True when a gate refused a handed answer it recorded nothing for (a decision that
    lost a race with another channel's): the refusal is that answer's outcome."""
    return any(
        entry.recorded is not None and entry.recorded.resolution.outcome not in TERMINAL
        for entry in handed
    )


def _drive_held(
    thread: LeasedThread, plan: Callable[[ThreadView], tuple[Mapping[str, Any], T]], context: Any
) -> T:
    """One step of :meth:`ThreadDriver.drive` on a held lease: read, plan, resume, finish."""
    view = thread.view()
    resume, result = plan(view)
    thread.resume(resume, context)
    thread.finish(view, resume)
    return result


async def _adrive_held(
    thread: LeasedThread, plan: Callable[[ThreadView], tuple[Mapping[str, Any], T]], context: Any
) -> T:
    """Async twin of :func:`_drive_held`."""
    view = await thread.aview()
    resume, result = await asyncio.to_thread(plan, view)
    await thread.aresume(resume, context)
    thread.finish(view, resume)
    return result


def _not_resumed(
    work: Sequence[ResumeWork], resumed: Sequence[ApprovalResolved]
) -> list[ResumeWork]:
    """The rows of ``work`` whose request was not among those a resume answered."""
    ids = {item.resolution.request_id for item in resumed}
    return [item for item in work if item.request_id not in ids]


def _created_at(stored: StoredRequest) -> datetime:
    """When a stored request was created (its envelope's ``created_at``)."""
    return parse_timestamp(stored.envelope["request"]["created_at"], "/request/created_at")


def _pending_by_thread(
    authority: ApprovalAuthority, thread_id: str | None
) -> dict[str, list[StoredRequest]]:
    by_thread: dict[str, list[StoredRequest]] = {}
    for stored in authority.ledger.list_pending(thread_id=thread_id):
        if stored.thread_id is not None:
            by_thread.setdefault(stored.thread_id, []).append(stored)
    return by_thread


def _by_thread(work: Sequence[ResumeWork]) -> dict[str, list[ResumeWork]]:
    by_thread: dict[str, list[ResumeWork]] = {}
    for item in work:
        by_thread.setdefault(str(item.thread_id), []).append(item)
    return by_thread


def _held_by(lease: Lease | None) -> str:
    if lease is None:
        return ""
    origin = holder_origin(lease.holder)
    return "" if origin is None else f" by process {origin.label()}"


def _settle_gone(authority: ApprovalAuthority, thread_id: str, view: ThreadView) -> None:
    """Mark done the open work of the thread's requests it no longer waits on (nothing, for
    a thread this graph has no checkpoint of: another graph serving the same ledger may
    be the one to resume it)."""
    if not view.known:
        return
    ledger = authority.ledger
    now = time.time()
    for work in ledger.list_work(RESUME, states=("due",), thread_id=thread_id):
        if work.request_id in view.interrupts:
            continue
        stored = authority.get_stored_request(work.request_id)
        if stored is None or not view.waiting(stored):
            ledger.update_work(RESUME, work.request_id, settled_change("done", now))


def _sender(record: ThreadRecord | None) -> str | None:
    return None if record is None else record.sender


def _acting_for(config: RunnableConfig, sender: Callable[[], str | None]) -> RunnableConfig:
    """``config`` whose requests are raised for the author of the thread's latest post (who
    sent the run it continues) when the caller names no requester: a resume from durable
    work, a watcher's, a CLI's or an approver's still asks on their behalf."""
    configurable = config.get("configurable") or {}
    if REQUESTER_KEY in configurable:
        return config
    found = sender()
    if found is None:
        return config
    acting: RunnableConfig = {**config, "configurable": {**configurable, REQUESTER_KEY: found}}
    return acting


def _with_thread(config: Mapping[str, Any] | None, thread_id: str) -> dict[str, Any]:
    base: dict[str, Any] = dict(config or {})
    return {**base, "configurable": {**(base.get("configurable") or {}), "thread_id": thread_id}}


RESUMING_EXTENSION = EXTENSION_NAMESPACE + "resuming"
"""Snapshot extension: answers recorded whose thread still has to be resumed (a list of
``{request_id, thread_id, outcome, state, since, attempts, next_at, last_error,
lease_holder}``)."""


def waiting_resumes(
    authority: ApprovalAuthority,
    *,
    session_id: str | None = None,
    request_id: str | None = None,
) -> list[dict[str, Any]]:
    """Open resume work (of one session, or one request), each with its recorded outcome
    and the thread's lease holder (``pid@host`` or None)."""
    ledger = authority.ledger
    listed: list[dict[str, Any]] = []
    if request_id is not None:
        one = ledger.get_work(RESUME, request_id)
        found = [] if one is None or one.state == "done" else [one]
    else:
        found = ledger.list_work(RESUME)
    for work in found:
        stored = ledger.get_request(work.request_id)
        if session_id is not None and (stored is None or stored.session_id != session_id):
            continue
        resolution = ledger.get_resolution(work.request_id)
        outcome = None if resolution is None else resolution.envelope["resolution"]["outcome"]
        lease = ledger.get_lease(str(work.thread_id))
        holder = None
        if lease is not None and lease.expires_at > time.time():
            origin = holder_origin(lease.holder)
            holder = "another process" if origin is None else origin.label()
        listed.append({**work.to_json(), "outcome": outcome, "lease_holder": holder})
    return listed


def with_resuming(snapshot: ApprovalSnapshot, resuming: list[dict[str, Any]]) -> ApprovalSnapshot:
    """``snapshot`` with the :data:`RESUMING_EXTENSION` (unchanged when nothing waits)."""
    if not resuming:
        return snapshot
    extensions = dict(snapshot.extensions or {})
    extensions[RESUMING_EXTENSION] = resuming
    return snapshot.model_copy(update={"extensions": extensions})


# -- the quickstart's module-level names: thin wrappers over a ThreadDriver -------------


def resume_with_decisions(
    graph: Any,
    config: RunnableConfig,
    decisions: Sequence[Answer] | Answer,
    *,
    actor: Principal | Actor | Mapping[str, Any] | None,
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

    Args:
        graph: the compiled graph, with its checkpointer.
        config: the run config naming the thread.
        decisions: one answer or several (decided envelopes, :class:`~.answers.Cancellation`).
        actor: the authenticated actor; replaces the actor of each decision body (None: trusted
            in-process code).
        authority: the authority (default: the one in ``config``).
        context: the LangGraph runtime context for the resumed run.
        lease_ttl: seconds the thread's run lease lives after its last renewal.
        lease_wait: seconds to wait while another presenter holds the lease.
    """
    found = find_authority(authority, config, context=context)
    driver = ThreadDriver(graph, found, lease_ttl=lease_ttl, lease_wait=lease_wait)
    return driver.resume_with_decisions(config, decisions, actor=actor, context=context)


async def aresume_with_decisions(
    graph: Any,
    config: RunnableConfig,
    decisions: Sequence[Answer] | Answer,
    *,
    actor: Principal | Actor | Mapping[str, Any] | None,
    authority: ApprovalAuthority | None = None,
    context: Any = None,
    lease_ttl: float = DEFAULT_LEASE_TTL,
    lease_wait: float = DEFAULT_LEASE_WAIT,
) -> list[ApprovalResolved]:
    """Async twin of :func:`resume_with_decisions`."""
    # An environment's ledger is opened off the event loop.
    found = await afind_authority(authority, config, context=context)
    driver = ThreadDriver(graph, found, lease_ttl=lease_ttl, lease_wait=lease_wait)
    return await driver.aresume_with_decisions(config, decisions, actor=actor, context=context)


def pending_approvals(
    authority: ApprovalAuthority,
    graph: Any | None = None,
    *,
    session_id: str | None = None,
    now: datetime | None = None,
    reconcile: bool = True,
    viewer: Principal | None = None,
) -> ApprovalSnapshot:
    """``approval.snapshot`` of unexpired requests that are pending in the ledger *and*,
    when ``graph`` is given, still waited for by their thread; answers whose thread
    still has to be resumed are listed in its :data:`RESUMING_EXTENSION`. With
    ``viewer`` (the authenticated principal), only what they may see.

    See :func:`~.inbox.waiting_snapshot` for what is read (one indexed ledger query,
    one checkpoint read per thread) and for ``reconcile`` (runs paused on requests
    the ledger does not hold are reported in the ``integrity_errors`` extension).
    ``now`` defaults to the authority's clock.

    Args:
        authority: the authority whose ledger is listed.
        graph: the graph whose threads must still wait (None: the ledger alone).
        session_id: only this session's requests.
        now: the moment expiry is judged at.
        reconcile: also report runs paused on requests the ledger does not hold.
        viewer: the authenticated principal: only what they may see (None: everything).
    """
    driver = ThreadDriver(graph, authority)
    return driver.pending_approvals(
        session_id=session_id, now=now, reconcile=reconcile, viewer=viewer
    )


async def apending_approvals(
    authority: ApprovalAuthority,
    graph: Any | None = None,
    *,
    session_id: str | None = None,
    now: datetime | None = None,
    reconcile: bool = True,
    viewer: Principal | None = None,
) -> ApprovalSnapshot:
    """Async twin of :func:`pending_approvals` (async checkpointers welcome)."""
    driver = ThreadDriver(graph, authority)
    return await driver.apending_approvals(
        session_id=session_id, now=now, reconcile=reconcile, viewer=viewer
    )

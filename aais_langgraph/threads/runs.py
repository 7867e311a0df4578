"""A driven run: its config, its thread, which requests it waits for, the leased handle.

The pieces :class:`~.driver.ThreadDriver` is built from, apart from it so the
answer planning and the listings can use them without importing the driver.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.types import Command

from ..authority import ApprovalAuthority
from ..gate.answer_sources import RECORDED_ONLY_KEY
from ..gate.execution import (
    afinished_claims,
    asettle_finished_claims,
    finished_claims,
    settle_finished_claims,
)
from ..gate.run_context import AUTHORITY_KEY, CLAIM_TTL_KEY, claim_ttl_for_lease
from ..ledger import StoredRequest
from ..ledger.executions import ExecutionChange, finish_change
from .views import ThreadView, aread_view, checkpointer_of, read_view, waiting_request_ids

__all__ = [
    "DEFAULT_LEASE_WAIT",
    "LeasedThread",
    "awaiting_among",
    "context_kwargs",
    "run_config",
    "thread_of",
    "waiting_among",
]


DEFAULT_LEASE_WAIT = 10.0
"""Seconds every driver waits for another holder's run lease before raising
:class:`~aais_langgraph.LeaseHeldError`. Long enough for a presenter racing another
one to get its turn after a short resume; short enough to answer an HTTP request.
A run holding the lease longer (a slow approved action) is left to the callers
that retry: the watcher, the decisions endpoint and recovery sweeps."""


def thread_of(config: RunnableConfig) -> str:
    """The ``configurable.thread_id`` of ``config`` (a value error naming it if absent)."""
    thread_id = (config.get("configurable") or {}).get("thread_id")
    if thread_id is None:
        raise ValueError("config: configurable.thread_id is required")
    return str(thread_id)


def run_config(
    config: Mapping[str, Any] | None,
    authority: ApprovalAuthority,
    *,
    thread_id: str | None = None,
    lease_ttl: float | None = None,
    recorded_only: bool = False,
) -> RunnableConfig:
    """``config`` for a run the project drives: the authority in ``configurable`` (for
    gates that look there), the execution-claim lifetime that fits the lease
    (``lease_ttl``), and for a server the flag that makes gates accept only
    resolutions the authority recorded (:data:`~.answer_sources.RECORDED_ONLY_KEY`; the
    server's authority then replaces any other).

    Args:
        config: the caller's run config (None: an empty one).
        authority: the authority gates find in ``configurable``.
        thread_id: the thread to run (replaces the config's).
        lease_ttl: the run lease's lifetime, which the execution claims fit.
        recorded_only: gates accept only resolutions the authority recorded (a server).
    """
    base = dict(config or {})
    configurable = dict(base.get("configurable") or {})
    if thread_id is not None:
        configurable["thread_id"] = thread_id
    if recorded_only:
        configurable[AUTHORITY_KEY] = authority
        configurable[RECORDED_ONLY_KEY] = True
    else:
        configurable.setdefault(AUTHORITY_KEY, authority)
    if lease_ttl is not None:
        configurable[CLAIM_TTL_KEY] = claim_ttl_for_lease(lease_ttl)
    return {**base, "configurable": configurable}  # type: ignore[typeddict-item]


def context_kwargs(context: Any) -> dict[str, Any]:
    """The ``invoke`` keyword arguments carrying a runtime context (none for ``None``)."""
    return {} if context is None else {"context": context}


def _by_thread(records: Iterable[StoredRequest]) -> tuple[set[str], dict[str, list[StoredRequest]]]:
    unplaced: set[str] = set()
    by_thread: dict[str, list[StoredRequest]] = defaultdict(list)
    for stored in records:
        if stored.thread_id is None:
            unplaced.add(stored.request_id)
        else:
            by_thread[stored.thread_id].append(stored)
    return unplaced, by_thread


def waiting_among(
    graph: Any,
    authority: ApprovalAuthority,
    records: Sequence[StoredRequest],
    interrupted: Mapping[str, set[str]] | None = None,
) -> set[str]:
    """Ids of the (unresolved) ``records`` their threads still wait for
    (:meth:`ThreadView.waiting`). A request with no thread cannot be checked and
    counts as waiting. One checkpoint read per thread: a request whose interrupt is
    in its thread's latest checkpoint waits; only for the others (a run between
    storing the request and pausing, or moved on) is the state built (``get_state``).
    ``interrupted`` (thread id -> request ids its latest checkpoint is paused on, read
    already by a reconciling listing) replaces the checkpoint reads.

    Args:
        graph: the graph whose checkpoints are read.
        authority: the authority the requests are stored in.
        records: the unresolved stored requests to check.
        interrupted: thread id -> request ids its latest checkpoint is paused on, read already.
    """
    waiting, by_thread = _by_thread(records)
    saver = checkpointer_of(graph)
    for thread_id, stored in by_thread.items():
        config = run_config(None, authority, thread_id=thread_id)
        if interrupted is not None or saver is not None:
            paused = (
                interrupted.get(thread_id, set())
                if interrupted is not None
                else waiting_request_ids(saver.get_tuple(config) if saver is not None else None)
            )
            waiting.update(item.request_id for item in stored if item.request_id in paused)
            stored = [item for item in stored if item.request_id not in paused]
            if not stored:
                continue
        view = read_view(graph, config)
        waiting.update(item.request_id for item in stored if view.waiting(item))
    return waiting


async def awaiting_among(
    graph: Any,
    authority: ApprovalAuthority,
    records: Sequence[StoredRequest],
    interrupted: Mapping[str, set[str]] | None = None,
) -> set[str]:
    """Async twin of :func:`waiting_among`."""
    waiting, by_thread = _by_thread(records)
    saver = checkpointer_of(graph)
    for thread_id, stored in by_thread.items():
        config = run_config(None, authority, thread_id=thread_id)
        if interrupted is not None or saver is not None:
            if interrupted is not None:
                paused = interrupted.get(thread_id, set())
            else:
                found = await saver.aget_tuple(config) if saver is not None else None
                paused = waiting_request_ids(found)
            waiting.update(item.request_id for item in stored if item.request_id in paused)
            stored = [item for item in stored if item.request_id not in paused]
            if not stored:
                continue
        view = await aread_view(graph, config)
        for item in stored:
            if await view.awaiting(item):
                waiting.add(item.request_id)
    return waiting


def resumed_requests(view: ThreadView, resume: Mapping[str, Any]) -> list[str]:
    """The requests whose interrupts on ``view`` the ``resume`` map answers."""
    return [request_id for request_id, interrupt in view.interrupts.items() if interrupt in resume]


@dataclass(frozen=True)
class LeasedThread:
    """A thread whose run lease this process holds: read it, then resume it.

    ``finished`` collects the requests whose resume work a run on it finished
    (:meth:`finish`): their work is marked done when the lease is released, in the
    release's own write. ``executions``, when given (the lease's), collects the claims
    its runs settled ``executed`` (:meth:`settle_claims`), marked in that write too;
    None: each is marked at once."""

    graph: Any
    config: RunnableConfig
    thread_id: str
    finished: list[str] = field(default_factory=list)
    executions: dict[str, ExecutionChange] | None = None

    def view(self) -> ThreadView:
        return read_view(self.graph, self.config)

    def finish(self, view: ThreadView, resume: Mapping[str, Any]) -> None:
        """The run on ``view`` was resumed with ``resume``: the resume work of the
        requests it answered is done (marked when the lease is released)."""
        self.finished.extend(resumed_requests(view, resume))

    async def aview(self) -> ThreadView:
        return await aread_view(self.graph, self.config)

    def resume(self, resume: Mapping[str, Any], context: Any = None) -> None:
        """Invoke the graph with ``Command(resume=resume)`` (nothing for an empty map), then
        settle the claims of the nodes that run finished (:meth:`settle_claims`)."""
        if resume:
            self.proceed(Command(resume=dict(resume)), context)

    async def aresume(self, resume: Mapping[str, Any], context: Any = None) -> None:
        """Async twin of :meth:`resume`."""
        if resume:
            await self.aproceed(Command(resume=dict(resume)), context)

    def proceed(self, command: Command[Any] | None, context: Any = None) -> None:
        """Invoke the graph with ``command`` (None: drive the thread on from its checkpoint,
        as LangGraph continues a step whose writes are stored), then settle its claims."""
        try:
            self.graph.invoke(command, self.config, **context_kwargs(context))
        finally:
            self.settle_claims()

    async def aproceed(self, command: Command[Any] | None, context: Any = None) -> None:
        """Async twin of :meth:`proceed`."""
        try:
            await self.graph.ainvoke(command, self.config, **context_kwargs(context))
        finally:
            await self.asettle_claims()

    def settle_claims(self) -> list[str]:
        """Record ``executed`` for the thread's execution claims whose nodes finished
        (:func:`~aais_langgraph.gate.execution.settle_finished_claims`); with
        :attr:`executions`, in the lease's release. A crash before that write leaves the
        claim to whichever process reads the checkpoint next, as before any mark."""
        authority = (self.config.get("configurable") or {}).get(AUTHORITY_KEY)
        saver = checkpointer_of(self.graph)
        if not isinstance(authority, ApprovalAuthority) or saver is None:
            return []
        if self.executions is None:
            return settle_finished_claims(authority, saver, thread_id=self.thread_id)
        settled = finished_claims(authority, saver, thread_id=self.thread_id)
        self._mark(authority, settled)
        return settled

    async def asettle_claims(self) -> list[str]:
        """Async twin of :meth:`settle_claims`."""
        authority = (self.config.get("configurable") or {}).get(AUTHORITY_KEY)
        saver = checkpointer_of(self.graph)
        if not isinstance(authority, ApprovalAuthority) or saver is None:
            return []
        if self.executions is None:
            return await asettle_finished_claims(authority, saver, thread_id=self.thread_id)
        settled = await afinished_claims(authority, saver, thread_id=self.thread_id)
        self._mark(authority, settled)
        return settled

    def _mark(self, authority: ApprovalAuthority, settled: list[str]) -> None:
        assert self.executions is not None
        for request_id in settled:
            self.executions[request_id] = authority.sealed_change(finish_change(time.time()))

"""The one thread driver: take the run lease, read the checkpoint, plan the resume map, invoke.

Everything that resumes a paused thread goes through here — ``resume_with_decisions``,
``resume_resolved``, edits, recovery, and in ``aais_agui`` the AG-UI agent, the
decisions endpoint and the watcher — so they cannot drift apart::

    def plan(view: ThreadView) -> tuple[dict[str, Any], list[str]]:
        return {view.interrupts[rid]: answer for ...}, [...]

    result = drive(graph, config, plan, authority=authority)

``plan`` runs under the lease with what the checkpoint says (a :class:`ThreadView`)
and returns the ``Command(resume=...)`` map (empty: nothing is invoked) and the
caller's result. :func:`adrive` is the async twin; it runs ``plan`` in a worker
thread, as the ledger calls in it block.
"""

from __future__ import annotations

import asyncio
import functools
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.types import Command

from ..authority import DEFAULT_LEASE_TTL, ApprovalAuthority, arun_lease, run_lease
from ..ledger import StoredRequest
from .channel import RECORDED_ONLY_KEY
from .run_context import AUTHORITY_KEY, CLAIM_TTL_KEY, claim_ttl_for_lease
from .seams import INTERRUPT_CHANNEL, open_interrupts

__all__ = [
    "DEFAULT_LEASE_WAIT",
    "LeasedThread",
    "ThreadView",
    "adrive",
    "aleased_thread",
    "aread_view",
    "awaiting_among",
    "context_kwargs",
    "drive",
    "leased_thread",
    "read_view",
    "run_config",
    "thread_of",
    "waiting_among",
]

T = TypeVar("T")

DEFAULT_LEASE_WAIT = 10.0
"""Seconds every driver waits for another holder's run lease before raising
:class:`~aais_langgraph.LeaseHeldError`. Long enough for a presenter racing another
one to get its turn after a short resume; short enough to answer an HTTP request.
A run holding the lease longer (a slow approved action) is left to the callers
that retry: the watcher, the decisions endpoint and recovery sweeps."""

Plan = Callable[["ThreadView"], "tuple[Mapping[str, Any], T]"]


@dataclass(frozen=True)
class ThreadView:
    """What a thread's checkpoint says about the approvals it waits for."""

    interrupts: Mapping[str, str]
    """Request id -> LangGraph interrupt id, for every interrupt a gate raised."""
    open: Mapping[str, Any]
    """Interrupt id -> value of every pending interrupt (gates' and plain ones)."""
    live_tasks_of: Callable[[], frozenset[str]] = field(repr=False, compare=False)
    """Works out :attr:`live_tasks` (building the state snapshot) when first needed."""

    @functools.cached_property
    def live_tasks(self) -> frozenset[str]:
        """``name:id`` of every task the next step runs (the roots of their namespaces)."""
        return self.live_tasks_of()

    @classmethod
    def of(cls, state: Any) -> ThreadView:
        """The view of a ``StateSnapshot`` (``graph.get_state(...)``)."""
        interrupts: dict[str, str] = {}
        open_: dict[str, Any] = {}
        for task in getattr(state, "tasks", None) or ():
            for pending in getattr(task, "interrupts", None) or ():
                open_[pending.id] = pending.value
        for pending in getattr(state, "interrupts", None) or ():
            request_id = cls.request_id_of(getattr(pending, "value", None))
            if request_id is not None:
                interrupts[request_id] = pending.id
        live = frozenset(f"{task.name}:{task.id}" for task in getattr(state, "tasks", None) or ())
        return cls(interrupts=interrupts, open=open_, live_tasks_of=lambda: live)

    @classmethod
    def of_checkpoint(
        cls, found: CheckpointTuple | None, state: Callable[[], Any]
    ) -> ThreadView | None:
        """The view read from the interrupt writes of a thread's latest checkpoint tuple,
        without building its state (``state`` builds it, for :attr:`live_tasks` only);
        None when the checkpoint holds no interrupt (then ask ``get_state``)."""
        interrupts: dict[str, str] = {}
        open_: dict[str, Any] = {}
        for pending in open_interrupts(found.pending_writes if found is not None else None):
            open_[pending.id] = pending.value
            request_id = cls.request_id_of(pending.value)
            if request_id is not None:
                interrupts[request_id] = pending.id
        if not open_:
            return None
        return cls(
            interrupts=interrupts,
            open=open_,
            live_tasks_of=lambda: cls.of(state()).live_tasks,
        )

    @staticmethod
    def request_id_of(value: Any) -> str | None:
        """The request id of a gate's interrupt value (None for another interrupt)."""
        if isinstance(value, Mapping) and value.get("type") == "approval.requested":
            request = value.get("request")
            if isinstance(request, Mapping) and isinstance(request.get("id"), str):
                return str(request["id"])
        return None

    def waiting(self, stored: StoredRequest) -> bool:
        """Whether this thread still waits for an answer to ``stored`` (an unresolved request).

        It does while the task that raised the request is live in the checkpoint,
        even before the interrupt itself is checkpointed: the gate stores the
        request first and the run pauses a moment later, and a listing taken in
        between must not hide it (a client would then miss it, as the events it
        follows start after the listing). It stops once that task is gone (the
        run finished, or moved on after an edit of its state). A request that
        names no task waits only while its interrupt is in the checkpoint.
        """
        if stored.request_id in self.interrupts:
            return True
        namespace = str(stored.context.get("checkpoint_ns", ""))
        return bool(namespace) and namespace.split("|")[0] in self.live_tasks


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
    resolutions the authority recorded (:data:`~.channel.RECORDED_ONLY_KEY`; the
    server's authority then replaces any other)."""
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


def read_view(graph: Any, config: RunnableConfig) -> ThreadView:
    """The :class:`ThreadView` of the thread ``config`` names: from its latest checkpoint
    tuple when that holds interrupts (one read), else from ``get_state``."""
    saver = _saver(graph)
    if saver is not None:
        view = ThreadView.of_checkpoint(
            saver.get_tuple(config), functools.partial(graph.get_state, config)
        )
        if view is not None:
            return view
    return ThreadView.of(graph.get_state(config))


async def aread_view(graph: Any, config: RunnableConfig) -> ThreadView:
    """Async twin of :func:`read_view`. Its ``live_tasks``, when needed, are read with the
    sync ``get_state``: ask for them in a worker thread (as the drivers' plans run)."""
    saver = _saver(graph)
    if saver is not None:
        view = ThreadView.of_checkpoint(
            await saver.aget_tuple(config), functools.partial(graph.get_state, config)
        )
        if view is not None:
            return view
    return ThreadView.of(await graph.aget_state(config))


def _by_thread(records: Iterable[StoredRequest]) -> tuple[set[str], dict[str, list[StoredRequest]]]:
    unplaced: set[str] = set()
    by_thread: dict[str, list[StoredRequest]] = defaultdict(list)
    for stored in records:
        if stored.thread_id is None:
            unplaced.add(stored.request_id)
        else:
            by_thread[stored.thread_id].append(stored)
    return unplaced, by_thread


def _saver(graph: Any) -> BaseCheckpointSaver[Any] | None:
    saver = getattr(graph, "checkpointer", None)
    return saver if isinstance(saver, BaseCheckpointSaver) else None


def _interrupted(found: CheckpointTuple | None) -> set[str]:
    """Request ids of the gate interrupts in the pending writes of a thread's latest
    checkpoint: the interrupts ``get_state`` reports, without building the state."""
    ids: set[str] = set()
    for _, channel, value in (found.pending_writes or ()) if found is not None else ():
        if channel != INTERRUPT_CHANNEL:
            continue
        for pending in value if isinstance(value, (list, tuple)) else (value,):
            request_id = ThreadView.request_id_of(getattr(pending, "value", None))
            if request_id is not None:
                ids.add(request_id)
    return ids


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
    already by a reconciling listing) replaces the checkpoint reads."""
    waiting, by_thread = _by_thread(records)
    saver = _saver(graph)
    for thread_id, stored in by_thread.items():
        config = run_config(None, authority, thread_id=thread_id)
        if interrupted is not None or saver is not None:
            paused = (
                interrupted.get(thread_id, set())
                if interrupted is not None
                else _interrupted(saver.get_tuple(config) if saver is not None else None)
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
    saver = _saver(graph)
    for thread_id, stored in by_thread.items():
        config = run_config(None, authority, thread_id=thread_id)
        if interrupted is not None or saver is not None:
            paused = (
                interrupted.get(thread_id, set())
                if interrupted is not None
                else _interrupted(await saver.aget_tuple(config) if saver is not None else None)
            )
            waiting.update(item.request_id for item in stored if item.request_id in paused)
            stored = [item for item in stored if item.request_id not in paused]
            if not stored:
                continue
        view = await aread_view(graph, config)
        waiting.update(item.request_id for item in stored if view.waiting(item))
    return waiting


@dataclass(frozen=True)
class LeasedThread:
    """A thread whose run lease this process holds: read it, then resume it."""

    graph: Any
    config: RunnableConfig
    thread_id: str

    def view(self) -> ThreadView:
        return read_view(self.graph, self.config)

    async def aview(self) -> ThreadView:
        return await aread_view(self.graph, self.config)

    def resume(self, resume: Mapping[str, Any], context: Any = None) -> None:
        """Invoke the graph with ``Command(resume=resume)`` (nothing for an empty map)."""
        if resume:
            self.graph.invoke(Command(resume=dict(resume)), self.config, **context_kwargs(context))

    async def aresume(self, resume: Mapping[str, Any], context: Any = None) -> None:
        if resume:
            await self.graph.ainvoke(
                Command(resume=dict(resume)), self.config, **context_kwargs(context)
            )


@contextmanager
def leased_thread(
    graph: Any,
    config: Mapping[str, Any],
    *,
    authority: ApprovalAuthority,
    lease_ttl: float = DEFAULT_LEASE_TTL,
    lease_wait: float = DEFAULT_LEASE_WAIT,
    recorded_only: bool = False,
) -> Iterator[LeasedThread]:
    """Hold the thread's run lease (renewed by :func:`~aais_langgraph.authority.run_lease`
    while held) for the block; raises :class:`~aais_langgraph.LeaseHeldError` after
    ``lease_wait`` seconds if another holder keeps it."""
    driven = run_config(config, authority, lease_ttl=lease_ttl, recorded_only=recorded_only)
    thread_id = thread_of(driven)
    with run_lease(authority.ledger, thread_id, ttl=lease_ttl, wait=lease_wait):
        yield LeasedThread(graph, driven, thread_id)


@asynccontextmanager
async def aleased_thread(
    graph: Any,
    config: Mapping[str, Any],
    *,
    authority: ApprovalAuthority,
    lease_ttl: float = DEFAULT_LEASE_TTL,
    lease_wait: float = DEFAULT_LEASE_WAIT,
    recorded_only: bool = False,
) -> AsyncIterator[LeasedThread]:
    """Async twin of :func:`leased_thread` (one renewer, the lease's own)."""
    driven = run_config(config, authority, lease_ttl=lease_ttl, recorded_only=recorded_only)
    thread_id = thread_of(driven)
    async with arun_lease(authority.ledger, thread_id, ttl=lease_ttl, wait=lease_wait):
        yield LeasedThread(graph, driven, thread_id)


def drive(
    graph: Any,
    config: Mapping[str, Any],
    plan: Callable[[ThreadView], tuple[Mapping[str, Any], T]],
    *,
    authority: ApprovalAuthority,
    context: Any = None,
    lease_ttl: float = DEFAULT_LEASE_TTL,
    lease_wait: float = DEFAULT_LEASE_WAIT,
    recorded_only: bool = False,
) -> T:
    """Under the thread's lease: read its checkpoint, ``plan`` the resume map, invoke;
    returns the result ``plan`` returned with the map."""
    with leased_thread(
        graph,
        config,
        authority=authority,
        lease_ttl=lease_ttl,
        lease_wait=lease_wait,
        recorded_only=recorded_only,
    ) as thread:
        resume, result = plan(thread.view())
        thread.resume(resume, context)
    return result


async def adrive(
    graph: Any,
    config: Mapping[str, Any],
    plan: Callable[[ThreadView], tuple[Mapping[str, Any], T]],
    *,
    authority: ApprovalAuthority,
    context: Any = None,
    lease_ttl: float = DEFAULT_LEASE_TTL,
    lease_wait: float = DEFAULT_LEASE_WAIT,
    recorded_only: bool = False,
) -> T:
    """Async twin of :func:`drive` (``plan`` runs in a worker thread)."""
    async with aleased_thread(
        graph,
        config,
        authority=authority,
        lease_ttl=lease_ttl,
        lease_wait=lease_wait,
        recorded_only=recorded_only,
    ) as thread:
        resume, result = await asyncio.to_thread(plan, await thread.aview())
        await thread.aresume(resume, context)
    return result

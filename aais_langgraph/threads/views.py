"""What a thread's checkpoint says about the approvals it waits for: :class:`ThreadView`.

Read from the thread's latest checkpoint tuple (its pending interrupt writes, as
LangGraph reads them), so a driver's plan sees the open interrupts after one read;
the state snapshot is built only when a plan asks for the live tasks.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

from ..gate.seams import open_interrupts
from ..ledger import StoredRequest

__all__ = ["ThreadView", "aread_view", "checkpointer_of", "read_view", "waiting_request_ids"]


@dataclass(frozen=True)
class ThreadView:
    """What a thread's checkpoint says about the approvals it waits for."""

    interrupts: Mapping[str, str]
    """Request id -> LangGraph interrupt id, for every interrupt a gate raised."""
    open: Mapping[str, Any]
    """Interrupt id -> value of every pending interrupt (gates' and plain ones)."""
    live_tasks_of: Callable[[], frozenset[str]] = field(repr=False, compare=False)
    """Works out :attr:`live_tasks` (building the state snapshot) when first needed."""
    alive_tasks_of: Callable[[], Awaitable[frozenset[str]]] | None = field(
        default=None, repr=False, compare=False
    )
    """Its async twin, for a view read on an event loop (see :meth:`awaiting`)."""
    known: bool = True
    """False when this graph's checkpointer holds no checkpoint of the thread at all: it
    may be another graph's thread (one ledger can serve several graphs), so nothing may
    be concluded from what it does not wait for."""

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
        known = getattr(state, "created_at", None) is not None
        return cls(interrupts=interrupts, open=open_, live_tasks_of=lambda: live, known=known)

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

    async def awaiting(self, stored: StoredRequest) -> bool:
        """:meth:`waiting`, on an event loop: the live tasks are read with the async state
        read (a sync one on the loop is refused by async checkpointers)."""
        if stored.request_id in self.interrupts or self.alive_tasks_of is None:
            return self.waiting(stored)
        namespace = str(stored.context.get("checkpoint_ns", ""))
        if not namespace:
            return False
        if "live_tasks" not in self.__dict__:
            self.__dict__["live_tasks"] = await self.alive_tasks_of()
        return namespace.split("|")[0] in self.live_tasks


_NO_CHECKPOINT = ThreadView(interrupts={}, open={}, live_tasks_of=frozenset, known=False)
"""The view of a thread the checkpointer holds nothing of (what ``get_state`` says of it)."""


def read_view(graph: Any, config: RunnableConfig) -> ThreadView:
    """The :class:`ThreadView` of the thread ``config`` names: from its latest checkpoint
    tuple when that holds interrupts (one read; none stored: nothing to wait on), else
    from ``get_state``."""
    saver = checkpointer_of(graph)
    if saver is not None:
        found = saver.get_tuple(config)
        if found is None:
            return _NO_CHECKPOINT
        view = ThreadView.of_checkpoint(found, functools.partial(graph.get_state, config))
        if view is not None:
            return view
    return ThreadView.of(graph.get_state(config))


async def aread_view(graph: Any, config: RunnableConfig) -> ThreadView:
    """Async twin of :func:`read_view`. On the loop ask :meth:`ThreadView.awaiting` (its
    live tasks are read with ``aget_state``); ``waiting`` reads them with the sync
    ``get_state``, for the drivers' plans, which run in a worker thread."""
    saver = checkpointer_of(graph)
    if saver is not None:
        found = await saver.aget_tuple(config)
        if found is None:
            return _NO_CHECKPOINT
        view = ThreadView.of_checkpoint(found, functools.partial(graph.get_state, config))
        if view is not None:

            async def alive() -> frozenset[str]:
                return ThreadView.of(await graph.aget_state(config)).live_tasks

            return replace(view, alive_tasks_of=alive)
    return ThreadView.of(await graph.aget_state(config))


def checkpointer_of(graph: Any) -> BaseCheckpointSaver[Any] | None:
    """The graph's checkpointer, when it is one whose tuples can be read directly."""
    saver = getattr(graph, "checkpointer", None)
    return saver if isinstance(saver, BaseCheckpointSaver) else None


def waiting_request_ids(found: CheckpointTuple | None) -> set[str]:
    """Request ids of the gate interrupts still open in a thread's latest checkpoint."""
    ids: set[str] = set()
    for pending in open_interrupts(found.pending_writes if found is not None else None):
        request_id = ThreadView.request_id_of(pending.value)
        if request_id is not None:
            ids.add(request_id)
    return ids

"""Execution records: whether an approved action is running, finished, or of unknown outcome.

AAIS says nothing about execution (SPEC §4.3: ``approved`` does not assert that
execution began; the lifecycle belongs to the runtime), so this is the runtime's
own table, ``aais_executions``, one row per approved request that a gate let run:

- ``executing``: a run claimed the approval and may be running the action; the
  claim is *live* until ``live_until``; past it the run is presumed dead;
- ``executed``: the action finished (the gate saw its body return, or its node's
  writes in the checkpoint);
- ``unknown``: a later run found a dead claim without ``executed``: the action
  may or may not have happened, and it is not run again until a human decides;
- ``done`` / ``retry``: a human reconciled an ``unknown`` record (it happened;
  or ask again with a fresh request).

The transitions are pure functions here; a backend only reads the row, applies
one under its write lock and stores the result (:meth:`Ledger.update_execution`).

Every stored change is accountable like a resolution: it appends an ``execution``
audit entry whose payload is the whole new row (:func:`execution_audit`), in the
same transaction, so the row the gate acts on is always the one its latest entry
records (a deleted, edited or planted row is refused, and ``audit verify``
reports it), and running an approved action moves the chain's tip.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from .holders import holder_is_dead

if TYPE_CHECKING:
    from .base import Ledger

__all__ = [
    "Execution",
    "ExecutionChange",
    "ExecutionState",
    "claim_change",
    "execution_audit",
    "finish_change",
    "presumed_change",
    "reconcile_change",
    "unknown_outcomes",
]

ExecutionState = Literal["executing", "executed", "unknown", "done", "retry"]
ExecutionChange = Callable[["Execution | None"], "Execution | None"]
"""Given the stored record (or None), the record to store (None or the same: no change)."""


@dataclass(frozen=True)
class Execution:
    """The runtime's record of one approved request's execution."""

    request_id: str
    thread_id: str | None
    state: ExecutionState
    holder: str
    attempt: int
    started_at: float
    live_until: float
    updated_at: float
    reconciled_by: str | None = None
    mac: str | None = None
    """The authority's seal of the row (None without an authority key)."""

    def live(self, now: float) -> bool:
        """True while a run holding the claim may still be executing the action (its
        holder on this host died: not live, whatever ``live_until`` says)."""
        return (
            self.state == "executing" and now < self.live_until and not holder_is_dead(self.holder)
        )


def claim_change(
    request_id: str,
    holder: str,
    *,
    thread_id: str | None,
    ttl: float,
    now: float,
    retry: bool,
) -> ExecutionChange:
    """Claim the execution for ``holder``; the result says who holds it afterwards.

    A first claim, or the same holder again, takes it. A live claim of another
    run is left alone. A dead claim (or an ``unknown`` or ``executed`` record)
    is taken over only when ``retry`` (an idempotent action); otherwise a dead
    claim becomes ``unknown``. ``done`` and ``retry`` records are never claimed.

    Args:
        request_id: the approved request.
        holder: the run that claims.
        thread_id: its thread (for listings).
        ttl: seconds the claim lives.
        now: the moment (epoch seconds).
        retry: the action is idempotent: a dead claim is taken over.
    """

    def change(current: Execution | None) -> Execution | None:
        fresh = Execution(request_id, thread_id, "executing", holder, 1, now, now + ttl, now)
        if current is None:
            return fresh
        if current.state == "executing" and current.holder == holder:
            return replace(current, live_until=now + ttl, updated_at=now)
        if current.live(now) or current.state in ("done", "retry"):
            return current
        if retry:
            return replace(fresh, attempt=current.attempt + 1, thread_id=current.thread_id)
        if current.state == "executing":
            return replace(current, state="unknown", updated_at=now)
        return current

    return change


def finish_change(now: float) -> ExecutionChange:
    """The action's body returned: ``executing`` (or ``unknown``, a slow run's) -> ``executed``."""

    def change(current: Execution | None) -> Execution | None:
        if current is None or current.state not in ("executing", "unknown"):
            return current
        return replace(current, state="executed", updated_at=now)

    return change


def presumed_change(now: float) -> ExecutionChange:
    """A claim no run holds any more whose node did not finish: ``executing`` -> ``unknown``
    (what a re-run finding it would record), before anything drives its thread on."""

    def change(current: Execution | None) -> Execution | None:
        if current is None or current.state != "executing" or current.live(now):
            return current
        return replace(current, state="unknown", updated_at=now)

    return change


def reconcile_change(state: Literal["done", "retry"], actor: str, now: float) -> ExecutionChange:
    """A human settles an ``unknown`` record, or a dead ``executing`` one nobody re-ran yet."""

    def change(current: Execution | None) -> Execution | None:
        if current is None or not (
            current.state == "unknown" or (current.state == "executing" and not current.live(now))
        ):
            return current
        return replace(current, state=state, updated_at=now, reconciled_by=actor)

    return change


def execution_audit(record: Execution) -> dict[str, Any]:
    """The payload of the ``execution`` audit entry that records ``record``: the whole
    row but its seal (which the entry cannot carry: it is made from the same fields)."""
    return {
        "request_id": record.request_id,
        "thread_id": record.thread_id,
        "state": record.state,
        "holder": record.holder,
        "attempt": record.attempt,
        "started_at": record.started_at,
        "live_until": record.live_until,
        "updated_at": record.updated_at,
        "reconciled_by": record.reconciled_by,
    }


UNKNOWN_OR_CLAIMED: tuple[ExecutionState, ...] = ("unknown", "executing")
"""The states :func:`unknown_outcomes` reads."""


def unknown_outcomes(
    ledger: Ledger, *, thread_id: str | None = None, now: float | None = None
) -> list[Execution]:
    """Records of unknown outcome, oldest first: ``unknown`` ones, and ``executing`` ones
    whose claim is no longer live at ``now`` (default: the current time)."""
    moment = time.time() if now is None else now
    found = ledger.list_executions(states=UNKNOWN_OR_CLAIMED, thread_id=thread_id)
    return [record for record in found if not record.live(moment)]

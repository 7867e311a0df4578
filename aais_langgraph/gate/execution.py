"""At most once across crashes: the execution claim on an approval, and what a re-run finds.

An approved answer is handed to a node only after the gate claimed the
approval's execution record (``executing``); the node wrappers mark it
``executed`` as soon as the action's body returns, and a gate called bare in a node
is marked so once its node's writes are in the checkpoint (the node returned, so the
action did: :func:`settle_finished_claims`, by whichever process reads the checkpoint
first). LangGraph re-runs a node whose
step was not checkpointed, so after a crash the recovered run finds one of:

- a live claim (another run is executing it): refused, the interrupt stays pending;
- a dead claim with no ``executed``: the action may have run. It is **not** run
  again: the record turns ``unknown`` and the gate raises
  :class:`ExecutionUnknownError` (the interrupt stays pending) until a human
  reconciles it with :func:`reconcile_execution` (``done``: the node continues
  without running it; ``retry``: the node asks again with a fresh request);
- ``executed``: the action ran and only its result was lost; not run again.

An action declared idempotent (``idempotent=True``) is run again instead, with
:func:`~aais_langgraph.gate.approval_key` as its key. The recorded AAIS
resolution is never changed: execution belongs to the runtime (SPEC §4.3).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.runnables import RunnableConfig

from ..authority import ApprovalAuthority, Principal, new_holder
from ..authority.authorization import as_principal
from ..authority.resolutions import resolution_envelope
from ..ledger import Execution
from ..ledger.executions import (
    ExecutionChange,
    claim_change,
    finish_change,
    reconcile_change,
    unknown_outcomes,
)
from ..ledger.outbox import RESUME, reopened_change
from ..protocol import Actor, ApprovalResolved, Request
from ..protocol.extensions import EXTENSION_NAMESPACE
from .response import AnswerType, BoundAnswer, RefusalCarrier, RejectedResumeError
from .run_context import retry_request_id
from .seams import mark_invalid_resume, task_finished, task_finished_in, task_of_namespace

__all__ = [
    "EXECUTION_EXTENSION",
    "ExecutionUnknownError",
    "afinished_claims",
    "areconcile_execution",
    "asettle_finished_claims",
    "execution_state",
    "finished_claims",
    "reconcile_execution",
    "retry_request_id",
    "settle_finished_claims",
    "unknown_executions",
]

EXECUTION_EXTENSION = EXTENSION_NAMESPACE + "execution"
"""Resolution extension of a gate result that did not run the action:
``{"state": "executed" | "done" | "retry", "request_id": ...}``."""

CLAIMED_MESSAGE = "Another run is already executing this approval."
CLAIMED = "claimed"
""":attr:`RejectedResumeError.code` of a refusal because another run holds the execution claim."""

_NOT_RUN: dict[str, str] = {
    "executed": (
        "This approved action already ran; a run stopped before its result was saved, "
        "and it was not run again."
    ),
    "done": "A reviewer marked this approved action as done; it was not run again.",
    "retry": "A reviewer asked for this action to be approved again with a fresh request.",
}


class ExecutionUnknownError(RejectedResumeError):
    """The outcome of an approved action is unknown, so the gate does not run it again.

    A run that was executing it stopped (crashed) before recording that it
    finished. The approval stays recorded as it was; the interrupt stays pending;
    :func:`unknown_executions` lists it until a human calls
    :func:`reconcile_execution` (CLI: ``aais-langgraph reconcile ID --done|--retry``).
    """

    def __init__(self, request_id: str) -> None:
        super().__init__(
            "/execution",
            f"the outcome of approved request {request_id} is unknown: a run executing it "
            "stopped before it finished, so it was not run again; reconcile it "
            "(done, or retry with a fresh request)",
            code="execution_unknown",
        )
        self.request_id = request_id


@dataclass(frozen=True)
class Claim:
    """What the gate needs to claim an approval's execution.

    ``ttl`` is the claim's lifetime for an answer submitted to this run, None for an
    answer LangGraph replays from an earlier execution of the task (no new claim).
    """

    ttl: float | None
    thread_id: str | None
    idempotent: bool = False


def _refuse(error: RejectedResumeError) -> RefusalCarrier:
    mark_invalid_resume(error)
    return RefusalCarrier(error)


def not_run(
    authority: ApprovalAuthority, request: Request, resolved: ApprovalResolved, state: str
) -> ApprovalResolved:
    """The gate's answer when it does not run an approved action: never ``approved``.

    Args:
        authority: the authority that records and judges.
        request: the approved request.
        resolved: its recorded approval.
        state: why it did not run (``executed``, ``done``, ``retry``).
    """
    resolution = resolved.resolution
    return resolution_envelope(
        request,
        outcome="conflict",
        message=_NOT_RUN[state],
        now=authority.clock(),
        sequence=authority.ledger.last_sequence(),
        stream=resolved.stream,
        extensions={EXECUTION_EXTENSION: {"state": state, "request_id": resolution.request_id}},
    )


def claim_of(request_id: str, holder: str, claim: Claim) -> ExecutionChange:
    """The execution claim ``holder`` takes for a fresh answer (``claim.ttl`` set)."""
    return claim_change(
        request_id,
        holder,
        thread_id=claim.thread_id,
        ttl=claim.ttl if claim.ttl is not None else 0.0,
        now=time.time(),
        retry=claim.idempotent,
    )


def settle(
    authority: ApprovalAuthority,
    request: Request,
    resolved: ApprovalResolved,
    claim: Claim,
    *,
    claimed: tuple[str, Execution | None] | None = None,
) -> ApprovalResolved:
    """The approved answer if this run may execute it; else a not-run result, or a refusal.

    Runs inside LangGraph's validation of the resume value, so a refusal (a live
    claim elsewhere, an unknown outcome) leaves the interrupt pending. ``claimed``
    is ``(holder, record)`` when the claim rode in the resolution's transaction
    (record None: it did not, claim now).

    Args:
        authority: the authority that records and judges.
        request: the approved request.
        resolved: its recorded approval.
        claim: this run's execution claim to take.
        claimed: ``(holder, record)`` when the claim rode in the resolution's transaction.
    """
    if claim.ttl is None:
        record = authority.execution(request.id)
        if record is not None and record.state in ("done", "retry"):
            return not_run(authority, request, resolved, record.state)
        if record is not None and record.state == "unknown" and not claim.idempotent:
            raise _refuse(ExecutionUnknownError(request.id))
        return resolved
    holder, record = claimed if claimed is not None else (new_holder(), None)
    if record is None:
        # Not fsync'd: a crashed process cannot lose it (SQLite WAL), a power loss
        # can; the resolution it executes was synced before (README, Durability).
        record = authority.change_execution(
            request.id, claim_of(request.id, holder, claim), durable=False
        )
    if record is None:  # pragma: no cover - a claim always leaves a record
        raise _refuse(RejectedResumeError("/execution", CLAIMED_MESSAGE, code=CLAIMED))
    if record.state == "executing":
        if record.holder == holder:
            return resolved
        raise _refuse(RejectedResumeError("/decision", CLAIMED_MESSAGE, code=CLAIMED))
    if record.state == "unknown":
        raise _refuse(ExecutionUnknownError(request.id))
    return not_run(authority, request, resolved, record.state)


SKIPPED = object()
"""What a retry's gate gets when LangGraph hands it the replaced request's answer."""


class RetryAnswerType(AnswerType):
    """The answer type of a retry's fresh request: the replaced request's resolution
    arriving in its slot is LangGraph replaying an old answer (a task that failed
    after consuming it keeps it), not an answer: it is skipped, and the gate asks
    again at the next slot."""

    __slots__ = ("replaced",)

    def __init__(
        self, request: Request, settle: Callable[[BoundAnswer], Any], replaced: str
    ) -> None:
        super().__init__(request, settle)
        self.replaced = replaced

    def _validate(self, value: Any) -> Any:
        if isinstance(value, ApprovalResolved):
            value = value.to_json()
        if isinstance(value, dict) and value.get("type") == "approval.resolved":
            resolution = value.get("resolution")
            if isinstance(resolution, dict) and resolution.get("request_id") == self.replaced:
                return SKIPPED
        return super()._validate(value)


def finish(authority: ApprovalAuthority, request_id: str) -> None:
    """The approved action's body returned: record ``executed`` (before LangGraph saves)."""
    authority.change_execution(request_id, finish_change(time.time()), durable=False)


ClaimFilter = Callable[[Execution], bool]
"""Which open claims a settling pass looks at (e.g. only those no run may still hold)."""


def _open_claims(
    authority: ApprovalAuthority, thread_id: str | None, looked_at: ClaimFilter | None
) -> list[tuple[str, str, str]]:
    """``(request id, thread id, root task id)`` of each ``executing`` claim (of one thread,
    or all) that ``looked_at`` accepts."""
    found: list[tuple[str, str, str]] = []
    for record in authority.ledger.list_executions(states=("executing",), thread_id=thread_id):
        if record.thread_id is None or (looked_at is not None and not looked_at(record)):
            continue
        stored = authority.get_stored_request(record.request_id, status=False)
        task = (
            None
            if stored is None
            else task_of_namespace(str(stored.context.get("checkpoint_ns", "")))
        )
        if task is not None:
            found.append((record.request_id, record.thread_id, task))
    return found


def _root_config(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}


def settle_finished_claims(
    authority: ApprovalAuthority,
    checkpointer: Any,
    *,
    thread_id: str | None = None,
    looked_at: ClaimFilter | None = None,
) -> list[str]:
    """Record ``executed`` for every claim whose node finished: its task's writes are in
    the thread's checkpoint, so the code it ran after the gate (the approved action)
    returned. A gate called bare in a node cannot see its node return; whichever process
    reads the checkpoint first (the run's driver, a sweep, a listing) settles it. A claim
    whose task did not finish (it died mid-action) is left as it is: once no run holds it,
    its outcome is unknown. Returns the ids settled.

    ``thread_id`` limits it to one thread; ``looked_at`` to the claims it accepts.

    Args:
        authority: the authority that records and judges.
        checkpointer: the graph's checkpointer, read for finished tasks.
        thread_id: only this thread's claims (default: every thread's).
        looked_at: only the claims it accepts.
    """
    settled = finished_claims(authority, checkpointer, thread_id=thread_id, looked_at=looked_at)
    for request_id in settled:
        authority.change_execution(request_id, finish_change(time.time()), durable=False)
    return settled


def finished_claims(
    authority: ApprovalAuthority,
    checkpointer: Any,
    *,
    thread_id: str | None = None,
    looked_at: ClaimFilter | None = None,
) -> list[str]:
    """The ids of the claims :func:`settle_finished_claims` settles, nothing written (for
    a caller that writes the marks with something else: a run's lease release).

    Args:
        authority: the authority that records and judges.
        checkpointer: the graph's checkpointer, read for finished tasks.
        thread_id: only this thread's claims (default: every thread's).
        looked_at: only the claims it accepts.
    """
    return [
        request_id
        for request_id, thread, task in _open_claims(authority, thread_id, looked_at)
        if task_finished(checkpointer.list(_root_config(thread)), task)
    ]


async def asettle_finished_claims(
    authority: ApprovalAuthority,
    checkpointer: Any,
    *,
    thread_id: str | None = None,
    looked_at: ClaimFilter | None = None,
) -> list[str]:
    """Async twin of :func:`settle_finished_claims` (checkpoints read with ``alist``)."""
    import asyncio

    settled = await afinished_claims(
        authority, checkpointer, thread_id=thread_id, looked_at=looked_at
    )
    for request_id in settled:
        change = finish_change(time.time())
        await asyncio.to_thread(authority.change_execution, request_id, change, durable=False)
    return settled


async def afinished_claims(
    authority: ApprovalAuthority,
    checkpointer: Any,
    *,
    thread_id: str | None = None,
    looked_at: ClaimFilter | None = None,
) -> list[str]:
    """Async twin of :func:`finished_claims` (checkpoints read with ``alist``)."""
    import asyncio

    claims = await asyncio.to_thread(_open_claims, authority, thread_id, looked_at)
    finished_ids: list[str] = []
    for request_id, thread, task in claims:
        finished = None
        async for saved in checkpointer.alist(_root_config(thread)):
            finished = task_finished_in(saved, task)
            if finished is not None:
                break
        if finished:
            finished_ids.append(request_id)
    return finished_ids


def execution_state(resolved: ApprovalResolved) -> str | None:
    """``executed``, ``done`` or ``retry`` when the gate did not run an approved action."""
    extensions = resolved.resolution.extensions or {}
    value = extensions.get(EXECUTION_EXTENSION)
    return str(value.get("state")) if isinstance(value, dict) else None


def unknown_executions(
    authority: ApprovalAuthority, *, thread_id: str | None = None, now: float | None = None
) -> list[Execution]:
    """Approved actions whose outcome is unknown, for a human to reconcile: those a re-run
    found so, and at once every claim that is no longer live (its run died while it may
    have been executing the action, before any re-run looked)."""
    return unknown_outcomes(authority.ledger, thread_id=thread_id, now=now)


def reconcile_execution(
    authority: ApprovalAuthority,
    request_id: str,
    outcome: Literal["done", "retry"],
    *,
    actor: str | Principal | Actor,
) -> Execution | None:
    """Settle an unknown outcome: ``done`` (it happened) or ``retry`` (ask again).

    ``actor`` is who settles it: an id (a trusted caller), or the authenticated actor or
    :class:`~aais_langgraph.authority.Principal` of any type (a ``policy`` actor too),
    whom the authorizer must allow to ``reconcile`` the request
    (:class:`~aais_langgraph.authority.ForbiddenError` otherwise). It is
    recorded in the record and its audit entry.

    The paused run continues on its next resume (``resume_stranded``, a presenter's
    retry): with ``done`` the gate returns a not-run result; with ``retry`` it raises
    a fresh request for the same action. Returns the record, or None when there is
    nothing to reconcile (unknown id, or a run is still executing or finished it).

    Args:
        authority: the authority that records and judges.
        request_id: the approved request of unknown outcome.
        outcome: ``done`` (it happened) or ``retry`` (ask again).
        actor: who settles it: an id (trusted caller), an authenticated actor or principal.
    """
    if not isinstance(actor, str):
        # An actor handed over is an authenticated caller, whatever its type: a policy
        # actor (a service, a bot) is asked about like a person. Only a bare id is trusted.
        principal = as_principal(actor)
        authority.access.require(principal, "reconcile", request_id)
        actor = principal.id
    before = authority.execution(request_id)
    after = authority.change_execution(request_id, reconcile_change(outcome, actor, time.time()))
    if after is None or after == before or after.state != outcome:
        return None
    # The thread's resume work waited for this: hand it back, due at once.
    authority.ledger.update_work(RESUME, request_id, reopened_change(time.time()))
    return after


async def areconcile_execution(
    authority: ApprovalAuthority,
    request_id: str,
    outcome: Literal["done", "retry"],
    *,
    actor: str | Principal | Actor,
) -> Execution | None:
    """Async twin of :func:`reconcile_execution`."""
    import asyncio

    return await asyncio.to_thread(reconcile_execution, authority, request_id, outcome, actor=actor)

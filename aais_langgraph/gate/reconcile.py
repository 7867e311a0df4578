"""Checkpoints against the ledger: runs paused on AAIS requests the ledger does not vouch for.

The checkpointer keeps its own copy of every request a run is paused on (the
interrupt value), independent of the ledger. The ledger never deletes a request,
so a request a checkpoint is paused on must be in the ledger, unchanged. One
that is not means the ledger was emptied, replaced or edited (or the graph is
pointed at the wrong ledger): it is an integrity error for a human to look at,
not an approval that silently vanished from the inbox.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..authority import ApprovalAuthority
from ..ledger import StoredRequest
from ..protocol import AAISValidationError, sha256_digest
from ..protocol.extensions import EXTENSION_NAMESPACE
from .seams import INTERRUPT_CHANNEL, latest_interrupt_writes

__all__ = [
    "INTEGRITY_ERRORS_EXTENSION",
    "IntegrityProblem",
    "areconcile_checkpoints",
    "reconcile_checkpoints",
]

INTEGRITY_ERRORS_EXTENSION = EXTENSION_NAMESPACE + "integrity_errors"
"""The snapshot extension listing :class:`IntegrityProblem` s as JSON objects."""

# The channel under which checkpointers persist a task's interrupts (stored data format).


@dataclass(frozen=True)
class IntegrityProblem:
    """A thread paused on a request the ledger does not hold, or holds differently."""

    thread_id: str
    request_id: str
    reason: str

    def to_json(self) -> dict[str, str]:
        return {"thread_id": self.thread_id, "request_id": self.request_id, "reason": self.reason}


Paused = dict[tuple[str, str], Mapping[str, Any]]
"""``(thread_id, request_id) -> approval.requested`` envelope."""


def _collect(saved: Any, seen: set[str], found: Paused) -> None:
    """Add the AAIS interrupts of ``saved`` if it is its thread's latest root checkpoint."""
    configurable = saved.config.get("configurable", {})
    thread_id = str(configurable.get("thread_id"))
    if configurable.get("checkpoint_ns", "") or thread_id in seen:
        return  # newest first per thread: only its latest root checkpoint counts
    seen.add(thread_id)
    for _task, channel, value in saved.pending_writes or ():
        if channel == INTERRUPT_CHANNEL:
            _add(thread_id, value, found)


def _add(thread_id: str, value: Any, found: Paused) -> None:
    for pending in value if isinstance(value, (list, tuple)) else [value]:
        envelope = getattr(pending, "value", None)
        if isinstance(envelope, Mapping) and envelope.get("type") == "approval.requested":
            request = envelope.get("request")
            if isinstance(request, Mapping) and isinstance(request.get("id"), str):
                found[(thread_id, request["id"])] = envelope


def paused_requests(checkpointer: Any) -> Paused:
    """Every AAIS interrupt written in a thread's latest checkpoint. ``SqliteSaver``:
    one query over the latest checkpoints; other checkpointers: every checkpoint is
    read once (the cost follows the checkpointer's history, not what is pending)."""
    found: Paused = {}
    latest = latest_interrupt_writes(checkpointer)
    if latest is not None:
        for thread_id, value in latest:
            _add(thread_id, value, found)
        return found
    seen: set[str] = set()
    for saved in checkpointer.list(None):
        _collect(saved, seen, found)
    return found


async def apaused_requests(checkpointer: Any) -> Paused:
    """Async twin of :func:`paused_requests` (for async checkpointers)."""
    found: Paused = {}
    seen: set[str] = set()
    async for saved in checkpointer.alist(None):
        _collect(saved, seen, found)
    return found


def _same(a: Any, b: Any) -> bool:
    """Equal JSON values of the same JSON types (so their canonical forms are equal);
    cheaper than two RFC 8785 digests for the usual case of identical copies."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[key], b[key]) for key in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _digest(envelope: Mapping[str, Any]) -> str | None:
    try:
        return sha256_digest(dict(envelope))
    except AAISValidationError:
        return None


def reconcile_checkpoints(
    authority: ApprovalAuthority, checkpointer: Any
) -> list[IntegrityProblem]:
    """Every run paused on a request the ledger does not hold, or holds differently."""
    return _problems(authority, paused_requests(checkpointer))


async def areconcile_checkpoints(
    authority: ApprovalAuthority, checkpointer: Any
) -> list[IntegrityProblem]:
    """Async twin of :func:`reconcile_checkpoints`; ledger reads run in a worker thread."""
    paused = await apaused_requests(checkpointer)
    return await asyncio.to_thread(_problems, authority, paused)


def interrupted_by_thread(paused: Paused) -> dict[str, set[str]]:
    """Thread id -> ids of the requests its latest checkpoint is paused on."""
    found: dict[str, set[str]] = {}
    for thread_id, request_id in paused:
        found.setdefault(thread_id, set()).add(request_id)
    return found


def problems_in(
    authority: ApprovalAuthority,
    paused: Paused,
    known: Mapping[str, StoredRequest] | None = None,
) -> list[IntegrityProblem]:
    """:func:`reconcile_checkpoints` over requests already read: ``paused``
    (:func:`paused_requests`), and ``known`` ledger rows (read now, others are read)."""
    return _problems(authority, paused, known)


def _problems(
    authority: ApprovalAuthority,
    paused: Paused,
    known: Mapping[str, StoredRequest] | None = None,
) -> list[IntegrityProblem]:
    problems: list[IntegrityProblem] = []
    for (thread_id, request_id), envelope in sorted(paused.items()):
        stored = (known or {}).get(request_id) or authority.ledger.get_request(request_id)
        if stored is None:
            reason = "paused on a request the ledger does not hold"
        elif _same(stored.envelope, envelope):
            continue
        elif _digest(stored.envelope) != _digest(envelope):
            reason = "the ledger's copy of the request differs from the checkpoint's"
        else:
            continue
        problems.append(IntegrityProblem(thread_id, request_id, reason))
    return problems

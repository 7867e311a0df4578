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
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from weakref import WeakKeyDictionary

from ..authority import ApprovalAuthority
from ..gate.seams import (
    INTERRUPT_CHANNEL,
    latest_interrupt_blobs,
    latest_interrupt_writes,
    load_write,
)
from ..ledger import PendingRow, StoredRequest
from ..protocol import AAISValidationError, sha256_digest
from ..protocol.extensions import EXTENSION_NAMESPACE

__all__ = [
    "INTEGRITY_ERRORS_EXTENSION",
    "IntegrityProblem",
    "areconcile_checkpoints",
    "reconcile_checkpoints",
    "reconcile_rows",
]

INTEGRITY_ERRORS_EXTENSION = EXTENSION_NAMESPACE + "integrity_errors"
"""The snapshot extension listing :class:`IntegrityProblem` s as JSON objects."""

# The channel under which checkpointers persist a task's interrupts (stored data format).


@dataclass(frozen=True)
class IntegrityProblem:
    """A thread paused on a request the ledger does not hold, or holds differently."""

    thread_id: str
    """Empty for a request that names no thread (then left out of :meth:`to_json`)."""
    request_id: str
    reason: str

    def to_json(self) -> dict[str, str]:
        found = {"request_id": self.request_id, "reason": self.reason}
        return {"thread_id": self.thread_id, **found} if self.thread_id else found


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
    for request_id, envelope in _requests_in(value).items():
        found[(thread_id, request_id)] = envelope


def _requests_in(value: Any) -> dict[str, Mapping[str, Any]]:
    """Request id -> ``approval.requested`` envelope of the AAIS interrupts in a write."""
    found: dict[str, Mapping[str, Any]] = {}
    for pending in value if isinstance(value, (list, tuple)) else [value]:
        envelope = getattr(pending, "value", None)
        if isinstance(envelope, Mapping) and envelope.get("type") == "approval.requested":
            request = envelope.get("request")
            if isinstance(request, Mapping) and isinstance(request.get("id"), str):
                found[request["id"]] = envelope
    return found


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


NOT_HELD = "paused on a request the ledger does not hold"
DIFFERS = "the ledger's copy of the request differs from the checkpoint's"


def _differs(ledger_copy: Mapping[str, Any], checkpoint_copy: Mapping[str, Any]) -> bool:
    return not _same(ledger_copy, checkpoint_copy) and _digest(ledger_copy) != _digest(
        checkpoint_copy
    )


def _problems(
    authority: ApprovalAuthority,
    paused: Paused,
    known: Mapping[str, StoredRequest] | None = None,
) -> list[IntegrityProblem]:
    problems: list[IntegrityProblem] = []
    for (thread_id, request_id), envelope in sorted(paused.items()):
        stored = (known or {}).get(request_id) or authority.ledger.get_request(request_id)
        if stored is None:
            problems.append(IntegrityProblem(thread_id, request_id, NOT_HELD))
        elif _differs(stored.envelope, envelope):
            problems.append(IntegrityProblem(thread_id, request_id, DIFFERS))
    return problems


# -- the inbox's reconciliation: each stored write worked out once per process ----------


@dataclass
class _WritesSeen:
    """What earlier listings worked out from a checkpointer's interrupt writes (keyed by
    their bytes, entries reused as they are: a listing allocates little for what it met)."""

    ids: dict[bytes, tuple[str, tuple[str, ...]]] = field(default_factory=dict)
    """Stored bytes -> their serializer type and the ids of the AAIS requests in them."""
    agreed: dict[PendingRow, bytes] = field(default_factory=dict)
    """Ledger row -> the stored write whose copy of the request is the row's."""


_LOCK = threading.Lock()
_SEEN: WeakKeyDictionary[Any, _WritesSeen] = WeakKeyDictionary()


def reconcile_rows(
    authority: ApprovalAuthority,
    checkpointer: Any,
    rows: Mapping[str, PendingRow],
    skip: set[str],
) -> tuple[list[IntegrityProblem], dict[str, tuple[str, ...]]] | None:
    """The problems of the runs paused in each thread's latest checkpoint against the
    ledger (``rows``, by request id, are pending rows read already; others are read; ``skip``
    names requests reported already), and thread id -> the request ids each is paused on.

    ``SqliteSaver`` only (None for others: :func:`paused_requests`): one query, and a
    write whose bytes were read before is not deserialized again, nor compared again
    with a row (every column equal) it agreed with. What is remembered is what the
    last call met, so it is bounded by what is paused.
    """
    stored = latest_interrupt_blobs(checkpointer)
    if stored is None:
        return None
    with _LOCK:
        seen = _SEEN.get(checkpointer) or _WritesSeen()
    now = _WritesSeen()
    decoded: dict[bytes, dict[str, Mapping[str, Any]]] = {}

    def envelopes(kind: str, value: bytes) -> dict[str, Mapping[str, Any]]:
        if value not in decoded:
            decoded[value] = _requests_in(load_write(checkpointer, (kind, value)))
        return decoded[value]

    problems: list[IntegrityProblem] = []
    interrupted: dict[str, tuple[str, ...]] = {}
    for thread_id, kind, value in stored:
        entry = seen.ids.get(value)
        if entry is None or entry[0] != kind:
            entry = (kind, tuple(envelopes(kind, value)))
        now.ids[value] = entry
        ids = entry[1]
        interrupted[thread_id] = interrupted[thread_id] + ids if thread_id in interrupted else ids
        for request_id in ids:
            row = rows.get(request_id)
            if request_id in skip:
                continue
            if row is not None and seen.agreed.get(row) == value:
                now.agreed[row] = value
                continue
            checkpoint_copy = envelopes(kind, value)[request_id]
            if row is None:  # resolved, another session's, or not held
                held = authority.ledger.get_request(request_id)
                if held is None:
                    problems.append(IntegrityProblem(thread_id, request_id, NOT_HELD))
                elif _differs(held.envelope, checkpoint_copy):
                    problems.append(IntegrityProblem(thread_id, request_id, DIFFERS))
            elif _differs(row.parsed().envelope, checkpoint_copy):
                problems.append(IntegrityProblem(thread_id, request_id, DIFFERS))
            else:
                now.agreed[row] = value
    with _LOCK:
        _SEEN[checkpointer] = now
    return sorted(problems, key=lambda p: (p.thread_id, p.request_id)), interrupted

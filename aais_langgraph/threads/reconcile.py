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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from weakref import WeakKeyDictionary

from ..authority import ApprovalAuthority
from ..gate.langchain_ui import checkpoint_envelope
from ..gate.seams import (
    INTERRUPT_WRITES,
    InterruptRow,
    ainterrupt_bytes,
    alatest_interrupt_rows,
    interrupt_bytes,
    latest_interrupt_rows,
    latest_interrupt_writes,
    load_write,
)
from ..ledger import PendingRow, StoredRequest
from ..protocol import AAISValidationError, sha256_digest
from ..protocol.digest import plain_canonical
from ..protocol.extensions import EXTENSION_NAMESPACE

__all__ = [
    "INTEGRITY_ERRORS_EXTENSION",
    "IntegrityProblem",
    "areconcile_checkpoints",
    "areconcile_rows",
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
        if channel == INTERRUPT_WRITES:
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
                # The keys LangChain's UIs read must show this request, or it differs.
                found[request["id"]] = checkpoint_envelope(envelope)
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


def _differs_from_row(row: PendingRow, checkpoint_copy: Mapping[str, Any]) -> bool:
    """:func:`_differs` of the row's envelope, read from its text only when that text is
    not the canonical form of the checkpoint's copy, written plainly: a ledger stores
    that form (the text a vouched row hashes to its audit digest), and equal texts are
    equal values of the same JSON types, which :func:`_same` accepts."""
    written = plain_canonical(dict(checkpoint_copy))
    if written is not None and written == row.envelope_text.encode("utf-8", "surrogatepass"):
        return False
    return _differs(row.parsed().envelope, checkpoint_copy)


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


_Write = tuple[str, int, str, int, tuple[str, ...]]
"""A stored interrupt write as met before: its checkpoint id, row id, serializer type and
size, and the ids of the AAIS requests in it."""


@dataclass
class _WritesSeen:
    """What earlier listings worked out from a checkpointer's interrupt writes, by thread
    (entries reused as they are: a listing allocates little for what it met)."""

    writes: dict[str, list[_Write]] = field(default_factory=dict)
    """Thread id -> the interrupt writes of its latest checkpoint."""
    agreed: dict[str, tuple[PendingRow, _Write]] = field(default_factory=dict)
    """Request id -> the ledger row and the stored write whose copy of the request is the
    row's."""


_LOCK = threading.Lock()
_SEEN: WeakKeyDictionary[Any, _WritesSeen] = WeakKeyDictionary()


def _matched(seen: _WritesSeen, stored: list[InterruptRow]) -> list[_Write | None]:
    """For each row read, the write ``seen`` holds for its thread with the same checkpoint,
    row id, type and size (None: a write not met, whose bytes are to be read)."""
    writes = seen.writes
    found: list[_Write | None] = []
    for row in stored:
        match = None
        for write in writes.get(row[0], ()):
            if (
                write[1] == row[2]
                and write[0] == row[1]
                and write[2] == row[3]
                and write[3] == row[4]
            ):
                match = write
                break
        found.append(match)
    return found


def _keep(now: _WritesSeen, thread_id: str, write: _Write, known: list[_Write] | None) -> None:
    """Remember ``write`` for ``thread_id``; a thread whose one write is the one it held
    before keeps the same list."""
    listed = now.writes.get(thread_id)
    if listed is None:
        one = known is not None and len(known) == 1 and known[0] is write
        now.writes[thread_id] = known if one and known is not None else [write]
        return
    if listed is known:
        listed = now.writes[thread_id] = list(known)  # never change what ``seen`` holds
    listed.append(write)


def _unmet(stored: list[InterruptRow], matched: list[_Write | None]) -> list[int]:
    """The row ids of the writes not met before."""
    return [row[2] for row, write in zip(stored, matched, strict=True) if write is None]


_Found = tuple[list[IntegrityProblem], dict[str, tuple[str, ...]]]


def reconcile_rows(
    authority: ApprovalAuthority,
    checkpointer: Any,
    rows: Mapping[str, PendingRow],
    skip: set[str],
) -> _Found | None:
    """The problems of the runs paused in each thread's latest checkpoint against the
    ledger (``rows``, by request id, are pending rows read already; others are read; ``skip``
    names requests reported already), and thread id -> the request ids each is paused on.

    ``SqliteSaver`` only (None for others: :func:`paused_requests`): one query for what
    identifies the writes (of the threads written to since the last call, after the
    first: :func:`~aais_langgraph.gate.seams.latest_interrupt_rows`), and one for the
    bytes of those not met before (LangGraph
    stores a changed write as a new row: :data:`~aais_langgraph.gate.seams.InterruptRow`);
    a write met before is not read or deserialized again, nor compared again with a row
    (every column equal) it agreed with. What is remembered is what the last call met
    (ids, not bytes), so it is bounded by what is paused.

    Args:
        authority: the authority whose ledger is checked.
        checkpointer: the graph's checkpointer.
        rows: pending rows read already, by request id.
        skip: request ids reported already.
    """
    stored = latest_interrupt_rows(checkpointer)
    if stored is None:
        return None
    seen = _seen(checkpointer)
    matched = _matched(seen, stored)
    fresh = interrupt_bytes(checkpointer, _unmet(stored, matched))
    return _reconciled_rows(
        authority,
        checkpointer,
        seen,
        stored,
        matched,
        fresh,
        rows,
        skip,
        lambda rowid: interrupt_bytes(checkpointer, (rowid,)).get(rowid),
    )


async def areconcile_rows(
    authority: ApprovalAuthority,
    checkpointer: Any,
    rows: Mapping[str, PendingRow],
    skip: set[str],
) -> _Found | None:
    """:func:`reconcile_rows` on an event loop, for ``SqliteSaver`` (in a worker thread)
    and ``AsyncSqliteSaver`` (its queries on the loop, the rest in a worker thread)."""
    stored = await alatest_interrupt_rows(checkpointer)
    if stored is None:
        return await asyncio.to_thread(reconcile_rows, authority, checkpointer, rows, skip)
    seen = _seen(checkpointer)
    matched = _matched(seen, stored)
    fresh = await ainterrupt_bytes(checkpointer, _unmet(stored, matched))
    loop = asyncio.get_running_loop()

    def read_bytes(rowid: int) -> bytes | None:  # in the worker thread, on the loop's saver
        read = ainterrupt_bytes(checkpointer, (rowid,))
        return asyncio.run_coroutine_threadsafe(read, loop).result().get(rowid)

    return await asyncio.to_thread(
        _reconciled_rows,
        authority,
        checkpointer,
        seen,
        stored,
        matched,
        fresh,
        rows,
        skip,
        read_bytes,
    )


def _seen(checkpointer: Any) -> _WritesSeen:
    with _LOCK:
        return _SEEN.get(checkpointer) or _WritesSeen()


def _reconciled_rows(
    authority: ApprovalAuthority,
    checkpointer: Any,
    seen: _WritesSeen,
    stored: list[InterruptRow],
    matched: list[_Write | None],
    fresh: dict[int, bytes],
    rows: Mapping[str, PendingRow],
    skip: set[str],
    read_bytes: Callable[[int], bytes | None],
) -> _Found:
    now = _WritesSeen()

    def envelopes(kind: str, rowid: int) -> dict[str, Mapping[str, Any]]:
        # Each write's bytes are dropped once read, and its requests once compared, so a
        # first listing never holds every write at once.
        value = fresh.pop(rowid, None)
        if value is None:  # met before, and its row disagrees now: read it again
            value = read_bytes(rowid)
        # A write gone since the first query holds nothing: its thread moved on.
        return {} if value is None else _requests_in(load_write(checkpointer, (kind, value)))

    problems: list[IntegrityProblem] = []
    interrupted: dict[str, tuple[str, ...]] = {}
    seen_writes, now_writes, seen_agreed, now_agreed = (
        seen.writes,
        now.writes,
        seen.agreed,
        now.agreed,
    )
    for (thread_id, checkpoint_id, rowid, kind, size), write in zip(stored, matched, strict=True):
        copies: dict[str, Mapping[str, Any]] | None = None
        if write is None:
            copies = envelopes(kind, rowid)
            write = (checkpoint_id, rowid, kind, size, tuple(copies))
        known = seen_writes.get(thread_id)
        if (
            thread_id not in now_writes
            and known is not None
            and len(known) == 1
            and known[0] is write
        ):
            now_writes[thread_id] = known  # the one write it held before: the same list
        else:
            _keep(now, thread_id, write, known)
        ids = write[4]
        interrupted[thread_id] = interrupted[thread_id] + ids if thread_id in interrupted else ids
        for request_id in ids:
            if request_id in skip:
                continue
            row = rows.get(request_id)
            agreed = seen_agreed.get(request_id)
            if (
                row is not None
                and agreed is not None
                and agreed[1] is write
                and (agreed[0] is row or agreed[0] == row)
            ):
                now_agreed[request_id] = agreed
                continue
            if copies is None:
                copies = envelopes(kind, rowid)
            checkpoint_copy = copies.get(request_id)
            if checkpoint_copy is None:
                continue  # the write is gone since the query: its thread moved on
            if row is None:  # resolved, another session's, or not held
                held = authority.ledger.get_request(request_id)
                if held is None:
                    problems.append(IntegrityProblem(thread_id, request_id, NOT_HELD))
                elif _differs(held.envelope, checkpoint_copy):
                    problems.append(IntegrityProblem(thread_id, request_id, DIFFERS))
            elif _differs_from_row(row, checkpoint_copy):
                problems.append(IntegrityProblem(thread_id, request_id, DIFFERS))
            else:
                now.agreed[request_id] = (row, write)
    with _LOCK:
        _SEEN[checkpointer] = now
    return sorted(problems, key=lambda p: (p.thread_id, p.request_id)), interrupted

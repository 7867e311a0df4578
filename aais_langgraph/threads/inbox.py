"""The cross-thread inbox: the pending approvals their threads really wait for."""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Any

from ..authority import ApprovalAuthority
from ..ledger import PendingRow, PendingSelection, StoredRequest
from ..protocol import ApprovalSnapshot
from .listing import Listing
from .reconcile import (
    IntegrityProblem,
    Paused,
    apaused_requests,
    areconcile_rows,
    interrupted_by_thread,
    paused_requests,
    problems_in,
    reconcile_rows,
)
from .runs import awaiting_among, waiting_among

Interrupted = Mapping[str, Collection[str]]
"""Thread id -> the ids of the requests its latest checkpoint is paused on."""


def waiting_snapshot(
    authority: ApprovalAuthority,
    graph: Any | None = None,
    *,
    session_id: str | None = None,
    now: datetime | None = None,
    reconcile: bool = True,
    selection: PendingSelection | None = None,
) -> ApprovalSnapshot:
    """``approval.snapshot`` of unexpired requests that are pending in the ledger *and*,
    when ``graph`` is given, still waited for by their thread
    (:meth:`~aais_langgraph.gate.views.ThreadView.waiting`).

    A request whose task is gone (the run finished, or moved on after an edit of
    its state) is left out; one whose task is live is listed even before its
    interrupt is checkpointed. One indexed ledger query for the pending rows, each
    vouched for by its audit entry once per process (:class:`~.listing.Listing`; a
    row the audit does not vouch for is reported, not listed), and one checkpoint
    read per thread that has any (``get_state`` only for a thread whose latest
    checkpoint lacks the request's interrupt), so this listing costs what is
    pending, not the history. ``now`` defaults to the authority's clock.
    ``selection`` reads only the pending rows it admits (a superset of what one
    viewer may see: :meth:`~aais_langgraph.authority.Access.view_selection`);
    the snapshot still holds every row read, for the caller's exact check to cut.

    With ``graph`` and ``reconcile`` (the default), the checkpointer is also read
    for runs paused on requests the ledger does not hold, or holds differently
    (an emptied, replaced or edited ledger): they are not listed as pending but
    reported in the snapshot's ``aais-langgraph.org/integrity_errors`` extension
    (``thread_id``, ``request_id``, ``reason``), so no paused approval vanishes
    silently. With ``SqliteSaver`` (and ``AsyncSqliteSaver`` in the async twin) that is
    one query over each thread's latest checkpoint, whose interrupts also serve the
    waiting rule (with or without ``reconcile``); after that first listing, only the
    threads with checkpoints or writes added since are read again (any deletion reads
    every thread again); the bytes of a write are read and deserialized only when it
    is new to this process. Other checkpointers are read in
    full once (cost follows their history), which ``reconcile=False`` skips,
    reporting nothing.

    Args:
        authority: the authority whose ledger is listed.
        graph: the graph whose threads must still wait (None: the ledger alone).
        session_id: only this session's requests (None: every session).
        now: the moment expiry is judged at (default: the authority's clock).
        reconcile: also report runs paused on requests the ledger does not hold.
        selection: read only the pending rows it admits (None: every row).
    """
    listing = Listing.read(authority, session_id, now, selection)
    if graph is None:
        return listing.snapshot(authority, session_id, None, [])
    saver = graph.checkpointer
    # One pass over the checkpointer serves both the reconciliation and the waiting rule.
    found: tuple[list[IntegrityProblem], Interrupted] | None = None
    if saver is not None:
        found = reconcile_rows(authority, saver, *_known(listing))
    if found is None and reconcile and saver is not None:
        found = _reconciled(authority, listing, paused_requests(saver))
    problems, interrupted = found if found is not None else ([], None)
    settled, rest = _settled(listing, interrupted)
    stored = listing.stored(rest)
    waiting = settled | waiting_among(graph, authority, stored, _as_sets(interrupted, stored))
    return listing.snapshot(authority, session_id, waiting, problems if reconcile else [])


async def awaiting_snapshot(
    authority: ApprovalAuthority,
    graph: Any | None = None,
    *,
    session_id: str | None = None,
    now: datetime | None = None,
    reconcile: bool = True,
    selection: PendingSelection | None = None,
) -> ApprovalSnapshot:
    """Async twin of :func:`waiting_snapshot` (async checkpointers welcome)."""
    listing = await asyncio.to_thread(Listing.read, authority, session_id, now, selection)
    if graph is None:
        return await asyncio.to_thread(listing.snapshot, authority, session_id, None, [])
    saver = graph.checkpointer
    found: tuple[list[IntegrityProblem], Interrupted] | None = None
    if saver is not None:
        found = await areconcile_rows(authority, saver, *_known(listing))
    if found is None and reconcile and saver is not None:
        paused = await apaused_requests(saver)
        found = await asyncio.to_thread(_reconciled, authority, listing, paused)
    problems, interrupted = found if found is not None else ([], None)
    settled, rest = _settled(listing, interrupted)
    stored = listing.stored(rest)
    waiting = settled | await awaiting_among(
        graph, authority, stored, _as_sets(interrupted, stored)
    )
    reported = problems if reconcile else []
    return await asyncio.to_thread(listing.snapshot, authority, session_id, waiting, reported)


def _known(listing: Listing) -> tuple[dict[str, PendingRow], set[str]]:
    """The pending rows read (listed or expired) by request id, and the ids of the rows
    reported already."""
    known = dict(zip(listing.requests, listing.rows, strict=True))  # in step, by id
    known.update(listing.expired)
    return known, listing.refused_ids()


def _reconciled(
    authority: ApprovalAuthority, listing: Listing, paused: Paused
) -> tuple[list[IntegrityProblem], Interrupted]:
    """:func:`~.reconcile.reconcile_rows` for checkpointers read in full (``paused``)."""
    skip = listing.refused_ids()
    paused = {pair: envelope for pair, envelope in paused.items() if pair[1] not in skip}
    known = {stored.request_id: stored for stored in listing.stored()}
    return problems_in(authority, paused, known), interrupted_by_thread(paused)


def _as_sets(
    interrupted: Interrupted | None, stored: list[StoredRequest]
) -> dict[str, set[str]] | None:
    """``interrupted`` for the threads of ``stored``, as the waiting rule takes it."""
    if interrupted is None:
        return None
    threads = {item.thread_id for item in stored if item.thread_id is not None}
    return {thread_id: set(interrupted.get(thread_id, ())) for thread_id in threads}


def _settled(
    listing: Listing, interrupted: Interrupted | None
) -> tuple[set[str], list[PendingRow]]:
    """Ids of the rows that wait for sure (no thread to check, or their interrupt is in
    their thread's latest checkpoint, read already), and the rows the waiting rule
    must still read."""
    settled: set[str] = set()
    rest: list[PendingRow] = []
    for row in listing.rows:
        if row.thread_id is None or (
            interrupted is not None and row.request_id in interrupted.get(row.thread_id, ())
        ):
            settled.add(row.request_id)
        else:
            rest.append(row)
    return settled, rest

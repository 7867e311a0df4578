"""The ledger's side of the inbox: pending rows the audit vouches for, each checked once.

A listing reads the pending rows in one query with their JSON still text
(:meth:`~aais_langgraph.ledger.Ledger.list_pending_rows`). A row seen before with
the same content (every column equal) reuses what was worked out for it then: the
validated envelope of a row the audit entry (and seal) vouches for, or why it does
not. Only new rows are parsed, vouched for and validated, so a listing costs one
query, and per unchanged row a lookup by its id and a comparison of its columns
with those remembered (no hashing of its text); the remembered row stands in for
the one just read, so a listing keeps nothing new alive for what it met before.
What is remembered is what the last listing of all sessions held (and what
one-session listings added since), so it is bounded by what is pending.

A row the audit does not vouch for is left out and reported as an
:class:`~.reconcile.IntegrityProblem`: the inbox never shows a request the gate
would refuse to act on, and one bad row does not hide the others.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import datetime
from weakref import WeakKeyDictionary

from ..authority import ApprovalAuthority
from ..authority.resolutions import snapshot_of
from ..ledger import LedgerIntegrityError, PendingRow, PendingSelection, StoredRequest
from ..protocol import AAISValidationError, ApprovalRequested, ApprovalSnapshot
from .reconcile import INTEGRITY_ERRORS_EXTENSION, IntegrityProblem

__all__ = ["Listing"]

_Vouched = ApprovalRequested | str
"""A row's validated envelope, or why the ledger does not vouch for it."""

_MERGED_LIMIT = 50_000
"""Rows remembered from partial listings (one session's, one viewer's) before what no
listing of everything has pruned is forgotten: a bound, not a size to reach."""

_Seen = dict[str, tuple[PendingRow, _Vouched]]
"""Request id -> the row last read under it and what was worked out for that row."""

_LOCK = threading.Lock()
_SEEN: WeakKeyDictionary[ApprovalAuthority, _Seen] = WeakKeyDictionary()
_VOUCHING: WeakKeyDictionary[ApprovalAuthority, threading.Lock] = WeakKeyDictionary()


_UNREADABLE = "the ledger does not vouch for it: it cannot be read (a malformed column)"


def _readable(row: PendingRow) -> bool:
    """Whether every column of a row not seen before holds a value of its type (the
    ledger reads columns as stored; a row equal to one remembered was checked then)."""
    return (
        type(row.request_id) is str
        and type(row.envelope_text) is str
        and type(row.context_text) is str
        and type(row.session_id) is str
        and (row.expires_at is None or type(row.expires_at) in (float, int))
        and (row.thread_id is None or type(row.thread_id) is str)
        and (row.audit_index is None or type(row.audit_index) is int)
        and (row.mac is None or type(row.mac) is str)
    )


def _thread_of(row: PendingRow) -> str:
    return row.thread_id if type(row.thread_id) is str else ""


def _vouched_all(authority: ApprovalAuthority, rows: list[PendingRow]) -> list[_Vouched]:
    """What each row not seen before vouches for: its rows' audit entries read at once,
    each row parsed in its turn."""
    return [_reason(answer) for answer in authority.vouched_requests(rows)]


def _reason(answer: ApprovalRequested | Exception) -> _Vouched:
    if isinstance(answer, ApprovalRequested):
        return answer
    if isinstance(answer, LedgerIntegrityError):
        return f"the ledger does not vouch for it: {answer.reason}"
    if isinstance(answer, AAISValidationError):  # vouched for, yet not valid: a recomputed chain
        return f"its envelope is not a valid request (at {answer.pointer or '/'})"
    return _UNREADABLE


def _vouching(authority: ApprovalAuthority) -> threading.Lock:
    """The lock one listing of ``authority`` holds while it vouches for new rows."""
    with _LOCK:
        lock = _VOUCHING.get(authority)
        if lock is None:
            lock = _VOUCHING[authority] = threading.Lock()
        return lock


def _remember(authority: ApprovalAuthority, kept: _Seen, *, whole: bool) -> None:
    """Keep what a listing worked out: a whole listing's rows replace what was kept (the
    rows resolved since are forgotten); a part's are added, within a bound."""
    with _LOCK:
        if whole:
            _SEEN[authority] = kept
        elif kept:
            current = _SEEN.setdefault(authority, {})
            if len(current) + len(kept) > _MERGED_LIMIT:
                _SEEN[authority] = kept
            else:
                current.update(kept)


@dataclass
class Listing:
    """Pending, unexpired rows (sequence order) with their vouched envelopes, as of when."""

    as_of: int
    moment: datetime
    rows: list[PendingRow]
    requests: dict[str, ApprovalRequested]
    refused: list[IntegrityProblem] = field(default_factory=list)
    """Rows left out because the ledger does not vouch for them."""
    expired: dict[str, PendingRow] = field(default_factory=dict)
    """Rows left out because they expired (a run may still be paused on one)."""

    @classmethod
    def read(
        cls,
        authority: ApprovalAuthority,
        session_id: str | None,
        now: datetime | None,
        selection: PendingSelection | None = None,
    ) -> Listing:
        """The pending rows of ``session_id`` (None: all sessions) that ``selection``
        admits (None: every row; a superset of what one viewer may see), as of ``now``.

        Args:
            authority: the authority whose ledger is read.
            session_id: only this session's rows (None: all).
            now: the moment expiry is judged at (None: the authority's clock).
            selection: read only the rows it admits (None: every row).
        """
        as_of = authority.ledger.last_sequence()
        moment = now if now is not None else authority.clock()
        whole = session_id is None and selection is None
        with _LOCK:
            remembered = _SEEN.get(authority)
            size = len(remembered or ())
        seen = remembered or {}
        fetched = authority.ledger.list_pending_rows(session_id=session_id, selection=selection)
        # The indexed expiry column is the envelope's ``expires_at`` in epoch seconds.
        at = moment.timestamp()

        def take(vouched: dict[str, _Vouched]) -> tuple[Listing, _Seen, list[PendingRow]]:
            """The listing of the rows read, and the rows neither seen nor in ``vouched``
            (left out: when there are any, they are vouched for together and the rows
            taken again)."""
            kept: _Seen = {}  # a whole listing's rows; a part's new ones
            listing = cls(as_of, moment, [], {})
            rows, requests, fresh = listing.rows, listing.requests, []
            for row in fetched:
                request_id = row.request_id
                entry = seen.get(request_id)
                if entry is not None and (entry[0] is row or entry[0] == row):
                    row = entry[0]  # the row remembered stands in for the equal one just read
                elif not _readable(row):
                    problem = IntegrityProblem(_thread_of(row), request_id, _UNREADABLE)
                    listing.refused.append(problem)
                    continue
                else:
                    entry = None
                if row.expires_at is not None and at >= row.expires_at:
                    listing.expired[request_id] = row  # not shown, so not vouched for either
                    continue
                if entry is None:
                    if request_id not in vouched:
                        fresh.append(row)
                        continue
                    entry = kept[request_id] = (row, vouched[request_id])
                elif whole:
                    kept[request_id] = entry
                found = entry[1]
                if isinstance(found, str):
                    listing.refused.append(IntegrityProblem(row.thread_id or "", request_id, found))
                elif row.expires_at is not None or moment < authority.expiry_of(found.request):
                    rows.append(row)
                    requests[request_id] = found
            return listing, kept, fresh

        listing, kept, fresh = take({})
        if not fresh:
            _remember(authority, kept, whole=whole)
            return listing
        # New rows are vouched for by one listing at a time: one that comes while another
        # works takes what that one worked out instead of doing the same work beside it.
        with _vouching(authority):
            with _LOCK:
                latest = _SEEN.get(authority)
                worked = latest is not remembered or len(latest or ()) != size
            if worked:  # another listing kept rows meanwhile: take what it worked out
                seen = latest or {}
                listing, kept, fresh = take({})
            if fresh:  # their audit entries in one read
                ids = [row.request_id for row in fresh]
                vouched = dict(zip(ids, _vouched_all(authority, fresh), strict=True))
                listing, kept, _ = take(vouched)
            _remember(authority, kept, whole=whole)
        return listing

    def refused_ids(self) -> set[str]:
        return {problem.request_id for problem in self.refused}

    def stored(self, rows: list[PendingRow] | None = None) -> list[StoredRequest]:
        """The parsed rows (for the waiting rule where the checkpoint does not settle it)."""
        return [row.parsed() for row in (self.rows if rows is None else rows)]

    def snapshot(
        self,
        authority: ApprovalAuthority,
        session_id: str | None,
        waiting: set[str] | None,
        problems: list[IntegrityProblem],
    ) -> ApprovalSnapshot:
        """``approval.snapshot`` of the rows ``waiting`` names (all for None), leaving out
        those ``problems`` name, which the integrity extension reports with the refused.

        Args:
            authority: the authority the snapshot is of (its stream, its clock).
            session_id: the session listed (None: all).
            waiting: the ids the threads still wait for (None: every row read).
            problems: integrity problems to report, whose requests are left out.
        """
        reported = self.refused + problems
        suspect = {problem.request_id for problem in reported}
        pending = [
            self.requests[row.request_id].request
            for row in self.rows
            if (waiting is None or row.request_id in waiting) and row.request_id not in suspect
        ]
        snapshot = snapshot_of(
            pending,
            as_of=self.as_of,
            now=self.moment,
            stream=authority.stream,
            unknown_executions=authority.unknown_executions(session_id=session_id),
        )
        if not reported:
            return snapshot
        extensions = {
            **(snapshot.extensions or {}),
            INTEGRITY_ERRORS_EXTENSION: [problem.to_json() for problem in reported],
        }
        return snapshot.model_copy(update={"extensions": extensions})

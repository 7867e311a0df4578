"""The ledger's side of the inbox: pending rows the audit vouches for, each checked once.

A listing reads the pending rows in one query with their JSON still text
(:meth:`~aais_langgraph.ledger.Ledger.list_pending_rows`). A row seen before with
the same content (every column equal) reuses what was worked out for it then: the
validated envelope of a row the audit entry (and seal) vouches for, or why it does
not. Only new rows are parsed, vouched for and validated, so a listing costs one
query and a dictionary lookup per unchanged row. What is remembered is what the
last listing of all sessions held (and what one-session listings added since), so
it is bounded by what is pending.

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
from ..ledger import LedgerIntegrityError, PendingRow, StoredRequest
from ..protocol import AAISValidationError, ApprovalRequested, ApprovalSnapshot
from .reconcile import INTEGRITY_ERRORS_EXTENSION, IntegrityProblem

__all__ = ["Listing"]

_Vouched = ApprovalRequested | str
"""A row's validated envelope, or why the ledger does not vouch for it."""

_LOCK = threading.Lock()
_SEEN: WeakKeyDictionary[ApprovalAuthority, dict[PendingRow, _Vouched]] = WeakKeyDictionary()


def _vouch(authority: ApprovalAuthority, row: PendingRow) -> _Vouched:
    try:
        return authority.vouched_request(row.parsed())
    except LedgerIntegrityError as error:
        return f"the ledger does not vouch for it: {error.reason}"
    except AAISValidationError as error:  # vouched for, yet not valid: a recomputed chain
        return f"its envelope is not a valid request (at {error.pointer or '/'})"
    except (ValueError, TypeError):
        return "the ledger does not vouch for it: it cannot be read (a malformed column)"


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
        cls, authority: ApprovalAuthority, session_id: str | None, now: datetime | None
    ) -> Listing:
        as_of = authority.ledger.last_sequence()
        moment = now if now is not None else authority.clock()
        with _LOCK:
            seen = _SEEN.get(authority, {})
        kept: dict[PendingRow, _Vouched] = {}
        listing = cls(as_of, moment, [], {})
        # The indexed expiry column is the envelope's ``expires_at`` in epoch seconds.
        at = moment.timestamp()
        for row in authority.ledger.list_pending_rows(session_id=session_id):
            if row.expires_at is not None and at >= row.expires_at:
                listing.expired[row.request_id] = row  # not shown, so not vouched for either
                continue
            found = seen.get(row)
            if found is None:
                found = _vouch(authority, row)
            kept[row] = found
            if isinstance(found, str):
                listing.refused.append(IntegrityProblem(row.thread_id or "", row.request_id, found))
            elif row.expires_at is not None or moment < authority.expiry_of(found.request):
                listing.rows.append(row)
                listing.requests[row.request_id] = found
        with _LOCK:
            if session_id is None:  # all that is pending: forget the rows resolved since
                _SEEN[authority] = kept
            else:  # one session's: keep what the others' listings worked out
                _SEEN[authority] = {**_SEEN.get(authority, {}), **kept}
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
        those ``problems`` name, which the integrity extension reports with the refused."""
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

"""The compacted prefix of the audit chain: the entry that vouches for history removed from it.

Retention (:mod:`.retention`) deletes the oldest entries of the chain together with
the rows they vouched for. It appends a ``compacted`` entry that names the removed
range (``audit_from`` .. ``audit_through``) and the hash of its last entry
(``audit_through_hash``): the first entry kept links to that hash, so the chain
still verifies from there. The checkpoint is itself a chained entry, so editing it
breaks the chain like any other edit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .base import AuditEntry, JsonDict

__all__ = ["ChainStart", "chain_start", "history_audit"]


@dataclass(frozen=True)
class ChainStart:
    """Where a stored chain begins: its first index, the hash it links to, and the
    removed range ``(0, last)`` its newest checkpoint vouches for (None: nothing removed)."""

    index: int
    prev_hash: str
    compacted: tuple[int, int] | None = None


def history_audit(
    *,
    before_sequence: int,
    removed_events: int,
    audit_from: int,
    audit_through: int,
    audit_through_hash: str,
    requests_removed: int,
    carried: int,
) -> JsonDict:
    """The ``compacted`` payload of a retention pass (``before_sequence`` and ``removed``
    as event compaction writes them, so the events' floor reads the same)."""
    return {
        "before_sequence": before_sequence,
        "removed": removed_events,
        "audit_from": audit_from,
        "audit_through": audit_through,
        "audit_through_hash": audit_through_hash,
        "requests_removed": requests_removed,
        "carried": carried,
    }


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def chain_start(entries: Sequence[AuditEntry], genesis: str) -> ChainStart:
    """Where ``entries`` (a stored chain, in order) must begin.

    A chain that starts at index 0 starts at ``genesis``. One that starts later must
    start right after the range its newest checkpoint names, at that range's last
    hash; without such a checkpoint it must start at 0 (so verification reports the
    missing entries)."""
    if not entries or entries[0].index == 0:
        return ChainStart(0, genesis)
    newest: tuple[int, str] | None = None
    for entry in entries:
        if entry.kind != "compacted":
            continue
        through = _int(entry.payload.get("audit_through"))
        tip_hash = entry.payload.get("audit_through_hash")
        if through is None or not isinstance(tip_hash, str):
            continue
        if newest is None or through > newest[0]:
            newest = (through, tip_hash)
    if newest is None or newest[0] + 1 != entries[0].index:
        return ChainStart(0, genesis)
    through, tip_hash = newest
    return ChainStart(through + 1, tip_hash, (0, through))

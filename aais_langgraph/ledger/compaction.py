"""The compacted prefix of the audit chain: the entry that vouches for history removed from it.

Retention (:mod:`.retention`) deletes the oldest entries of the chain together with
the rows they vouched for. It appends a ``compacted`` entry that names the removed
range (``audit_from`` .. ``audit_through``) and the hash of its last entry
(``audit_through_hash``): the first entry kept links to that hash, so the chain
still verifies from there. The checkpoint is itself a chained entry, so editing it
breaks the chain like any other edit.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from aais_langgraph.protocol import canonical_json

from .records import AuditEntry, JsonDict

__all__ = [
    "ChainStart",
    "carried_digest",
    "chain_start",
    "history_audit",
    "newest_tombstones_checkpoint",
    "tombstones_digest",
    "tombstones_problem",
]


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
    carried_digest: str,
    tombstones: int,
    tombstones_digest: str,
) -> JsonDict:
    """The ``compacted`` payload of a retention pass (``before_sequence`` and ``removed``
    as event compaction writes them, so the events' floor reads the same).

    Args:
        before_sequence: events with a smaller sequence were removed.
        removed_events: how many events were removed.
        audit_from: the first audit index removed.
        audit_through: the last audit index removed.
        audit_through_hash: the hash of entry ``audit_through``, which the chain left
            links to.
        requests_removed: how many requests became tombstones in this pass.
        carried: how many entries were appended again, right before the checkpoint.
        carried_digest: :func:`carried_digest` of those entries.
        tombstones: how many tombstones the ledger holds after the pass.
        tombstones_digest: :func:`tombstones_digest` of all of them.
    """
    return {
        "before_sequence": before_sequence,
        "removed": removed_events,
        "audit_from": audit_from,
        "audit_through": audit_through,
        "audit_through_hash": audit_through_hash,
        "requests_removed": requests_removed,
        "carried": carried,
        "carried_digest": carried_digest,
        "tombstones": tombstones,
        "tombstones_digest": tombstones_digest,
    }


def _digest(value: Any) -> str:
    text = canonical_json(value, max_depth=sys.maxsize, pointer="/checkpoint")
    return "sha256:" + hashlib.sha256(text).hexdigest()


def carried_digest(entries: Iterable[AuditEntry]) -> str:
    """The digest of carried entries, in order, by kind and payload (what carrying keeps;
    not an audit seal, which carrying makes anew for the entry's new time)."""
    return _digest(
        [
            {"kind": entry.kind, "payload": {k: v for k, v in entry.payload.items() if k != "seal"}}
            for entry in entries
        ]
    )


def tombstones_digest(request_ids: Iterable[str]) -> str:
    """The digest of a set of tombstones (the removed request ids, sorted)."""
    return _digest(sorted(set(request_ids)))


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


def tombstones_problem(newest: AuditEntry | None, tombstones: Iterable[str]) -> str | None:
    """Why the stored ``tombstones`` are not the ones the ``newest`` checkpoint that records
    tombstones vouches for, or None (None too when no checkpoint records them)."""
    if newest is None:
        return None
    ids = set(tombstones)
    if tombstones_digest(ids) == newest.payload.get("tombstones_digest"):
        return None
    count = newest.payload.get("tombstones")
    if isinstance(count, int) and len(ids) < count:
        return "a tombstone the newest compaction checkpoint records is missing"
    return "the tombstones differ from the ones the newest compaction checkpoint records"


def newest_tombstones_checkpoint(entries: Iterable[AuditEntry]) -> AuditEntry | None:
    """The newest ``compacted`` entry in ``entries`` that records the tombstones."""
    newest = None
    for entry in entries:
        recorded = entry.kind == "compacted" and "tombstones_digest" in entry.payload
        if recorded and (newest is None or entry.index > newest.index):
            newest = entry
    return newest

"""The audit hash chain: how each entry's hash is computed and how a stored chain is verified.

Every entry hashes its own content together with the previous entry's hash, so an
edited, deleted or reordered entry breaks the chain from that point on; the
separately recorded tip makes a truncated tail detectable too.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aais_langgraph.protocol import AAISValidationError, canonical_json

from .compaction import chain_start
from .records import AuditEntry

GENESIS_HASH = "sha256:" + "0" * 64
"""The ``prev_hash`` of the first entry (index 0)."""


def chain_hash(
    index: int,
    kind: str,
    occurred_at: str,
    payload: Mapping[str, Any],
    prev_hash: str,
    *,
    checked: bool = False,
) -> str:
    """``sha256:`` + hex SHA-256 of the RFC 8785 form of the entry's content plus ``prev_hash``.

    The content is ``{"index", "kind", "occurred_at", "payload"}``; a payload that is
    not I-JSON raises :class:`~aais_langgraph.protocol.AAISValidationError`.

    Args:
        index: the entry's place in the chain.
        kind: the entry's kind (``requested``, ``decided``, ...).
        occurred_at: its RFC 3339 time.
        payload: its I-JSON content.
        prev_hash: the previous entry's hash (the genesis hash for the first).
        checked: the payload is a plain copy checked as I-JSON just now (not walked
            again).
    """
    content = {"index": index, "kind": kind, "occurred_at": occurred_at, "payload": payload}
    digest = hashlib.sha256(canonical_json(content, pointer="/audit", checked=checked))
    digest.update(prev_hash.encode("utf-8"))
    return "sha256:" + digest.hexdigest()


@dataclass(frozen=True)
class AuditVerification:
    """The outcome of :func:`verify_audit`.

    ``checked`` counts the entries that verified before the first failure (all of
    them when ``ok``). ``table`` and ``row_id`` name the first row that does not
    match (``aais_audit`` and the entry index for the chain itself). ``tip`` is the
    chain's last ``(index, hash)``, to keep elsewhere and pass back as
    ``expected_tip``. ``reason`` never contains payload values.
    """

    ok: bool
    checked: int
    first_bad_index: int | None = None
    reason: str | None = None
    table: str | None = None
    row_id: str | None = None
    tip: tuple[int, str] | None = None
    compacted: tuple[int, int] | None = None
    """The range of entry indexes retention removed, which a ``compacted`` checkpoint
    entry vouches for (None: the chain starts at entry 0)."""


def verify_audit(
    entries: Iterable[AuditEntry],
    recorded_tip: tuple[int, str] | None,
    expected_tip: tuple[int, str] | None = None,
    *,
    sealed_checkpoints: bool = False,
) -> AuditVerification:
    """Recompute the chain from genesis or its checkpoint; check it ends at the recorded tip.

    ``entries`` must be the whole chain in order, starting at index 0, or right after
    the range the newest ``compacted`` checkpoint entry names, linked to the hash it
    records (:mod:`.compaction`). The last entry must equal ``recorded_tip`` (the
    ledger's separately stored tip), which
    detects a truncated tail. ``expected_tip`` is a tip the caller kept from an
    earlier moment (for example published elsewhere): the chain must still contain
    that exact entry, so a rewrite or truncation behind the caller's back fails even
    if the recorded tip was rewritten along with it. The chain may have grown since.
    An ``expected_tip`` at the compacted range's last entry checks against the hash the
    checkpoint records only with ``sealed_checkpoints`` (the caller verifies the
    checkpoint's seal with the authority key); otherwise anyone who can write the
    ledger could write a checkpoint that names the kept tip, so it reports
    "compacted away".

    Args:
        entries: the whole chain in order (or from right after its newest checkpoint).
        recorded_tip: the ledger's separately stored tip.
        expected_tip: a tip the caller kept from earlier, which the chain must still hold.
        sealed_checkpoints: the caller verified the checkpoints' seals with the authority key.
    """
    chain = entries if isinstance(entries, Sequence) else list(entries)
    start = chain_start(chain, GENESIS_HASH)
    prev_hash = start.prev_hash
    expected_index = start.index
    hash_at_expected_tip: str | None = None
    at_boundary = bool(
        expected_tip is not None and start.compacted and expected_tip[0] == start.compacted[1]
    )
    if at_boundary and sealed_checkpoints:
        hash_at_expected_tip = start.prev_hash
    for entry in chain:
        failure = _check_entry(entry, expected_index, prev_hash)
        if failure is not None:
            checked_so_far = expected_index - start.index
            return AuditVerification(False, checked_so_far, expected_index, failure)
        if expected_tip is not None and entry.index == expected_tip[0]:
            hash_at_expected_tip = entry.entry_hash
        prev_hash = entry.entry_hash
        expected_index += 1

    checked = expected_index - start.index
    last_index = expected_index - 1
    tip = (last_index, prev_hash) if checked else None
    tip_failure = _check_recorded_tip(last_index, prev_hash, recorded_tip)
    if tip_failure is not None:
        first_bad, reason = tip_failure
        return AuditVerification(False, checked, first_bad, reason, tip=tip)
    if expected_tip is not None:
        index, entry_hash = expected_tip
        if index > last_index:
            return AuditVerification(
                False,
                checked,
                last_index + 1,
                f"chain ends at entry {last_index} but the expected tip is entry {index}: "
                "entries were truncated",
                tip=tip,
            )
        removed = start.compacted is not None and 0 <= index < start.compacted[1]
        if removed or (at_boundary and not sealed_checkpoints):
            return AuditVerification(
                False,
                checked,
                index,
                f"entry {index} was compacted away: check against a newer tip",
                tip=tip,
                compacted=start.compacted,
            )
        if index >= 0 and hash_at_expected_tip != entry_hash:
            return AuditVerification(
                False,
                checked,
                index,
                f"entry {index} does not match the expected tip: the chain was rewritten",
                tip=tip,
                compacted=start.compacted,
            )
    return AuditVerification(True, checked, tip=tip, compacted=start.compacted)


def _check_entry(entry: AuditEntry, expected_index: int, prev_hash: str) -> str | None:
    """Why ``entry`` cannot be the chain's link at ``expected_index``, or None if it can."""
    if entry.index != expected_index:
        return (
            f"found entry {entry.index} where entry {expected_index} belongs: "
            "an entry is missing or out of order"
        )
    if entry.prev_hash != prev_hash:
        return f"entry {expected_index} does not link to the previous entry's hash"
    try:
        recomputed = chain_hash(
            entry.index, entry.kind, entry.occurred_at, entry.payload, entry.prev_hash
        )
    except AAISValidationError:
        return f"entry {expected_index} has a payload that is not I-JSON"
    if recomputed != entry.entry_hash:
        return f"entry {expected_index} does not match its hash: its content was changed"
    return None


def _check_recorded_tip(
    last_index: int, last_hash: str, recorded_tip: tuple[int, str] | None
) -> tuple[int, str] | None:
    """``(first_bad_index, reason)`` if the chain does not end at the recorded tip."""
    if recorded_tip is None:
        if last_index < 0:
            return None
        return 0, "the chain has entries but no recorded tip"
    tip_index, tip_hash = recorded_tip
    if tip_index > last_index:
        return (
            last_index + 1,
            f"chain ends at entry {last_index} but the recorded tip is entry {tip_index}: "
            "entries were truncated",
        )
    if tip_index < last_index:
        return (
            tip_index + 1,
            f"chain continues past the recorded tip (entry {tip_index}): "
            "entries were appended outside the ledger",
        )
    if tip_hash != last_hash:
        return tip_index, f"entry {tip_index} does not match the recorded tip"
    return None

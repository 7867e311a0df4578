"""Tamper evidence for stored rows: which audit entry vouches for a row, and MAC seals.

Every request, resolution, grant and execution row is written in the same
transaction as an audit entry whose payload is a function of the whole row (the
envelope and the context by digest; an execution record's latest change). A row
vouches for itself only if recomputing that payload from the row gives the entry's
payload (an execution record: its request's latest ``execution`` entry). Without a
key, someone who can write the database can rewrite a row *and* recompute the chain
after it; with an authority key, rows also carry an HMAC-SHA256 seal that cannot be
recomputed without the key; a ``compacted`` checkpoint carries its seal in its own
payload (``mac``), since the rows it vouches for are gone.

With a key every audit entry is sealed too (:func:`audit_seal`), in its payload under
:data:`AUDIT_SEAL`: the ledger's one append primitive adds it
(:func:`~._records.next_audit_entry`), so an entry someone appends or edits without the
key (a forged escalation, a forged ``follow_up``) does not verify. The seal covers the
entry's kind, time and payload, but not its place in the chain (a Postgres server
assigns that at commit, where the key is not) nor the two payload members the server
fills in then (``sequence``, ``envelope_digest``: the request and resolution rows'
own seals cover their envelopes). Reasons never contain row values, only what is wrong.
"""

from __future__ import annotations

import hashlib
import hmac
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from ..observability.signals import report_integrity_error
from ..protocol import AAISValidationError, canonical_json, check_ijson
from ..protocol.refusals import LEDGER_INTEGRITY, Refusal
from ._records import granted_audit, request_fields, requested_audit, resolved_audit
from .audit import chain_hash
from .executions import Execution, execution_audit
from .records import (
    AuditEntry,
    Grant,
    JsonDict,
    StoredRequest,
    StoredResolution,
    dump_json,
    load_json,
)

__all__ = [
    "AUDIT_SEAL",
    "LISTING_COLUMNS",
    "MAC_PREFIX",
    "NOT_FACTS",
    "UNVOUCHED_FACTS",
    "VOUCHED_TABLES",
    "LedgerIntegrityError",
    "audit_seal",
    "checkpoint_problem",
    "checkpoint_seal",
    "entry_seal_problem",
    "execution_seal",
    "execution_vouched",
    "grant_seal",
    "grant_vouched",
    "request_seal",
    "request_vouched",
    "resolution_seal",
    "resolution_vouched",
    "seal_problem",
    "sealed",
    "sealed_checkpoint",
    "sealed_payload",
    "thread_vouched",
    "unsealed_payload",
]

MAC_PREFIX = "hmac-sha256:"

AUDIT_SEAL = "seal"
"""The payload member that holds an audit entry's seal (with an authority key)."""

_STAMPED = frozenset({AUDIT_SEAL, "sequence", "envelope_digest"})
"""Payload members an audit entry's seal leaves out: the seal itself, and what a
Postgres server fills in at commit."""

#: Payload keys that entries written before schema version 2 do not carry.
_LEGACY_OPTIONAL = frozenset({"context_digest"})


# -- which tables hold facts a decision reads -------------------------------------------

VOUCHED_TABLES: Mapping[str, str] = {
    "aais_requests": "its ``requested`` audit entry, and its seal",
    "aais_resolutions": "its ``resolved`` audit entry, and its seal",
    "aais_grants": "its ``granted`` (and ``revoked``) audit entries, and its seal",
    "aais_executions": "its request's latest ``execution`` audit entry, and its seal",
    "aais_events": "the digest its audit entry records",
    "aais_audit": "the chain up to the recorded tip, and each entry's seal",
    "aais_compacted_requests": "the digest the newest compaction checkpoint records, sealed",
    "aais_threads": "the ``thread`` audit entry that names its owner",
    "aais_thread_posts": "the ``thread`` audit entry of each poster's first post",
}
"""Every table whose rows a gate, grant, access or listing decision reads, and what vouches
for them: written through the ledger's one sealed write (a row with its audit entry in
one transaction, :func:`~._records.next_audit_entry`), read through the authority's one
vouched read (:class:`~aais_langgraph.authority.vouch.VouchedRecords`), checked by
``audit verify``. A new table is one of these, or of :data:`NOT_FACTS` with its reason;
the tamper test of every fact (tests/ledger) fails on one that is neither."""

NOT_FACTS: Mapping[str, str] = {
    "aais_meta": "the counters: the sequence, and the recorded tip every vouched read checks",
    "aais_leases": "who drives a thread now: coordination, never a decision (verify flags "
    "a lease held implausibly long)",
    "aais_outbox": "work still to do; an escalation counts only by its sealed audit entry",
    "aais_delivery_cursors": "how far each webhook subscription has read the events",
}
"""Tables that hold no fact a decision reads, and why."""

UNVOUCHED_FACTS: Mapping[str, str] = {}
"""Facts a decision reads that the one sealed write does not cover (none): a table listed
here is named by the tamper test of every fact rather than passed by."""

LISTING_COLUMNS: frozenset[tuple[str, str]] = frozenset(
    {
        ("aais_grants", "ordinal"),
        ("aais_threads", "since"),
        ("aais_thread_posts", "posted_at"),
    }
)
"""Columns that only order or date a listing and are not vouched for: a grant's place,
when a thread started, which of its posters posted last (its vouched posters are who
its run may act for)."""


class LedgerIntegrityError(RuntimeError, Refusal):
    """A stored row is not vouched for by its audit entry (or its seal): refuse to act on it."""

    code = LEDGER_INTEGRITY
    pointer = ""

    def __init__(self, table: str, row_id: str, reason: str) -> None:
        super().__init__(f"ledger integrity: {table} {row_id}: {reason}")
        self.table = table
        self.row_id = row_id
        self.reason = reason
        report_integrity_error(table)  # counted where it is found (aais_integrity_errors)


# -- seals ---------------------------------------------------------------------------


def _without_sequence(envelope: Mapping[str, Any]) -> JsonDict:
    # The ledger assigns the sequence inside its transaction, after the seal is made.
    return {key: value for key, value in envelope.items() if key != "sequence"}


def _seal(key: bytes, kind: str, row: Mapping[str, Any]) -> str:
    document = {"aais-langgraph-seal": kind, "row": load_json(dump_json(row))}
    message = canonical_json(document, max_depth=sys.maxsize, pointer="/seal")
    return MAC_PREFIX + hmac.new(key, message, hashlib.sha256).hexdigest()


def request_seal(
    key: bytes, envelope: Mapping[str, Any], thread_id: str | None, context: Mapping[str, Any]
) -> str:
    """The seal of a request row: its envelope (sequence aside), thread and context.

    Args:
        key: the authority key.
        envelope: the stored envelope.
        thread_id: the row's thread.
        context: the row's context.
    """
    request = envelope.get("request")
    request_id = request.get("id") if isinstance(request, Mapping) else None
    row = {
        "request_id": request_id,
        "envelope": _without_sequence(envelope),
        "thread_id": thread_id,
        "context": dict(context),
    }
    return _seal(key, "request", row)


def resolution_seal(
    key: bytes, request_id: str, envelope: Mapping[str, Any], decision_fingerprint: str | None
) -> str:
    """The seal of a resolution row: its request, envelope (sequence aside) and fingerprint.

    Args:
        key: the authority key.
        request_id: the request resolved.
        envelope: the stored envelope.
        decision_fingerprint: the digest of the decision recorded (None: none).
    """
    row = {
        "request_id": request_id,
        "envelope": _without_sequence(envelope),
        "decision_fingerprint": decision_fingerprint,
    }
    return _seal(key, "resolution", row)


def grant_seal(key: bytes, grant: Grant) -> str:
    """The seal of a grant row: every column, ``revoked_at`` included (a revocation seals
    the row anew, so a revoked grant cannot be made live again without the key)."""
    return _seal(key, "grant", grant.to_json())


def execution_seal(key: bytes, record: Execution) -> str:
    """The seal of an execution record: every column but the seal itself."""
    return _seal(key, "execution", execution_audit(record))


def checkpoint_seal(key: bytes, payload: Mapping[str, Any]) -> str:
    """The seal of a ``compacted`` checkpoint: its whole payload but the seals themselves
    (its own, and the audit seal its entry carries)."""
    return _seal(
        key, "checkpoint", {k: v for k, v in payload.items() if k not in ("mac", AUDIT_SEAL)}
    )


def unsealed_payload(payload: Mapping[str, Any]) -> JsonDict:
    """``payload`` without its audit seal (what a row's recomputed payload is compared to)."""
    return {name: value for name, value in payload.items() if name != AUDIT_SEAL}


def audit_seal(key: bytes, kind: str, occurred_at: str, payload: Mapping[str, Any]) -> str:
    """The seal of an audit entry: its kind, its time and its payload (the members a
    server stamps at commit aside).

    Args:
        key: the authority key.
        kind: the entry's kind.
        occurred_at: its RFC 3339 time.
        payload: its payload (a seal it carries is left out).
    """
    row = {
        "kind": kind,
        "occurred_at": occurred_at,
        "payload": {name: value for name, value in payload.items() if name not in _STAMPED},
    }
    return _seal(key, "audit", row)


def sealed_payload(
    key: bytes | None, kind: str, occurred_at: str, payload: Mapping[str, Any]
) -> JsonDict:
    """``payload`` as the ledger appends it: any seal it carries dropped, and (with a
    key) sealed anew for ``kind`` at ``occurred_at``.

    Args:
        key: the authority key (None: the payload stays unsealed).
        kind: the entry's audit kind.
        occurred_at: the entry's time.
        payload: the entry's payload.
    """
    plain = unsealed_payload(payload)
    if key is None:
        return plain
    return {**plain, AUDIT_SEAL: audit_seal(key, kind, occurred_at, plain)}


def entry_seal_problem(key: bytes | None, entry: AuditEntry) -> str | None:
    """Why ``entry`` does not carry its seal under ``key``, or None (always None without a
    key). Words only: no payload value."""
    if key is None:
        return None
    found = entry.payload.get(AUDIT_SEAL)
    try:
        expected = audit_seal(key, entry.kind, entry.occurred_at, entry.payload)
    except (AAISValidationError, TypeError, ValueError):
        return "it cannot be sealed (not I-JSON)"
    return seal_problem(expected, found if isinstance(found, str) else None)


def checkpoint_problem(key: bytes | None, entry: AuditEntry) -> str | None:
    """Why the ``compacted`` entry does not carry its seals under ``key`` (its checkpoint
    seal and its audit seal), or None (always None without a key)."""
    if key is None:
        return None
    mac = entry.payload.get("mac")
    try:
        expected = checkpoint_seal(key, entry.payload)
    except (AAISValidationError, TypeError, ValueError):
        return "it cannot be sealed (not I-JSON)"
    return seal_problem(expected, mac if isinstance(mac, str) else None) or entry_seal_problem(
        key, entry
    )


def sealed_checkpoint(key: bytes | None, payload: JsonDict) -> JsonDict:
    """``payload`` carrying its seal under ``key`` (unchanged without a key)."""
    return payload if key is None else {**payload, "mac": checkpoint_seal(key, payload)}


def seal_problem(expected: str | None, mac: str | None) -> str | None:
    """Why ``mac`` is not the expected seal, or None (``expected`` None: no key, nothing to do)."""
    if expected is None:
        return None
    if mac is None:
        return "it carries no seal, but an authority key is configured"
    if not hmac.compare_digest(expected.encode("ascii"), mac.encode("utf-8", "replace")):
        return "its seal does not verify (the row changed, or another key sealed it)"
    return None


def sealed(key: bytes | None, table: str, row: Any) -> str | None:
    """The seal ``row`` should carry under ``key`` (None without a key); raises on bad rows."""
    if key is None:
        return None
    if table == "aais_requests":
        return request_seal(key, row.envelope, row.thread_id, row.context)
    if table == "aais_resolutions":
        return resolution_seal(key, row.request_id, row.envelope, row.decision_fingerprint)
    if table == "aais_executions":
        return execution_seal(key, row)
    return grant_seal(key, row)


# -- what an audit entry vouches for ------------------------------------------------


def _payload_problem(payload: Mapping[str, Any], recomputed: Mapping[str, Any]) -> str | None:
    payload = unsealed_payload(payload)
    for name, value in recomputed.items():
        if name in payload:
            if payload[name] != value:
                return f"it does not match its audit entry ({name} differs)"
        elif name not in _LEGACY_OPTIONAL:
            return f"its audit entry does not record {name}"
    extra = set(payload).difference(recomputed)
    if extra:
        return f"its audit entry records {sorted(extra)[0]}, which the row does not have"
    return None


def request_vouched(
    stored: StoredRequest, entry: AuditEntry | None, texts: tuple[str, str] | None = None
) -> str | None:
    """Why ``entry`` does not vouch for the request row, or None if it does.

    ``texts``: the envelope's and the context's JSON text as stored, which ``stored``
    was parsed from. A text whose SHA-256 is the digest the entry records is the RFC
    8785 form of the value the entry bound (a ledger stores it so), so that digest is
    not taken again; the value is still checked as I-JSON."""
    if entry is None:
        return "no audit entry vouches for it"
    if entry.kind != "requested":
        return "its audit entry is not a request's"
    try:
        request = stored.envelope["request"]
        if request["id"] != stored.request_id:
            return "its envelope is for another request"
        fields = request_fields(stored.envelope)
        if (fields.session_id, fields.expires_at) != (stored.session_id, stored.expires_at):
            return "its session or expiry columns differ from its envelope"
        digests: tuple[str | None, str | None] = (None, None)
        if texts is not None:
            recorded = entry.payload
            digests = (
                _text_digest(recorded.get("envelope_digest"), stored.envelope, texts[0]),
                _text_digest(recorded.get("context_digest"), stored.context, texts[1]),
            )
        recomputed = requested_audit(
            stored.envelope, stored.thread_id, stored.context, digests=digests
        )
    except (AAISValidationError, KeyError, TypeError, ValueError):
        return "it cannot be read as a request"
    return _payload_problem(entry.payload, recomputed)


def _text_digest(recorded: Any, value: JsonDict, text: str) -> str | None:
    """``recorded`` when it is the digest of ``text`` (whose parse is ``value``, an I-JSON
    value), else None: the digest is then taken of ``value``."""
    if not isinstance(recorded, str) or not recorded.startswith("sha256:"):
        return None
    try:
        found = "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()
    except UnicodeEncodeError:
        return None
    if not hmac.compare_digest(found, recorded):
        return None
    check_ijson(value)  # what the digest would have walked
    return recorded


def resolution_vouched(stored: StoredResolution, entry: AuditEntry | None) -> str | None:
    """Why ``entry`` does not vouch for the resolution row, or None if it does."""
    if entry is None:
        return "no audit entry vouches for it"
    if entry.kind != "resolved" or "sequence" not in entry.payload:
        return "its audit entry is not a recorded resolution's"
    try:
        if stored.envelope["resolution"]["request_id"] != stored.request_id:
            return "its envelope is for another request"
        recomputed = resolved_audit(stored.envelope, stored.decision_fingerprint)
    except (AAISValidationError, KeyError, TypeError, ValueError):
        return "it cannot be read as a resolution"
    return _payload_problem(entry.payload, recomputed)


def grant_vouched(grant: Grant, entry: AuditEntry | None) -> str | None:
    """Why ``entry`` does not vouch for the grant row (``revoked_at`` aside), or None."""
    if entry is None:
        return "no audit entry vouches for it"
    if entry.kind != "granted":
        return "its audit entry is not a grant's"
    try:
        recomputed = granted_audit(grant)
    except (AAISValidationError, KeyError, TypeError, ValueError):
        return "it cannot be read as a grant"
    return _payload_problem(entry.payload, recomputed)


def thread_vouched(
    thread_id: str,
    owner: str | None,
    posters: Iterable[str],
    entries: Iterable[AuditEntry],
    *,
    complete: bool = True,
) -> str | None:
    """Why the thread's ``thread`` audit ``entries`` do not vouch for its stored ``owner``
    (None: no thread row) and ``posters``, or None if they do: one entry names its owner,
    one each poster, and a thread the entries record has its row. ``complete``:
    ``posters`` is every poster stored (not only the latest few), so each poster an entry
    records must be among them.

    Args:
        thread_id: the thread.
        owner: its stored owner, or None (no thread row).
        posters: its stored posters.
        entries: the ``thread`` audit entries to vouch with.
        complete: whether ``posters`` is every poster stored.
    """
    owners: list[str] = []
    recorded: set[str] = set()
    for entry in entries:
        if entry.payload.get("thread_id") != thread_id:
            continue
        named_owner, poster = entry.payload.get("owner"), entry.payload.get("poster")
        if isinstance(named_owner, str):
            owners.append(named_owner)
        if isinstance(poster, str):
            recorded.add(poster)
    if owner is None:
        return "missing, though its audit entry records it" if owners or recorded else None
    if not owners:
        return "no audit entry records who started it"
    if owners != [owner]:
        return "its owner is not the one its audit entry records"
    listed = set(posters)
    if not listed <= recorded:
        return "a poster is not one its audit entries record"
    if complete and listed != recorded:
        return "a poster its audit entries record is missing"
    return None


def execution_vouched(record: Execution | None, entry: AuditEntry | None) -> str | None:
    """Why the request's latest ``execution`` audit entry does not vouch for its stored
    execution record (either may be absent), or None if it does (or neither exists)."""
    if record is None:
        if entry is None:
            return None
        return f"missing, though audit entry {entry.index} records it"
    if entry is None:
        return "no audit entry vouches for it"
    if entry.kind != "execution":
        return "its audit entry is not an execution record's"
    try:
        intact = entry.entry_hash == chain_hash(
            entry.index, entry.kind, entry.occurred_at, entry.payload, entry.prev_hash
        )
    except AAISValidationError:
        intact = False
    if not intact:
        return f"its audit entry {entry.index} does not match its hash"
    try:
        recomputed = execution_audit(record)
    except (TypeError, ValueError):
        return "it cannot be read as an execution record"
    return _payload_problem(entry.payload, recomputed)

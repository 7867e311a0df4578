"""Record-building shared by the ledger backends, so every backend stores and audits alike.

Envelopes are checked as I-JSON and copied to plain JSON data before anything is
stored; audit payloads carry ids, digests and sequences, never argument values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, get_args

from aais_langgraph.protocol import (
    AAISValidationError,
    check_ijson,
    format_timestamp,
    parse_timestamp,
    sha256_digest,
    utc_now,
)
from aais_langgraph.protocol.extensions import RESOLVED_BY_EXTENSION
from aais_langgraph.protocol.ijson import ijson_copy

from .audit import GENESIS_HASH, chain_hash
from .records import AuditEntry, AuditKind, Grant, JsonDict, ResolutionWrite

AUDIT_KINDS: frozenset[str] = frozenset(get_args(AuditKind))


def plain(value: Mapping[str, Any], pointer: str = "") -> JsonDict:
    """A detached plain-JSON copy of an I-JSON object; raises AAISValidationError otherwise."""
    copied = ijson_copy(value, pointer=pointer)
    assert isinstance(copied, dict)
    return copied


@dataclass(frozen=True)
class RequestFields:
    """The columns a ledger indexes a request by, read from its envelope."""

    request_id: str
    session_id: str
    expires_at: float | None


def request_fields(envelope: Mapping[str, Any]) -> RequestFields:
    """Read id, session and expiry (as epoch seconds) of an ``approval.requested`` envelope."""
    request = envelope.get("request")
    if not isinstance(request, Mapping):
        raise AAISValidationError("/request", "an approval.requested envelope needs a request")
    request_id = request.get("id")
    if not isinstance(request_id, str) or not request_id:
        raise AAISValidationError("/request/id", "a request needs a string id")
    origin = request.get("origin")
    session_id = origin.get("session_id") if isinstance(origin, Mapping) else None
    if not isinstance(session_id, str) or not session_id:
        raise AAISValidationError("/request/origin/session_id", "a request needs a session id")
    expires_text = request.get("expires_at")
    expires_at = None
    if expires_text is not None:
        expires_at = parse_timestamp(expires_text, "/request/expires_at").timestamp()
    return RequestFields(request_id, session_id, expires_at)


def with_sequence(envelope: Mapping[str, Any], sequence: int, pointer: str = "") -> JsonDict:
    """A plain copy of ``envelope`` carrying its ledger-assigned ``sequence``."""
    return plain({**envelope, "sequence": sequence}, pointer)


def check_write(write: ResolutionWrite) -> None:
    """Refuse a write whose envelopes or grant belong to another request."""
    resolution = write.resolved.get("resolution")
    if not isinstance(resolution, Mapping) or resolution.get("request_id") != write.request_id:
        raise AAISValidationError(
            "/resolution/request_id", "the resolution belongs to another request"
        )
    if write.decided is not None:
        decision = write.decided.get("decision")
        if not isinstance(decision, Mapping) or decision.get("request_id") != write.request_id:
            raise AAISValidationError(
                "/decision/request_id", "the decision belongs to another request"
            )
    if write.grant is not None:
        if write.grant.request_id != write.request_id:
            raise ValueError("grant: the grant belongs to another request")
        check_ijson(write.grant.constraints, pointer="/grant/constraints")


@dataclass(frozen=True)
class WriteDraft:
    """A resolution write checked and copied to plain JSON, before any sequence is assigned."""

    decided: JsonDict | None
    resolved: JsonDict
    grant: Grant | None


def draft_write(write: ResolutionWrite) -> WriteDraft:
    """Check ``write`` and copy its parts, so a backend can fail before changing anything."""
    check_write(write)
    return WriteDraft(
        decided=None if write.decided is None else with_sequence(write.decided, 0, "/decided"),
        resolved=with_sequence(write.resolved, 0, "/resolved"),
        grant=None if write.grant is None else plain_grant(write.grant),
    )


def plain_grant(grant: Grant) -> Grant:
    """The grant with a detached plain-JSON copy of its constraints."""
    return replace(grant, constraints=plain(grant.constraints, "/constraints"))


def grant_matches(
    grant: Grant, session_id: str | None, action_name: str | None, include_revoked: bool
) -> bool:
    """Whether ``list_grants`` returns ``grant`` for these filters.

    Args:
        grant: the stored grant.
        session_id: only grants of this session (persistent ones match any), or None.
        action_name: only grants for this action name, or None.
        include_revoked: whether revoked grants are returned too.
    """
    if not include_revoked and grant.revoked_at is not None:
        return False
    if action_name is not None and grant.action_name != action_name:
        return False
    return session_id is None or grant.scope == "persistent" or grant.session_id == session_id


# -- audit payloads: ids, digests and sequences only -------------------------------


def requested_audit(
    envelope: JsonDict,
    thread_id: str | None,
    context: JsonDict,
    *,
    checked: bool = False,
    digests: tuple[str | None, str | None] = (None, None),
) -> JsonDict:
    """The ``requested`` audit payload of a stored request: binds the whole row (the
    envelope and the context by digest). ``checked``: both are plain copies made by
    :func:`plain` just now (not walked again); as for the payloads below. ``digests``:
    the envelope's and the context's digests where the caller has them (taken of their
    RFC 8785 bytes), None where they are to be taken here.

    Args:
        envelope: the stored envelope (with its sequence).
        thread_id: the row's thread.
        context: the row's context.
        checked: both are plain copies checked as I-JSON just now.
        digests: the envelope's and the context's digests, where taken already.
    """
    request = envelope["request"]
    action = request.get("action")
    return {
        "request_id": request["id"],
        "event_id": envelope.get("id"),
        "sequence": envelope["sequence"],
        "session_id": request["origin"]["session_id"],
        "thread_id": thread_id,
        "action_name": action.get("name") if isinstance(action, Mapping) else None,
        "action_digest": request.get("action_digest"),
        "envelope_digest": digests[0] or sha256_digest(envelope, checked=checked),
        "context_digest": digests[1] or sha256_digest(context, checked=checked),
    }


def decided_audit(envelope: JsonDict, *, checked: bool = False) -> JsonDict:
    """The ``decided`` audit payload of a stored decision envelope."""
    decision = envelope["decision"]
    actor = decision.get("actor")
    return {
        "request_id": decision["request_id"],
        "decision_id": decision.get("id"),
        "event_id": envelope.get("id"),
        "sequence": envelope["sequence"],
        "decision": decision.get("decision"),
        "scope": decision.get("scope"),
        "actor_id": actor.get("id") if isinstance(actor, Mapping) else None,
        "action_digest": decision.get("action_digest"),
        "envelope_digest": sha256_digest(envelope, checked=checked),
    }


def resolved_audit(
    envelope: JsonDict, decision_fingerprint: str | None, *, checked: bool = False
) -> JsonDict:
    """The ``resolved`` audit payload of a stored resolution envelope (with the id of who
    resolved it, for a resolution made without a decision)."""
    resolution = envelope["resolution"]
    payload: JsonDict = {
        "request_id": resolution["request_id"],
        "resolution_id": resolution.get("id"),
        "decision_id": resolution.get("decision_id"),
        "event_id": envelope.get("id"),
        "sequence": envelope["sequence"],
        "outcome": resolution.get("outcome"),
        "effective_scope": resolution.get("effective_scope"),
        "action_digest": resolution.get("action_digest"),
        "decision_fingerprint": decision_fingerprint,
        "envelope_digest": sha256_digest(envelope, checked=checked),
    }
    resolved_by = (resolution.get("extensions") or {}).get(RESOLVED_BY_EXTENSION)
    if isinstance(resolved_by, Mapping):
        payload["actor_id"] = resolved_by.get("id")
    return payload


def granted_audit(grant: Grant) -> JsonDict:
    """The ``granted`` audit payload; constraints appear only as a digest."""
    return {
        "grant_id": grant.grant_id,
        "request_id": grant.request_id,
        "scope": grant.scope,
        "session_id": grant.session_id,
        "action_name": grant.action_name,
        "constraints_digest": sha256_digest(grant.constraints),
        "created_at": grant.created_at,
        "expires_at": grant.expires_at,
    }


def revoked_audit(
    grant: Grant, revoked_at: float, actor: Mapping[str, Any] | None = None
) -> JsonDict:
    """The ``revoked`` audit payload (with who revoked it, when the caller knows)."""
    payload: JsonDict = {
        "grant_id": grant.grant_id,
        "request_id": grant.request_id,
        "revoked_at": revoked_at,
    }
    if actor is not None:
        payload["actor"] = dict(actor)
    return payload


def thread_audit(
    thread_id: str, *, owner: str | None = None, poster: str | None = None
) -> JsonDict:
    """The ``thread`` audit payload of a thread fact: who started it (``owner``) or who
    first posted to it (``poster``); ``thread_id`` first, as the schema's index reads it."""
    payload: JsonDict = {"thread_id": thread_id}
    if owner is not None:
        payload["owner"] = owner
    if poster is not None:
        payload["poster"] = poster
    return payload


def compacted_audit(before_sequence: int, removed: int) -> JsonDict:
    """The ``compacted`` audit payload: events before ``before_sequence`` were dropped."""
    return {"before_sequence": before_sequence, "removed": removed}


def next_audit_entry(
    tip: tuple[int, str] | None,
    kind: str,
    payload: Mapping[str, Any],
    *,
    key: bytes | None = None,
) -> AuditEntry:
    """The entry that follows ``tip`` in the chain, stamped with the current time: the one
    way an entry is made, sealed with ``key`` (the authority key the ledger was handed;
    a seal ``payload`` carries is made anew, as a carried entry's must be).

    Args:
        tip: the chain's last ``(index, hash)``, or None for an empty chain.
        kind: the audit kind.
        payload: the entry's payload (ids, digests and sequences only).
        key: the authority key to seal with (None: unsealed).
    """
    from .integrity import sealed_payload  # integrity reads this module's payloads

    if kind not in AUDIT_KINDS:
        raise ValueError(f"kind: not an audit kind (one of {sorted(AUDIT_KINDS)})")
    index, prev_hash = (tip[0] + 1, tip[1]) if tip is not None else (0, GENESIS_HASH)
    occurred_at = format_timestamp(utc_now())
    stored_payload = sealed_payload(key, kind, occurred_at, plain(payload, "/payload"))
    entry_hash = chain_hash(index, kind, occurred_at, stored_payload, prev_hash, checked=True)
    return AuditEntry(index, kind, occurred_at, stored_payload, prev_hash, entry_hash)


def resolution_audits(
    decided: JsonDict | None,
    resolved: JsonDict,
    decision_fingerprint: str | None,
    grant: Grant | None,
) -> list[tuple[str, JsonDict]]:
    """The audit entries a winning resolution write appends, in order (the envelopes are
    a :class:`WriteDraft`'s plain copies, with their sequences).

    Args:
        decided: the ``approval.decided`` envelope, or None (a resolution without one).
        resolved: the ``approval.resolved`` envelope.
        decision_fingerprint: the decision's fingerprint the resolution records.
        grant: the grant the resolution creates, or None.
    """
    audits: list[tuple[str, JsonDict]] = []
    if decided is not None:
        audits.append(("decided", decided_audit(decided, checked=True)))
    audits.append(("resolved", resolved_audit(resolved, decision_fingerprint, checked=True)))
    if grant is not None:
        audits.append(("granted", granted_audit(grant)))
    return audits


def check_ttl(ttl: float) -> None:
    """A lease lifetime must be a positive, finite number of seconds."""
    if not 0 < ttl < float("inf"):
        raise ValueError("ttl: a lease needs a positive, finite lifetime in seconds")

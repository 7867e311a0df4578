"""The ledger's record types: what a ledger stores and hands back, apart from the contract.

Plain frozen values (requests, resolutions, grants, audit entries, thread records,
leases, the one consistent read of them all) shared by the contract (:mod:`.base`),
the backends and everything that reads a ledger; this module imports no backend and
no contract, so anything in the package may import it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from .executions import Execution

JsonDict = dict[str, Any]
AuditKind = Literal[
    "requested",
    "decided",
    "resolved",
    "granted",
    "revoked",
    "conflict",
    "compacted",
    "execution",
    "follow_up",
    "thread",
]


@dataclass(frozen=True)
class StoredRequest:
    """A request as the ledger holds it.

    ``envelope`` is the ``approval.requested`` envelope with its ledger-assigned
    ``sequence``. ``thread_id`` and ``context`` locate the paused run (for
    example the LangGraph interrupt id) so any process can resume it.
    ``audit_index`` names the ``requested`` audit entry that vouches for the row;
    ``mac`` is its seal under the authority key (None without a key).
    """

    request_id: str
    envelope: JsonDict
    session_id: str
    expires_at: float | None
    status: Literal["pending", "resolved"]
    thread_id: str | None = None
    context: JsonDict = field(default_factory=dict)
    audit_index: int | None = field(default=None, compare=False)
    mac: str | None = None


class PendingRow(NamedTuple):
    """A pending request row as stored, its JSON columns still text: a listing that has
    seen a row before (an equal row: the same content) need not parse or check it again.

    :meth:`parsed` is the :class:`StoredRequest` the row holds.
    """

    request_id: str
    envelope_text: str
    session_id: str
    expires_at: float | None
    thread_id: str | None
    context_text: str
    audit_index: int | None
    mac: str | None

    def parsed(self) -> StoredRequest:
        """The stored request this row holds (raises ``ValueError`` on malformed JSON)."""
        envelope, context = json.loads(self.envelope_text), json.loads(self.context_text)
        if not isinstance(envelope, dict) or not isinstance(context, dict):
            raise ValueError("ledger row holds JSON that is not an object")
        return StoredRequest(
            request_id=self.request_id,
            envelope=envelope,
            session_id=self.session_id,
            expires_at=self.expires_at,
            status="pending",
            thread_id=self.thread_id,
            context=context,
            audit_index=self.audit_index,
            mac=self.mac,
        )

    @classmethod
    def of(cls, stored: StoredRequest) -> PendingRow:
        """The row of a stored request (for backends that keep parsed values)."""
        return cls(
            request_id=stored.request_id,
            envelope_text=dump_json(stored.envelope),
            session_id=stored.session_id,
            expires_at=stored.expires_at,
            thread_id=stored.thread_id,
            context_text=dump_json(stored.context),
            audit_index=stored.audit_index,
            mac=stored.mac,
        )


@dataclass(frozen=True)
class StoredResolution:
    """The one recorded resolution of a request and the fingerprint of its decision.

    ``decision_fingerprint`` is None for resolutions made without a decision
    (cancel, expiry sweep); an identical replay is recognised by it.
    ``audit_index`` names the audit entry that vouches for the row and ``mac``
    is its seal under the authority key (None without a key).
    """

    request_id: str
    envelope: JsonDict
    decision_fingerprint: str | None
    audit_index: int | None = field(default=None, compare=False)
    mac: str | None = None


@dataclass(frozen=True)
class Grant:
    """A standing approval recorded from an approved ``session``/``persistent`` choice.

    ``audit_index`` names the ``granted`` audit entry that vouches for it and
    ``mac`` is its seal under the authority key; neither is part of :meth:`to_json`.
    """

    grant_id: str
    request_id: str
    scope: Literal["session", "persistent"]
    session_id: str
    action_name: str
    constraints: JsonDict
    created_at: float
    expires_at: float | None = None
    revoked_at: float | None = None
    audit_index: int | None = field(default=None, compare=False)
    mac: str | None = None

    def to_json(self) -> JsonDict:
        """A JSON-ready dict of the grant."""
        return {
            "grant_id": self.grant_id,
            "request_id": self.request_id,
            "scope": self.scope,
            "session_id": self.session_id,
            "action_name": self.action_name,
            "constraints": self.constraints,
            "created_at": self.created_at,
            "expires_at": self.expires_at,
            "revoked_at": self.revoked_at,
        }


@dataclass(frozen=True)
class AuditEntry:
    """One link of the append-only audit chain.

    ``entry_hash`` = SHA-256 over the RFC 8785 form of ``{index, kind,
    occurred_at, payload}`` followed by ``prev_hash`` (see :mod:`.audit`).
    """

    index: int
    kind: str
    occurred_at: str
    payload: JsonDict
    prev_hash: str
    entry_hash: str


@dataclass(frozen=True)
class ResolutionWrite:
    """Everything recorded together when a request resolves.

    ``resolved`` and ``decided`` are envelopes whose ``sequence`` the ledger
    assigns. ``grant`` is recorded only if this write wins. ``mac`` seals the
    resolution row under the authority key (the grant carries its own).

    Unless ``in_run`` (the run paused on the request records the answer itself and
    goes on with it), a winning write for a request of a thread also records its
    durable resume work (:mod:`.resume_work`) in the same transaction.
    """

    request_id: str
    resolved: JsonDict
    decided: JsonDict | None = None
    decision_fingerprint: str | None = None
    grant: Grant | None = None
    mac: str | None = None
    in_run: bool = False


@dataclass(frozen=True)
class LedgerContents:
    """Every stored row and the audit chain, read in one consistent snapshot.

    What ``audit verify`` cross-checks; ``events`` are ``(sequence, envelope)``.
    """

    requests: list[StoredRequest]
    resolutions: list[StoredResolution]
    grants: list[Grant]
    events: list[tuple[int, JsonDict]]
    audit: list[AuditEntry]
    audit_tip: tuple[int, str] | None
    last_sequence: int
    request_sequences: dict[str, int] = field(default_factory=dict)
    """Each request row's own ``sequence`` column (the order listings follow), where the
    backend stores one apart from the envelope."""
    executions: list[Execution] = field(default_factory=list)
    """Every execution record (the runtime's; each vouched for by its latest entry)."""
    tombstones: frozenset[str] = frozenset()
    threads: dict[str, str] = field(default_factory=dict)
    """Each thread's owner, by thread id."""
    thread_posters: dict[str, frozenset[str]] = field(default_factory=dict)
    """Everyone who posted to each thread, by thread id."""
    """The ids of requests retention removed (vouched for by the newest checkpoint)."""


THREAD_POSTERS = 50
"""The most recent posters a :class:`ThreadRecord` lists (older ones are forgotten there)."""


@dataclass(frozen=True)
class ThreadRecord:
    """Who started a thread and who posted to it (each post's author: who its run acts for)."""

    thread_id: str
    owner: str
    """Who started the thread (its first post)."""
    posters: tuple[str, ...] = ()
    """Everyone who posted to it, the latest first (the owner too, once they posted)."""

    @property
    def sender(self) -> str:
        """The author of the latest post: who the thread's current run acts for."""
        return self.posters[0] if self.posters else self.owner

    @property
    def participants(self) -> frozenset[str]:
        """Who started the thread or posted to it."""
        return frozenset((self.owner, *self.posters))


@dataclass(frozen=True)
class Lease:
    """A thread's run lease: who holds it and until when (epoch seconds)."""

    thread_id: str
    holder: str
    expires_at: float


def dump_json(value: Any) -> str:
    """Compact JSON text as every backend stores it (UTF-8, no NaN)."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def load_json(text: str) -> Any:
    """Read JSON text written by :func:`dump_json`."""
    return json.loads(text)

"""The authority's configuration and what it reads: screening, grants, snapshots, events, audit.

:class:`AuthorityReads` is the base of :class:`~.state_machine.AuthorityStateMachine`,
which adds the writes (requests, decisions, closing); every stored row read here
goes through the vouched records, so nothing acts on a row the audit does not vouch for.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any, Literal

from ..ledger import (
    AuditVerification,
    Grant,
    InMemoryLedger,
    Ledger,
    StoredRequest,
)
from ..protocol import (
    AAISValidationError,
    Action,
    Actor,
    ApprovalRequested,
    ApprovalSnapshot,
    Origin,
    Request,
    format_timestamp,
    utc_now,
)
from .cache import request_cache
from .grants import find_grant
from .judgement import effective_expiry
from .keys import resolve_key
from .policy import ApprovalPolicy, AskEveryTime
from .resolutions import DEFAULT_STREAM, snapshot_of
from .standing import EventPage, Screening, standing_resolution
from .vouch import VouchedRecords

Clock = Callable[[], datetime]


class AuthorityReads:
    """Configuration, screening and the read side of the authority (see the module docstring).

    ``key`` is the authority key (bytes, or text as UTF-8; default: the one
    ``AAIS_AUTHORITY_KEY_FILE`` or ``AAIS_AUTHORITY_KEY`` configures, if any).
    With a key, every recorded request, resolution and grant carries an
    HMAC-SHA256 seal, and rows without a valid seal are refused. Every stored
    row is read back only if its audit entry vouches for it: otherwise
    :class:`~aais_langgraph.ledger.LedgerIntegrityError` is raised and nothing acts on it.
    """

    def __init__(
        self,
        ledger: Ledger | None = None,
        *,
        clock: Clock = utc_now,
        policy: ApprovalPolicy | None = None,
        default_expiry: timedelta = timedelta(minutes=15),
        harness: str = "aais-langgraph",
        key: bytes | str | None = None,
        stream: str = DEFAULT_STREAM,
    ) -> None:
        if default_expiry <= timedelta(0):
            raise ValueError("default_expiry: must be positive")
        if not isinstance(stream, str) or not stream or len(stream) > 200:
            raise ValueError("stream: must be a non-empty AAIS id of at most 200 characters")
        # SPEC §3: durable bindings MUST provide `stream`. One ledger is one producer stream
        # (one sequence space), so every replica on it uses the same identifier.
        self.stream = stream
        self.ledger: Ledger = ledger if ledger is not None else InMemoryLedger()
        self.clock = clock
        self.policy: ApprovalPolicy = policy if policy is not None else AskEveryTime()
        self.default_expiry = default_expiry
        self.harness = harness
        # Presentation only (snapshot); every other read goes through the vouched records.
        self._requests = request_cache()
        self._records = VouchedRecords(self.ledger, resolve_key(key))

    def expiry_of(self, request: Request | StoredRequest) -> datetime:
        """When ``request`` expires: its ``expires_at``, else ``created_at`` + default_expiry."""
        return effective_expiry(request, self.default_expiry.total_seconds())

    # -- screening ------------------------------------------------------------------

    def screen(
        self, action: Action | Mapping[str, Any], *, origin: Origin | Mapping[str, Any]
    ) -> Screening:
        """Ask the policy, then the grants, whether ``action`` needs a human at all."""
        action_model = Action.from_data(action, pointer="/action")
        origin_model = Origin.from_data(origin, pointer="/origin")
        verdict = self.policy.on_request(action_model, origin_model)
        if verdict.verdict in ("allow", "deny"):
            outcome: Literal["approved", "denied"] = (
                "approved" if verdict.verdict == "allow" else "denied"
            )
            reason = verdict.reason or (
                "Allowed by policy." if outcome == "approved" else "Denied by policy."
            )
            resolved = standing_resolution(
                self, action_model, outcome=outcome, message=reason, grant=None
            )
            return Screening(resolved, verdict)
        grant = self.match_grant(action_model, origin_model)
        if grant is not None:
            resolved = standing_resolution(
                self,
                action_model,
                outcome="approved",
                message="Approved by a standing grant.",
                grant=grant,
            )
            return Screening(resolved, verdict)
        return Screening(None, verdict)

    # -- grants ----------------------------------------------------------------------

    def match_grant(
        self,
        action: Action | Mapping[str, Any],
        origin: Origin | Mapping[str, Any],
        *,
        now: datetime | None = None,
    ) -> Grant | None:
        """A live grant covering ``action`` in ``origin``'s session, if any."""
        return find_grant(
            self.ledger,
            Action.from_data(action, pointer="/action"),
            Origin.from_data(origin, pointer="/origin"),
            now=now if now is not None else self.clock(),
            vouch=self._records.grant,
        )

    def list_grants(
        self, *, session_id: str | None = None, include_revoked: bool = False
    ) -> list[Grant]:
        """Recorded grants, optionally those usable in one session (each one vouched for)."""
        grants = self.ledger.list_grants(session_id=session_id, include_revoked=include_revoked)
        return [self._records.grant(grant) for grant in grants]

    def revoke_grant(
        self, grant_id: str, *, actor: Actor | Mapping[str, Any] | None = None
    ) -> bool:
        """Revoke a grant; later actions ask again. False if unknown or already revoked.

        ``actor`` (who the authenticated channel says revoked it) is named in the audit entry.
        """
        who = None if actor is None else Actor.from_data(actor, pointer="/actor").to_json()
        return self.ledger.revoke_grant(grant_id, now=self.clock().timestamp(), actor=who)

    # -- presenters ------------------------------------------------------------------

    def snapshot(
        self, *, session_id: str | None = None, stream: str | None = None
    ) -> ApprovalSnapshot:
        """``approval.snapshot`` of pending, unexpired requests."""
        as_of = self.ledger.last_sequence()
        now = self.clock()
        pending = []
        for stored in self.ledger.list_pending(session_id=session_id):
            request = self._requests.load(stored.envelope).request
            if now < self.expiry_of(request):
                pending.append(request)
        return snapshot_of(
            pending,
            as_of=as_of,
            now=now,
            stream=stream if stream is not None else self.stream,
            unknown_executions=self.unknown_executions(session_id=session_id),
        )

    def vouched_request(self, stored: StoredRequest) -> ApprovalRequested:
        """The validated envelope of a stored request row its audit entry (and seal) vouches
        for; raises :class:`~aais_langgraph.ledger.LedgerIntegrityError` otherwise. Checked
        once per process per row (then cached), like every read of the gate."""
        return self._records.request(stored)[1]

    def unknown_executions(self, *, session_id: str | None = None) -> list[dict[str, Any]]:
        """Approved requests whose execution outcome is unknown (the runtime's records),
        each ``{request_id, thread_id, action_digest, name, summary, since}``."""
        found: list[dict[str, Any]] = []
        for record in self.ledger.list_executions(states=("unknown",)):
            stored = self.ledger.get_request(record.request_id)
            if stored is None or session_id not in (None, stored.session_id):
                continue
            request = self._requests.load(stored.envelope).request
            since = datetime.fromtimestamp(record.updated_at, timezone.utc)
            found.append(
                {
                    "request_id": record.request_id,
                    "thread_id": record.thread_id,
                    "action_digest": request.action_digest,
                    "name": request.action.name,
                    "summary": request.action.summary,
                    "since": format_timestamp(since),
                }
            )
        return found

    def events_after(self, sequence: int, *, limit: int = 1000) -> EventPage:
        """Stored events after ``sequence``; ``gap`` when history before them was compacted."""
        if isinstance(sequence, bool) or not isinstance(sequence, int) or sequence < 0:
            raise AAISValidationError("/sequence", "must be a non-negative integer")
        last = self.ledger.last_sequence()
        first = self.ledger.first_event_sequence()
        events = self.ledger.events_after(sequence, limit=limit)
        # Sequences are contiguous, so anything missing before the oldest stored event
        # was compacted; with nothing stored, everything up to ``last`` was.
        oldest = first if first is not None else last + 1
        gap = sequence < last and oldest > sequence + 1
        return EventPage(events=events, gap=gap, last_sequence=self.ledger.last_sequence())

    def verify_audit(self, *, expected_tip: tuple[int, str] | None = None) -> AuditVerification:
        """Re-check the audit chain, then every stored row against the entry that vouches for
        it (and its seal, with a key); names the first bad entry or row and detects
        truncation, and a rollback or emptying against ``expected_tip``."""
        return self._records.verify_all(expected_tip=expected_tip)

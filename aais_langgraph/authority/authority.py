"""The approval authority: requests, decisions, grants and the audit chain, in one class.

:class:`ApprovalAuthority` implements the AAIS state machine over a
:class:`~aais_langgraph.ledger.Ledger`: requests are stored before anyone can see
them, the first valid resolution wins atomically, replays are recognised, and
approvals come only from offered choices, before expiry, for the exact action
digest (the judgement is :func:`~.judgement.judge`). Every stored row read back
goes through the vouched records, so nothing acts on a row the audit does not
vouch for. Who may do what is asked of its access object
(:class:`~.access.Access`). Each method has an ``a``-prefixed async twin that runs
it in a worker thread (the ledger call inside is blocking I/O).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any, Literal

from ..ledger import (
    AuditVerification,
    Execution,
    Grant,
    InMemoryLedger,
    Ledger,
    LedgerIntegrityError,
    PendingRow,
    ResolutionWrite,
    StoredRequest,
    ThreadRecord,
)
from ..ledger.executions import ExecutionChange, unknown_outcomes
from ..ledger.selection import PendingSelection
from ..observability.signals import report_decision
from ..observability.traces import DECIDE_SPAN, REQUEST_SPAN, requested_attributes, traced
from ..protocol import (
    AAISValidationError,
    Action,
    Actor,
    ApprovalDecided,
    ApprovalRequested,
    ApprovalResolved,
    ApprovalSnapshot,
    Choice,
    Decision,
    Origin,
    Request,
    Risk,
    build_request,
    format_timestamp,
    new_id,
    parse_envelope,
    sha256_digest,
    utc_now,
)
from ..protocol.extensions import (
    NOTE_EXTENSION,
    REPLY_EXTENSION,
    REQUESTER_EXTENSION,
    RESOLVED_BY_EXTENSION,
)
from ..protocol.notes import decision_note
from .access import Access
from .authorization import (
    AllowAuthenticated,
    Authorizer,
    Permission,
    Principal,
    Resource,
    Verb,
    as_principal,
    checked_principal,
    requester_of,
)
from .cache import request_cache
from .constraints import never_applies
from .errors import UnknownRequestError
from .grants import find_grant, grant_from_decision
from .judgement import MESSAGES, Judgement, effective_expiry, judge
from .keys import resolve_key
from .limits import Bounds, RequestLimitError, RequestLimits, checked_requester
from .policy import ApprovalPolicy, AskEveryTime
from .resolutions import (
    DEFAULT_STREAM,
    check_size,
    conflict_envelope,
    rejection_audit,
    resolution_audit,
    resolution_envelope,
    snapshot_of,
)
from .screening import EventPage, Screening, standing_resolution
from .thread_access import ThreadAccess
from .vouch import VouchedRecords

Clock = Callable[[], datetime]

EXPIRY: dict[str, str] = {
    "id": "aais-langgraph.expiry",
    "type": "policy",
    "display_name": "The authority's clock (expired)",
}
"""Who resolves a request ``expired`` when no one asked: the authority's clock."""

SUPERSEDED: dict[str, str] = {
    "id": "aais-langgraph.superseded",
    "type": "policy",
    "display_name": "The run moved on",
}
"""Who resolves ``stale`` a request whose paused run moved on."""

RUN_MOVED_ON: dict[str, str] = {
    "id": "aais-langgraph.run_moved_on",
    "type": "policy",
    "display_name": "The run moved on without it (forked or regenerated)",
}
"""Who cancels a pending request its thread no longer waits on (SPEC §11)."""


def _refuse_dead_choices(request: Request) -> None:
    """A standing choice whose constraints can never apply (unknown or malformed, by the
    matcher's rules) would be approved, recorded and never cover anything: refuse it."""
    for index, choice in enumerate(request.choices):
        constraints = choice.scope_constraints
        if choice.scope == "once" or not constraints:
            continue
        key = never_applies(constraints)
        if key is not None:
            raise AAISValidationError(
                f"/request/choices/{index}/scope_constraints/{key}",
                "this constraint can never apply (unknown or malformed), "
                "so a grant of this choice would cover nothing",
            )


def _actor_type(actor: Principal | Actor | Mapping[str, Any]) -> Any:
    if isinstance(actor, Principal):
        return actor.actor.type
    return actor.type if isinstance(actor, Actor) else actor.get("type")


ON_BEHALF_OF_THE_RUN: dict[str, str] = {
    "id": "aais-langgraph.runtime",
    "type": "policy",
    "display_name": "The runtime, on behalf of the run",
}
"""Who cancels when no authenticated actor is named (a run's own housekeeping)."""


def _requester_of(context: Mapping[str, Any] | None) -> str | None:
    """The ``requester`` a request's context names (the person its run acts for)."""
    return checked_requester((context or {}).get("requester"), "context.requester")


class ApprovalAuthority:
    """Records requests, judges decisions, keeps grants and the audit chain.

    ``actor`` passed to :meth:`decide` is what the authenticated channel says. It
    *replaces* the actor in the decision body, so a presenter cannot claim to be
    someone else; with ``actor=None`` (trusted in-process callers) the body's actor
    is recorded as given. Every method has an ``a``-prefixed async twin (the
    authorization questions have theirs on :attr:`access`).

    ``key`` is the authority key (bytes, or text as UTF-8; default: the one
    ``AAIS_AUTHORITY_KEY_FILE`` or ``AAIS_AUTHORITY_KEY`` configures, if any).
    With a key, every recorded request, resolution and grant carries an
    HMAC-SHA256 seal, and rows without a valid seal are refused. Every stored
    row is read back only if its audit entry vouches for it: otherwise
    :class:`~aais_langgraph.ledger.LedgerIntegrityError` is raised and nothing acts on it.

    ``authorizer`` decides who may view, decide, cancel, revoke and reconcile what
    (default :class:`~.authorization.AllowAuthenticated`): every call that names a
    human actor (or a :class:`~.authorization.Principal` with groups) is checked, and a
    refusal raises :class:`~.authorization.ForbiddenError` with nothing recorded.
    Calls without an actor are trusted in-process code. Every such question is asked
    of :attr:`access` (:class:`~.access.Access`, with async twins), which holds the
    authorizer; the state machine here only calls it.

    ``limits`` bounds what one session or requester may keep pending and how fast a
    requester may ask (default :class:`RequestLimits`; ``RequestLimits.unbounded()``
    for none): a request over a bound raises :class:`RequestLimitError` and nothing
    is stored.

    Args:
        ledger: the durable state (default: a new
            :class:`~aais_langgraph.ledger.InMemoryLedger`).
        clock: the authority's clock: expiry, decided and resolved times.
        policy: asked about every request and every decision that passed the checks (default:
            :class:`AskEveryTime`).
        default_expiry: how long a request without ``expires_in`` stays answerable (positive).
        harness: the ``origin.harness`` of the requests this authority builds.
        key: the authority key that seals rows (default: the configured one, if any).
        stream: the AAIS ``stream`` id of this ledger's events (SPEC §3).
        limits: bounds on pending and per-minute requests (default: :class:`RequestLimits`).
        authorizer: who may view, decide, cancel, revoke and reconcile what (default:
            :class:`~.authorization.AllowAuthenticated`).
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
        limits: RequestLimits | None = None,
        authorizer: Authorizer | None = None,
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
        self._key = resolve_key(key)  # the one place the key is resolved
        self.ledger.authority_key = self._key  # its audit entries are sealed with it
        self._records = VouchedRecords(self.ledger, self._key)
        self.bounds = Bounds(limits if limits is not None else RequestLimits(), self.ledger)
        self.access = Access(
            self.ledger,
            self._records,
            authorizer if authorizer is not None else AllowAuthenticated(),
            clock=lambda: self.clock().timestamp(),
        )

    @property
    def key(self) -> bytes | None:
        """The authority key (given here or configured in the environment, resolved once
        when the authority was made), or None: what every job and command that seals or
        verifies this ledger uses (retention, the witness, ``compact``, ``verify``)."""
        return self._key

    def refuse_history(self, reason: str) -> None:
        """Refuse every stored row from now on, with
        :class:`~aais_langgraph.ledger.LedgerIntegrityError` (``reason``: words, no value):
        what a served process does when a witness contradicts the ledger's history, so
        no gate, grant or resume acts on it until an operator looks."""
        self._records.refuse_history(reason)

    def expiry_of(self, request: Request | StoredRequest) -> datetime:
        """When ``request`` expires: its ``expires_at``, else ``created_at`` + default_expiry."""
        return effective_expiry(request, self.default_expiry.total_seconds())

    # -- authorization: the access object's questions ------------------------------------

    @property
    def authorizer(self) -> Authorizer:
        """Who decides who may do what (the access object's authorizer; replaceable)."""
        return self.access.authorizer

    @authorizer.setter
    def authorizer(self, authorizer: Authorizer) -> None:
        self.access.authorizer = authorizer

    def resource_of(
        self, stored: StoredRequest, request: Request, *, decision: str | None = None
    ) -> Resource:
        """:meth:`Access.resource_of <.access.Access.resource_of>`."""
        return self.access.resource_of(stored, request, decision=decision)

    def request_resource(self, request: Request, *, decision: str | None = None) -> Resource:
        """:meth:`Access.request_resource <.access.Access.request_resource>`."""
        return self.access.request_resource(request, decision=decision)

    def quorum_of(self, kind: str, name: str, risk: str) -> int:
        """:meth:`Access.quorum <.access.Access.quorum>`: distinct approvals needed."""
        return self.access.quorum(kind, name, risk)

    def permits(self, principal: Principal, verb: Verb, resource: Resource) -> Permission:
        """:meth:`Access.permits <.access.Access.permits>`."""
        return self.access.permits(principal, verb, resource)

    def view_selection(self, principal: Principal | None) -> PendingSelection | None:
        """:meth:`Access.view_selection <.access.Access.view_selection>`."""
        return self.access.view_selection(principal)

    def may_view(self, principal: Principal | None, request_id: str) -> bool:
        """:meth:`Access.may_view <.access.Access.may_view>`."""
        return self.access.may_view(principal, request_id)

    def require(
        self,
        actor: Principal | Actor | Mapping[str, Any] | None,
        verb: Verb,
        request_id: str,
        *,
        decision: str | None = None,
        stored: StoredRequest | None = None,
    ) -> None:
        """:meth:`Access.require <.access.Access.require>`.

        Args:
            actor: who asks: a principal, an AAIS actor or its data (None: trusted in-process
                code).
            verb: what they ask to do (``decide``, ``cancel``, ...).
            request_id: the stored request it is asked about.
            decision: the decision kind asked about, for a ``decide``.
            stored: the request's row, already read by the caller (not read again).
        """
        self.access.require(actor, verb, request_id, decision=decision, stored=stored)

    def thread_access(self, principal: Principal | None, thread_id: str) -> ThreadAccess:
        """:meth:`Access.thread_access <.access.Access.thread_access>`."""
        return self.access.thread_access(principal, thread_id)

    def post_to_thread(
        self, principal: Principal | None, thread_id: str, *, exists: bool, record: bool = True
    ) -> ThreadRecord | None:
        """:meth:`Access.post_to_thread <.access.Access.post_to_thread>`.

        Args:
            principal: who starts or posts (None: a trusted caller, checked about nothing).
            thread_id: the thread.
            exists: whether the graph holds a checkpoint of the thread.
            record: record the post (False: a run that brings no new message).
        """
        return self.access.post_to_thread(principal, thread_id, exists=exists, record=record)

    def decided_by(self, resolved: ApprovalResolved) -> str | None:
        """The id of the actor whose decision ``resolved`` records (None: no decision, or
        its event was compacted away)."""
        resolution = resolved.resolution
        if resolution.decision_id is None or resolved.sequence < 2:
            return None
        for event in self.ledger.events_after(resolved.sequence - 2, limit=1):
            decision = event.get("decision")
            if (
                event.get("type") == "approval.decided"
                and isinstance(decision, dict)
                and decision.get("id") == resolution.decision_id
                and decision.get("request_id") == resolution.request_id
            ):
                actor = decision.get("actor")
                found = actor.get("id") if isinstance(actor, dict) else None
                return found if isinstance(found, str) else None
        return None

    # -- screening ------------------------------------------------------------------

    def screen(
        self,
        action: Action | Mapping[str, Any],
        *,
        origin: Origin | Mapping[str, Any],
        requester: str | None = None,
    ) -> Screening:
        """Ask the policy, then the grants, whether ``action`` needs a human at all
        (``requester``: who the run acts for; a grant covers only their runs)."""
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
        grant = self.match_grant(action_model, origin_model, requester=requester)
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
        requester: str | None = None,
    ) -> Grant | None:
        """A live grant covering ``action`` in ``origin``'s session for a run acting for
        ``requester``, if any: a grant made for one person's request covers only runs
        acting for that person (a run sent by someone else asks again).

        Args:
            action: the action about to run.
            origin: where it runs (its session scopes the grant).
            now: the moment to check liveness at (default: the authority's clock).
            requester: whom the run acts for (a grant covers only that person's runs).
        """
        return find_grant(
            self.ledger,
            Action.from_data(action, pointer="/action"),
            Origin.from_data(origin, pointer="/origin"),
            now=now if now is not None else self.clock(),
            vouch=self._records.grant,
            granted_for=self._granted_for,
            requester=requester,
        )

    def _granted_for(self, grant: Grant) -> str | None:
        """Who the request that made ``grant`` acted for (None: nobody named). Whom a
        request acts for never changes, so its row is not read again when this process
        wrote or vouched for it."""
        stored = self.get_stored_request(grant.request_id, status=False)
        if stored is None:
            return None
        resource = self.access.stored_resource(grant.request_id, stored=stored)
        return None if resource is None else resource.requester

    def list_grants(
        self, *, session_id: str | None = None, include_revoked: bool = False
    ) -> list[Grant]:
        """Recorded grants, optionally those usable in one session (each one vouched for)."""
        grants = self.ledger.list_grants(session_id=session_id, include_revoked=include_revoked)
        return [self._records.grant(grant) for grant in grants]

    def revoke_grant(
        self, grant_id: str, *, actor: Principal | Actor | Mapping[str, Any] | None = None
    ) -> bool:
        """Revoke a grant; later actions ask again. False if unknown or already revoked.

        ``actor`` (who the authenticated channel says revoked it) is named in the audit
        entry, and must be allowed to ``revoke`` it (:class:`ForbiddenError` otherwise).
        For a checked actor, an unknown grant and one they may not even view raise the
        same :class:`ForbiddenError` (:data:`~.access.GRANT_NOT_REVOCABLE`): the answer does not
        tell whether such a grant exists.
        """
        self.access.require_revoke(actor, grant_id)
        who = None if actor is None else as_principal(actor).actor.to_json()
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

    def vouched_requests(
        self, stored: Sequence[StoredRequest | PendingRow]
    ) -> list[ApprovalRequested | Exception]:
        """:meth:`vouched_request` of many rows at once, each answered with its validated
        envelope or the error it would raise (:class:`~aais_langgraph.ledger.LedgerIntegrityError`,
        :class:`~aais_langgraph.protocol.AAISValidationError`, or ``ValueError``/``TypeError``
        for a row that cannot be read); the rows' audit entries are read together. A
        :class:`~aais_langgraph.ledger.PendingRow` (the JSON still text, as
        :meth:`~aais_langgraph.ledger.Ledger.list_pending_rows` reads it) is parsed in its
        turn, and a text that hashes to its audit entry's digest is not digested again."""
        return self._records.requests(stored)

    def unknown_executions(self, *, session_id: str | None = None) -> list[dict[str, Any]]:
        """Approved requests whose execution outcome is unknown (the runtime's records),
        each ``{request_id, thread_id, action_digest, name, summary, since}``."""
        found: list[dict[str, Any]] = []
        for record in unknown_outcomes(self.ledger):
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
        return self._records.verify_all(
            expected_tip=expected_tip, escalation_rule=self.access.escalation_rule
        )

    # -- execution records -------------------------------------------------------------

    def execution(self, request_id: str) -> Execution | None:
        """The request's execution record, once its audit entry and seal vouch for it;
        raises :class:`~aais_langgraph.ledger.LedgerIntegrityError` for a record that
        was deleted, edited or planted behind the ledger's back."""
        return self._records.execution(request_id)

    def change_execution(
        self, request_id: str, change: ExecutionChange, *, durable: bool = True
    ) -> Execution | None:
        """Apply ``change`` to the request's execution record (see
        :meth:`Ledger.update_execution <aais_langgraph.ledger.Ledger.update_execution>`):
        audited in the same transaction, sealed with the authority key, and refused with
        :class:`~aais_langgraph.ledger.LedgerIntegrityError` when the stored record and
        its audit entry or seal disagree."""
        return self.ledger.update_execution(
            request_id, self._records.sealed_change(change, request_id), durable=durable
        )

    def sealed_change(self, change: ExecutionChange) -> ExecutionChange:
        """``change`` as :meth:`change_execution` applies it (the stored record's seal
        checked, the new one sealed with the authority key), for a write that carries it:
        a lease's release (:meth:`Ledger.release_lease
        <aais_langgraph.ledger.Ledger.release_lease>`)."""
        return self._records.sealed_change(change)

    # -- requests --------------------------------------------------------------------

    def request(
        self,
        action: Action | Mapping[str, Any],
        *,
        origin: Origin | Mapping[str, Any],
        risk: Risk | Mapping[str, Any] | None = None,
        choices: Sequence[Choice | Mapping[str, Any]] | None = None,
        expires_in: timedelta | None = None,
        request_id: str | None = None,
        thread_id: str | None = None,
        context: Mapping[str, Any] | None = None,
        unseen: bool = False,
        extensions: Mapping[str, Any] | None = None,
    ) -> ApprovalRequested:
        """Build, persist and return a request; idempotent for a given ``request_id``.

        When the id is already stored, the stored envelope (with its original
        ``created_at`` and ``expires_at``) is returned unchanged. ``unseen=True``: the
        caller has just read that the id is not stored, so it is not read again
        (the write still returns a request stored meanwhile).

        Args:
            action: the action to approve (SPEC §5).
            origin: where it comes from: harness, session, graph.
            risk: its risk level and reasons, if known.
            choices: the decisions offered (default: approve or deny once).
            expires_in: how long it stays answerable (default: ``default_expiry``).
            request_id: a deterministic id (a re-run asks for the same request); default: a new one.
            thread_id: the LangGraph thread that waits for it.
            context: runtime facts stored beside it (``requester``, ``tool_call_id``, ...).
            unseen: the caller has just read that ``request_id`` is not stored.
            extensions: envelope extensions to carry (namespaced keys).
        """
        if request_id is not None and not unseen:
            stored = self.ledger.get_request(request_id)
            if stored is not None:
                return self._records.request(stored)[1]
        requester = _requester_of(context)
        extra = dict(extensions or {})
        if requester is not None:
            extra[REQUESTER_EXTENSION] = {"id": requester}
        requested = build_request(
            action,
            origin=origin,
            risk=risk,
            choices=choices,
            request_id=request_id,
            created_at=self.clock(),
            expires_in=expires_in if expires_in is not None else self.default_expiry,
            stream=self.stream,
            extensions=extra or None,
        )
        return self.add(requested, thread_id=thread_id, context=context)

    @traced(REQUEST_SPAN, requested_attributes)
    def add(
        self,
        requested: ApprovalRequested | Mapping[str, Any] | str | bytes,
        *,
        thread_id: str | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> ApprovalRequested:
        """Persist an ``approval.requested`` envelope and return it as stored.

        A request without ``expires_at`` is stored with ``created_at`` plus the
        authority's default expiry. An id already stored returns the stored request.
        """
        envelope = parse_envelope(requested, expected=ApprovalRequested)
        _refuse_dead_choices(envelope.request)
        document = envelope.to_json()
        if not isinstance(requested, (str, bytes, bytearray)):
            check_size(document)  # text was bounded while parsing
        if envelope.stream != self.stream:
            # The ledger's sequence and the authority's stream replace the producer's own.
            document["stream"] = self.stream
            envelope = envelope.model_copy(update={"stream": self.stream})
        requester = _requester_of(context)
        if requester is not None and requester_of(envelope.request) is None:
            # Who the run acts for travels on the request, where presenters and access
            # rules read it (the action, and so its digest, is unchanged).
            extensions = {
                **(envelope.request.extensions or {}),
                REQUESTER_EXTENSION: {"id": requester},
            }
            document["request"]["extensions"] = extensions
            envelope = ApprovalRequested.from_data(document)
        if envelope.request.expires_at is None:
            # Every request gets a finite expiry, stored where sweeps and presenters see it.
            expiry = self.expiry_of(envelope.request)
            document["request"]["expires_at"] = format_timestamp(expiry)
            envelope = ApprovalRequested.from_data(document)
        try:
            self.bounds.check(envelope.request.origin.session_id, requester)
        except RequestLimitError:
            existing = self.ledger.get_request(envelope.request.id)
            if existing is None:
                raise
            return self._records.request(existing)[1]  # a retried add of a stored request
        mac = self._records.request_seal(document, thread_id, context)
        stored, created = self.ledger.add_request(
            document, thread_id=thread_id, context=context, mac=mac
        )
        if created:
            # Stored as given apart from the ledger's sequence: no need to validate again.
            return self._records.trust_request(
                stored, envelope.model_copy(update={"sequence": stored.envelope["sequence"]})
            )
        return self._records.request(stored)[1]

    def get_request(self, request_id: str) -> ApprovalRequested | None:
        """The stored request, pending or resolved."""
        stored = self.ledger.get_request(request_id)
        return None if stored is None else self._records.request(stored)[1]

    def get_stored_request(self, request_id: str, *, status: bool = True) -> StoredRequest | None:
        """The ledger record of a request, with its thread and context.

        ``status=False``: the caller does not need the current status (nothing else in a
        stored row changes), so a row this process wrote or vouched for is not read again
        and carries the status it had then; any other row is read and vouched for."""
        if not status:
            known = self._records.known_request(request_id)
            if known is not None:
                return known[0]
        stored = self.ledger.get_request(request_id)
        return None if stored is None else self._records.request(stored)[0]

    def opened_request(
        self, request_id: str, *, carried: StoredRequest | None = None
    ) -> tuple[ApprovalRequested | None, ApprovalResolved | None]:
        """The stored request and its resolution, as a gate opens them. The request is
        ``carried`` (its row as the driver read it for this run, vouched for again, not
        read) or read now; only when it is stored, its resolution: one this process
        recorded or vouched for is not read again (a recorded resolution never changes),
        any other is read, so a resolution another process recorded is found."""
        if carried is not None:
            if carried.request_id != request_id:
                raise ValueError("carried: is the row of another request")
            requested: ApprovalRequested | None = self._records.request(carried)[1]
        else:
            requested = self.get_request(request_id)
        if requested is None:
            return None, None
        resolved = self._records.known_resolution(request_id)
        return requested, resolved if resolved is not None else self.get_resolution(request_id)

    def get_resolution(self, request_id: str) -> ApprovalResolved | None:
        """The recorded resolution of a request, if it has one; raises
        :class:`~aais_langgraph.ledger.LedgerIntegrityError` when its request row says it
        was resolved but no resolution is stored (a deleted denial must not reopen it)."""
        stored = self.ledger.get_resolution(request_id)
        if stored is not None:
            return self._records.resolution(stored)
        request = self.ledger.get_request(request_id)
        if request is not None and request.status == "resolved":
            raise LedgerIntegrityError(
                "aais_resolutions", request_id, "missing, though its request is resolved"
            )
        return None

    # -- decisions -------------------------------------------------------------------

    def _stored_row(
        self, request_id: str, stored: StoredRequest | None, pointer: str
    ) -> StoredRequest:
        """The stored row of ``request_id``: the one a caller carried (read once per
        answer), else read now; :class:`UnknownRequestError` when there is none."""
        if stored is not None:
            if stored.request_id != request_id:
                raise ValueError("stored: is the row of another request")
            return stored
        found = self.ledger.get_request(request_id)
        if found is None:
            raise UnknownRequestError(pointer)
        return found

    def decide(
        self,
        decided: ApprovalDecided | Mapping[str, Any] | str | bytes,
        *,
        actor: Principal | Actor | Mapping[str, Any] | None = None,
        current_action: Action | Mapping[str, Any] | None = None,
        now: datetime | None = None,
        stored: StoredRequest | None = None,
    ) -> ApprovalResolved:
        """Judge a decision and record the request's one resolution.

        Checks, in order: schema (raises), request known (raises
        :class:`UnknownRequestError`), who may give it (raises
        :class:`~.authorization.ForbiddenError`), already resolved (same resolution for
        an identical replay, else ``conflict``), expiry by this authority's clock,
        the decision's digest, the digest of ``current_action`` (time-of-use), the
        offered choice, and the policy. ``stale`` for a mismatched decision digest
        and ``invalid`` are returned without being recorded: the request stays
        pending for a correct decision.

        Args:
            decided: the ``approval.decided`` envelope (a model, its JSON or its text).
            actor: who decides (the authenticated channel's); replaces the body's actor.
            current_action: the action about to run, checked against the digest.
            now: the moment of the decision (default: this authority's clock).
            stored: the decision's stored request row, as a caller that already read it
                got it (:meth:`get_stored_request`); it is vouched for again, not read.
        """
        return self.decide_claiming(
            decided,
            claim=None,
            actor=actor,
            current_action=current_action,
            now=now,
            in_run=False,
            stored=stored,
        )[0]

    @traced(DECIDE_SPAN)
    def decide_claiming(
        self,
        decided: ApprovalDecided | Mapping[str, Any] | str | bytes,
        *,
        claim: ExecutionChange | None,
        actor: Principal | Actor | Mapping[str, Any] | None = None,
        current_action: Action | Mapping[str, Any] | None = None,
        now: datetime | None = None,
        in_run: bool = True,
        stored: StoredRequest | None = None,
        unresolved: bool = False,
    ) -> tuple[ApprovalResolved, Execution | None]:
        """:meth:`decide`, and when it records an approval, the execution ``claim``
        applied in the resolution's own transaction (the gate's "decide + claim").
        ``in_run``: the paused run records its own answer and goes on with it, so no
        durable resume work is written (:meth:`decide` writes it for a thread's request).

        The execution record is None when nothing was claimed here (the decision
        was not recorded now, or not approved): the caller claims on its own then.

        Args:
            decided: the ``approval.decided`` envelope (a model, its JSON or its text).
            claim: the execution claim to apply with an approval, or None.
            actor: who decides (the authenticated channel's); replaces the body's actor.
            current_action: the action about to run, checked against the digest.
            now: the moment of the decision (default: this authority's clock).
            in_run: whether the paused run itself records the answer (no resume work).
            stored: the decision's stored request row, already read (see :meth:`decide`).
            unresolved: the caller has just found no resolution recorded (the gate, before
                its interrupt), so it is not looked for again before the write, which
                finds one recorded meanwhile (a refused answer still looks first).
        """
        envelope = parse_envelope(decided, expected=ApprovalDecided)
        decision = envelope.decision
        note = decision_note(decision)
        principal: Principal | None = None
        if actor is not None:
            recorded_actor = (
                actor.actor
                if isinstance(actor, Principal)
                else Actor.from_data(actor, pointer="/decision/actor")
            )
            principal = checked_principal(actor if isinstance(actor, Principal) else recorded_actor)
            decision = decision.model_copy(update={"actor": recorded_actor})
            envelope = envelope.model_copy(update={"decision": decision})
        # One dump of the envelope as recorded: its size, its decision's fingerprint, the write.
        document = envelope.to_json()
        if not isinstance(decided, (str, bytes, bytearray)):
            check_size(document)  # text was bounded while parsing
        current = (
            None
            if current_action is None
            else Action.from_data(current_action, pointer="/current_action")
        )
        # The vouched row: a carried one is checked against its audit entry like a read one.
        stored_row, requested = self._records.request(
            self._stored_row(decision.request_id, stored, "/decision/request_id")
        )
        # Who may give this decision: refused before anything is read or recorded.
        self.access.check(
            principal,
            "cancel" if decision.decision == "cancel" else "decide",
            self.access.resource_of(stored_row, requested.request, decision=decision.decision),
        )
        fingerprint = sha256_digest(document["decision"])
        moment = now if now is not None else self.clock()
        if moment.tzinfo is None:
            raise ValueError("now: datetime must be timezone-aware")
        replayed = None if unresolved else self._replayed(decision, fingerprint, moment)
        if replayed is not None:
            return replayed, None
        request = requested.request
        verdict = judge(
            request,
            decision,
            now=moment,
            expires_at=self.expiry_of(request),
            current_action=current,
        )
        if verdict.passed:
            # The policy sees every decision (approve, deny, cancel) that passed the checks.
            objection = self.policy.on_decision(request, decision)
            if objection is not None:
                verdict = Judgement(
                    "invalid",
                    objection[:2000] or "Refused by policy.",
                    False,
                    "policy",
                    "/decision",
                )
        resolved = resolution_envelope(
            request,
            outcome=verdict.outcome,
            message=verdict.message,
            now=moment,
            # A recorded resolution gets its sequence from the ledger: read it only for
            # an answer that is returned without being recorded.
            sequence=0 if verdict.terminal else self.ledger.last_sequence(),
            decision=decision,
            stream=self.stream,
            # Recorded (and audited) with the resolution it explains.
            extensions=_note_extensions(decision, note) if verdict.terminal else None,
        )
        if not verdict.terminal:
            replayed = self._replayed(decision, fingerprint, moment) if unresolved else None
            if replayed is not None:
                return replayed, None
            self.ledger.append_audit("decided", rejection_audit(envelope, resolved))
            report_decision(self, resolved, kind="rejected", request=request)
            return resolved, None
        grant = (
            grant_from_decision(request, decision, moment)
            if verdict.outcome == "approved"
            else None
        )
        resolved_document = resolved.to_json()
        write = ResolutionWrite(
            request_id=request.id,
            resolved=resolved_document,
            # Re-sequenced into the authority's stream, like the actor it recorded (SPEC §3).
            decided={**document, "stream": self.stream},
            decision_fingerprint=fingerprint,
            grant=None if grant is None else self._records.sealed_grant(grant),
            mac=self._records.resolution_seal(request.id, resolved_document, fingerprint),
            in_run=in_run,
        )
        claimed: Execution | None = None
        if claim is None:
            recorded, created = self.ledger.record_resolution(write)
        else:
            recorded, created, claimed = self.ledger.record_resolution_claiming(
                write, self._records.sealed_change(claim, request.id)
            )
        if not created:
            return self._replay(
                self._records.resolution(recorded),
                recorded.decision_fingerprint,
                fingerprint,
                moment,
                decision.id,
            ), None
        trusted = self._records.trust_resolution(
            recorded, resolved.model_copy(update={"sequence": recorded.envelope["sequence"]})
        )
        report_decision(self, trusted, kind="recorded", request=request)
        return trusted, claimed

    def _replayed(
        self, decision: Decision, fingerprint: str, moment: datetime
    ) -> ApprovalResolved | None:
        """The answer to ``decision`` when its request is resolved already (its replay or a
        conflict), or None when no resolution is recorded."""
        existing = self.ledger.get_resolution(decision.request_id)
        if existing is None:
            return None
        return self._replay(
            self._records.resolution(existing),
            existing.decision_fingerprint,
            fingerprint,
            moment,
            decision.id,
        )

    def _replay(
        self,
        resolved: ApprovalResolved,
        recorded_fingerprint: str | None,
        fingerprint: str,
        now: datetime,
        decision_id: str,
    ) -> ApprovalResolved:
        """Same resolution for an identical decision, a ``conflict`` for any other."""
        if recorded_fingerprint == fingerprint:
            report_decision(self, resolved, kind="replayed")
            return resolved
        conflict = conflict_envelope(
            resolved, now=now, sequence=self.ledger.last_sequence(), stream=self.stream
        )
        self.ledger.append_audit("conflict", resolution_audit(conflict, decision_id=decision_id))
        report_decision(self, conflict, kind="rejected")
        return conflict

    def cancel(
        self,
        request_id: str,
        *,
        reason: str | None = None,
        actor: Principal | Actor | Mapping[str, Any] | None = None,
        stored: StoredRequest | None = None,
    ) -> ApprovalResolved:
        """Resolve a pending request ``cancelled``; a resolved one keeps its resolution.

        ``actor`` is who cancels (the authenticated channel's; default: this library, on
        behalf of the run): it is recorded in the resolution's ``resolved_by`` extension
        and its audit entry, and the policy sees the cancel as a ``cancel`` decision by
        that actor. An objection records nothing and returns ``invalid``. ``stored``:
        the request's row, already read (see :meth:`decide`).

        Args:
            request_id: the pending request.
            reason: the resolution's message (default: the standard one).
            actor: who cancels (the authenticated channel's; default: this library, for the
                run).
            stored: the request's row, already read (see :meth:`decide`).
        """
        return self._close(
            request_id,
            outcome="cancelled",
            message=reason or MESSAGES["cancelled"],
            actor=actor,
            # A person's cancel is a decision the policy sees; the runtime's is not.
            consult_policy=actor is not None and _actor_type(actor) == "human",
            stored=stored,
        )

    def expire(
        self, request_id: str, *, actor: Principal | Actor | Mapping[str, Any] | None = None
    ) -> ApprovalResolved:
        """Resolve a pending request ``expired`` (housekeeping after its expiry); recorded as
        resolved by the authority's clock unless ``actor`` names who asked."""
        return self._close(
            request_id, outcome="expired", message=MESSAGES["expired"], actor=actor or EXPIRY
        )

    def supersede(self, request_id: str) -> ApprovalResolved:
        """Resolve ``stale`` a request whose paused run moved on (its interrupt is gone)."""
        return self._close(
            request_id, outcome="stale", message=MESSAGES["stale_action"], actor=SUPERSEDED
        )

    @traced(DECIDE_SPAN)
    def _close(
        self,
        request_id: str,
        *,
        outcome: Literal["cancelled", "expired", "stale"],
        message: str,
        actor: Principal | Actor | Mapping[str, Any] | None,
        consult_policy: bool = False,
        stored: StoredRequest | None = None,
    ) -> ApprovalResolved:
        stored, requested = self._records.request(
            self._stored_row(request_id, stored, "/request_id")
        )
        if outcome == "cancelled":
            resource = self.access.resource_of(stored, requested.request, decision="cancel")
            self.access.check(checked_principal(actor), "cancel", resource)
        existing = self.ledger.get_resolution(request_id)
        if existing is not None:
            kept = self._records.resolution(existing)
            report_decision(self, kept, kind="replayed")
            return kept
        request = requested.request
        now = self.clock()
        by = (
            as_principal(actor).actor
            if actor is not None
            else Actor.from_data(ON_BEHALF_OF_THE_RUN, pointer="/actor")
        )
        if consult_policy:
            cancel = Decision(
                id=new_id("dec"),
                request_id=request.id,
                action_digest=request.action_digest,
                decided_at=format_timestamp(now),
                decision="cancel",
                scope="once",
                actor=by,
            )
            objection = self.policy.on_decision(request, cancel)
            if objection is not None:
                refused = resolution_envelope(
                    request,
                    outcome="invalid",
                    message=objection[:2000] or "Refused by policy.",
                    now=now,
                    sequence=self.ledger.last_sequence(),
                    stream=self.stream,
                )
                report_decision(self, refused, kind="rejected", request=request)
                return refused
        resolved = resolution_envelope(
            request,
            outcome=outcome,
            message=message[:2000],
            now=now,
            sequence=self.ledger.last_sequence(),
            stream=self.stream,
            extensions={RESOLVED_BY_EXTENSION: by.model_dump(mode="json", exclude_none=True)},
        )
        document = resolved.to_json()
        recorded, created = self.ledger.record_resolution(
            ResolutionWrite(
                request_id=request_id,
                resolved=document,
                mac=self._records.resolution_seal(request_id, document, None),
            )
        )
        if created:
            trusted = self._records.trust_resolution(
                recorded, resolved.model_copy(update={"sequence": recorded.envelope["sequence"]})
            )
            report_decision(self, trusted, kind="recorded", request=request)
            return trusted
        return self._records.resolution(recorded)

    def cancel_session(self, session_id: str) -> list[ApprovalResolved]:
        """Cancel every pending request of a session (each atomically)."""
        return [self.cancel(s.request_id) for s in self.ledger.list_pending(session_id=session_id)]

    def cancel_thread(self, thread_id: str) -> list[ApprovalResolved]:
        """Cancel every pending request raised by a LangGraph thread."""
        return [self.cancel(s.request_id) for s in self.ledger.list_pending(thread_id=thread_id)]

    def expire_due(self, *, now: datetime | None = None) -> list[ApprovalResolved]:
        """Resolve ``expired`` every pending request whose expiry has passed."""
        moment = now if now is not None else self.clock()
        due = self.ledger.list_pending(expires_before=moment.timestamp())
        return [self.expire(s.request_id) for s in due]

    # -- async twins ----------------------------------------------------------------

    async def ascreen(
        self,
        action: Action | Mapping[str, Any],
        *,
        origin: Origin | Mapping[str, Any],
        requester: str | None = None,
    ) -> Screening:
        return await asyncio.to_thread(self.screen, action, origin=origin, requester=requester)

    async def arequest(
        self, action: Action | Mapping[str, Any], **kwargs: Any
    ) -> ApprovalRequested:
        return await asyncio.to_thread(lambda: self.request(action, **kwargs))

    async def aadd(self, requested: Any, **kwargs: Any) -> ApprovalRequested:
        return await asyncio.to_thread(lambda: self.add(requested, **kwargs))

    async def adecide(self, decided: Any, **kwargs: Any) -> ApprovalResolved:
        return await asyncio.to_thread(lambda: self.decide(decided, **kwargs))

    async def acancel(
        self,
        request_id: str,
        *,
        reason: str | None = None,
        actor: Principal | Actor | Mapping[str, Any] | None = None,
        stored: StoredRequest | None = None,
    ) -> ApprovalResolved:
        """Async twin of :meth:`cancel`."""
        return await asyncio.to_thread(
            lambda: self.cancel(request_id, reason=reason, actor=actor, stored=stored)
        )

    async def aexpire_due(self, *, now: datetime | None = None) -> list[ApprovalResolved]:
        return await asyncio.to_thread(self.expire_due, now=now)

    async def aexpire(
        self, request_id: str, *, actor: Principal | Actor | Mapping[str, Any] | None = None
    ) -> ApprovalResolved:
        return await asyncio.to_thread(lambda: self.expire(request_id, actor=actor))

    async def asupersede(self, request_id: str) -> ApprovalResolved:
        return await asyncio.to_thread(self.supersede, request_id)

    async def acancel_session(self, session_id: str) -> list[ApprovalResolved]:
        return await asyncio.to_thread(self.cancel_session, session_id)

    async def acancel_thread(self, thread_id: str) -> list[ApprovalResolved]:
        return await asyncio.to_thread(self.cancel_thread, thread_id)

    async def asnapshot(
        self, *, session_id: str | None = None, stream: str | None = None
    ) -> ApprovalSnapshot:
        return await asyncio.to_thread(self.snapshot, session_id=session_id, stream=stream)

    async def aevents_after(self, sequence: int, *, limit: int = 1000) -> EventPage:
        return await asyncio.to_thread(self.events_after, sequence, limit=limit)

    async def averify_audit(
        self, *, expected_tip: tuple[int, str] | None = None
    ) -> AuditVerification:
        return await asyncio.to_thread(self.verify_audit, expected_tip=expected_tip)

    async def aget_request(self, request_id: str) -> ApprovalRequested | None:
        return await asyncio.to_thread(self.get_request, request_id)

    async def aget_stored_request(self, request_id: str) -> StoredRequest | None:
        return await asyncio.to_thread(self.get_stored_request, request_id)

    async def aget_resolution(self, request_id: str) -> ApprovalResolved | None:
        return await asyncio.to_thread(self.get_resolution, request_id)

    async def amatch_grant(
        self,
        action: Action | Mapping[str, Any],
        origin: Origin | Mapping[str, Any],
        *,
        now: datetime | None = None,
        requester: str | None = None,
    ) -> Grant | None:
        """Async twin of :meth:`match_grant`."""
        return await asyncio.to_thread(
            self.match_grant, action, origin, now=now, requester=requester
        )

    async def alist_grants(
        self, *, session_id: str | None = None, include_revoked: bool = False
    ) -> list[Grant]:
        return await asyncio.to_thread(
            self.list_grants, session_id=session_id, include_revoked=include_revoked
        )

    async def arevoke_grant(
        self, grant_id: str, *, actor: Principal | Actor | Mapping[str, Any] | None = None
    ) -> bool:
        return await asyncio.to_thread(lambda: self.revoke_grant(grant_id, actor=actor))


def _note_extensions(decision: Any, note: str | None) -> dict[str, Any] | None:
    """The resolution extensions that carry the reviewer's note (and, for a deny whose note
    is the tool's result, its reply flag)."""
    if note is None:
        return None
    reply = (decision.extensions or {}).get(REPLY_EXTENSION) is True
    return {NOTE_EXTENSION: note, **({REPLY_EXTENSION: True} if reply else {})}

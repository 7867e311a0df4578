"""The approval authority: the state machine plus ``a``-prefixed async twins.

Each twin runs its sync method in a worker thread.

One implementation serves both worlds; the ledger call inside is blocking I/O,
which ``asyncio.to_thread`` keeps off the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ..ledger import AuditVerification, Grant, StoredRequest
from ..protocol import Action, Actor, ApprovalRequested, ApprovalResolved, ApprovalSnapshot, Origin
from .standing import EventPage, Screening
from .state_machine import AuthorityStateMachine


class ApprovalAuthority(AuthorityStateMachine):
    """Records requests, judges decisions, keeps grants and the audit chain.

    ``actor`` passed to :meth:`decide` is what the authenticated channel says. It
    *replaces* the actor in the decision body, so a presenter cannot claim to be
    someone else; with ``actor=None`` (trusted in-process callers) the body's actor
    is recorded as given. Every method has an ``a``-prefixed async twin.

    ``key`` (default: ``AAIS_AUTHORITY_KEY_FILE`` or ``AAIS_AUTHORITY_KEY``, if
    set) seals every recorded row; stored rows are read back only when the audit
    chain (and the seal) vouches for them, else ``LedgerIntegrityError``.
    """

    async def ascreen(
        self,
        action: Action | Mapping[str, Any],
        *,
        origin: Origin | Mapping[str, Any],
    ) -> Screening:
        return await asyncio.to_thread(self.screen, action, origin=origin)

    async def arequest(
        self, action: Action | Mapping[str, Any], **kwargs: Any
    ) -> ApprovalRequested:
        return await asyncio.to_thread(lambda: self.request(action, **kwargs))

    async def aadd(self, requested: Any, **kwargs: Any) -> ApprovalRequested:
        return await asyncio.to_thread(lambda: self.add(requested, **kwargs))

    async def adecide(self, decided: Any, **kwargs: Any) -> ApprovalResolved:
        return await asyncio.to_thread(lambda: self.decide(decided, **kwargs))

    async def acancel(self, request_id: str, *, reason: str | None = None) -> ApprovalResolved:
        return await asyncio.to_thread(self.cancel, request_id, reason=reason)

    async def aexpire_due(self, *, now: datetime | None = None) -> list[ApprovalResolved]:
        return await asyncio.to_thread(self.expire_due, now=now)

    async def aexpire(self, request_id: str) -> ApprovalResolved:
        return await asyncio.to_thread(self.expire, request_id)

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
    ) -> Grant | None:
        return await asyncio.to_thread(self.match_grant, action, origin, now=now)

    async def alist_grants(
        self, *, session_id: str | None = None, include_revoked: bool = False
    ) -> list[Grant]:
        return await asyncio.to_thread(
            self.list_grants, session_id=session_id, include_revoked=include_revoked
        )

    async def arevoke_grant(
        self, grant_id: str, *, actor: Actor | Mapping[str, Any] | None = None
    ) -> bool:
        return await asyncio.to_thread(lambda: self.revoke_grant(grant_id, actor=actor))

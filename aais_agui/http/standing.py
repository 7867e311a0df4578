"""What stands, for the inbox: live grants (with a revoke), recent resolutions, audit status.

SPEC §9: an authority offering ``persistent`` MUST provide a discoverable way to
inspect and revoke the saved rule. These routes serve the inbox page from the same
authority and ledger, under the same authentication (and, for the revoke, the same
Origin / fetch-metadata / CSRF rules) as the decisions endpoint:

- ``GET  /inbox/grants`` -> live ``session`` and ``persistent`` grants, each with the
  authority's plain-language explanation of its constraints;
- ``POST /inbox/grants/{grant_id}/revoke`` -> revokes it, audited under the
  authenticated actor; the next matching action asks again (404 when already
  revoked; an unknown grant and one the actor may not even view get the same 403);
- ``GET  /inbox/resolutions`` -> the most recent recorded resolutions (outcome, actor,
  time, digest) from the event stream, and the audit chain's verify status. The actor
  is the decision's, or for a resolution without one (a cancel, an expiry) the
  resolution's ``resolved_by``. A full ``verify_audit`` reads the whole ledger, so its
  result is cached: recomputed once the chain's tip moved, one check at a time, and no
  sooner after the last one than ten times what it took (at most ``verify_every``
  seconds), so checking costs at most a tenth of the time whatever the ledger's size.
  A request waits up to a second for that; past it, it gets the last result with
  ``current: false`` and ``next_check_in`` (seconds), and the page asks again then.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from fastapi import APIRouter, Request

from aais_langgraph.authority import (
    ApprovalAuthority,
    ForbiddenError,
    explain_constraints,
)
from aais_langgraph.ledger import AuditVerification, Grant
from aais_langgraph.protocol import RESOLVED_BY_EXTENSION, format_timestamp

from .limits import MAX_CLIENT_ID_LENGTH, id_too_long
from .refusals import refused
from .security import Security

__all__ = ["AuditStatusCache", "standing_router"]

logger = logging.getLogger(__name__)

#: How many recent events are read to find the recent resolutions (bounded work per page).
_EVENT_WINDOW = 600
#: A new audit check waits at least this many times as long as the last one took.
_CHECK_SPACING = 10.0
#: Longest a page request waits for that spacing to pass (else it gets the last result).
_LONGEST_WAIT = 1.0


def _moment(seconds: float | None) -> str | None:
    return (
        None if seconds is None else format_timestamp(datetime.fromtimestamp(seconds, timezone.utc))
    )


def _grant_json(grant: Grant) -> dict[str, Any]:
    return {
        "grant_id": grant.grant_id,
        "request_id": grant.request_id,
        "scope": grant.scope,
        "session_id": grant.session_id,
        "action_name": grant.action_name,
        "constraints": grant.constraints,
        "explanation": explain_constraints(grant.constraints),
        "created_at": _moment(grant.created_at),
        "expires_at": _moment(grant.expires_at),
    }


@dataclass
class AuditStatusCache:
    """The last ``verify_audit`` result, recomputed when the tip moved and it is stale."""

    authority: ApprovalAuthority
    verify_every: float = 10.0
    _result: AuditVerification | None = None
    _checked_at: float = 0.0
    _took: float = 0.0
    _checked_wall: datetime | None = None
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def status(self) -> dict[str, Any]:
        async with self._lock:
            tip = await asyncio.to_thread(self.authority.ledger.audit_tip)
            spacing = min(self.verify_every, _CHECK_SPACING * self._took)
            wait = max(0.0, spacing - (time.monotonic() - self._checked_at))
            if self._result is None or (self._result.tip != tip and wait <= _LONGEST_WAIT):
                await asyncio.sleep(wait)
                started = time.monotonic()
                self._result = await self.authority.averify_audit()
                self._checked_at = time.monotonic()
                self._took = self._checked_at - started
                self._checked_wall = self.authority.clock()
                wait = 0.0
                if not self._result.ok:
                    logger.error("audit verify failed: %s", self._result.reason)
            result = self._result
            checked_wall = self._checked_wall
        current = result.tip == tip
        return {
            "ok": result.ok,
            "checked": result.checked,
            "reason": result.reason,
            "table": result.table,
            "row_id": result.row_id,
            "tip": None if result.tip is None else {"index": result.tip[0], "hash": result.tip[1]},
            "checked_at": None if checked_wall is None else format_timestamp(checked_wall),
            "current": current,
            # When the newer entries are checked at the earliest (ask again then).
            "next_check_in": 0.0 if current else round(wait, 3),
        }


def _recent_resolutions(authority: ApprovalAuthority) -> list[dict[str, Any]]:
    """The resolutions among the event stream's latest events, newest first, with their
    actor (who may see which is asked afterwards)."""
    last = authority.ledger.last_sequence()
    events = authority.ledger.events_after(max(0, last - _EVENT_WINDOW), limit=_EVENT_WINDOW)
    actors: dict[str, dict[str, Any]] = {}
    found: list[dict[str, Any]] = []
    for event in events:
        if event.get("type") == "approval.decided":
            decision = event.get("decision") or {}
            actors[str(decision.get("id"))] = dict(decision.get("actor") or {})
        elif event.get("type") == "approval.resolved":
            resolution = event.get("resolution") or {}
            decision_id = resolution.get("decision_id")
            # No decision: who closed it (a cancel, an expiry, a run that moved on).
            resolved_by = (resolution.get("extensions") or {}).get(RESOLVED_BY_EXTENSION)
            closer = dict(resolved_by) if isinstance(resolved_by, dict) else None
            found.append(
                {
                    "request_id": resolution.get("request_id"),
                    "outcome": resolution.get("outcome"),
                    "resolved_at": resolution.get("resolved_at"),
                    "action_digest": resolution.get("action_digest"),
                    "effective_scope": resolution.get("effective_scope"),
                    "actor": actors.get(str(decision_id)) if decision_id else closer,
                    "sequence": event.get("sequence"),
                }
            )
    found.reverse()
    return found


def _name_actions(authority: ApprovalAuthority, items: list[dict[str, Any]]) -> None:
    """Add the name and summary of each resolution's action (None: its request is gone)."""
    for item in items:
        requested = authority.get_request(str(item["request_id"]))
        action = None if requested is None else requested.request.action
        item["action_name"] = None if action is None else action.name
        item["summary"] = None if action is None else action.summary


def standing_router(
    authority: ApprovalAuthority,
    security: Security,
    *,
    recent: int = 20,
    verify_every: float = 10.0,
) -> APIRouter:
    """The routes above; mount at the app root beside :func:`~.inbox_router.inbox_router`.

    Args:
        authority: the authority whose grants and resolutions are shown.
        security: who the request's actor is.
        recent: how many recent resolutions are listed.
        verify_every: the most seconds between two full audit checks.
    """
    router = APIRouter()
    audit = AuditStatusCache(authority, verify_every=verify_every)

    @router.get("/inbox/grants")
    async def grants(request: Request) -> dict[str, Any]:
        viewer = (await security.actor(request)).principal
        now = authority.clock().timestamp()
        live = [
            grant
            for grant in await authority.alist_grants()
            if grant.revoked_at is None and (grant.expires_at is None or now < grant.expires_at)
        ]
        visible = await authority.access.avisible(viewer, [grant.request_id for grant in live])
        live = [grant for grant in live if grant.request_id in visible]
        live.sort(key=lambda grant: grant.created_at, reverse=True)
        return {"grants": [_grant_json(grant) for grant in live]}

    @router.post("/inbox/grants/{grant_id}/revoke")
    async def revoke(grant_id: str, request: Request) -> dict[str, Any]:
        authenticated = await security.state_change(request)
        if id_too_long(grant_id):
            message = f"/path/grant_id: ids are limited to {MAX_CLIENT_ID_LENGTH} characters"
            raise refused("aais.id_too_long", message)
        try:
            revoked = await authority.arevoke_grant(grant_id, actor=authenticated.principal)
        except ForbiddenError as error:
            raise refused(error.code, error.reason) from None
        if not revoked:
            raise refused("inbox.unknown_grant", "no live grant with that id")
        logger.info("grant revoked through the inbox by actor id %r", authenticated.actor.id)
        return {"grant_id": grant_id, "revoked": True}

    @router.get("/inbox/resolutions")
    async def resolutions(request: Request) -> dict[str, Any]:
        viewer = (await security.actor(request)).principal
        found = await asyncio.to_thread(_recent_resolutions, authority)
        visible = await authority.access.avisible(viewer, [str(i["request_id"]) for i in found])
        items = [item for item in found if str(item["request_id"]) in visible][:recent]
        await asyncio.to_thread(_name_actions, authority, items)
        return {"resolutions": items, "audit": await audit.status()}

    return router

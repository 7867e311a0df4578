"""Webhook deliveries for the inbox: those still waiting and those that gave up, with a retry.

Beside the inbox's other routes, under the same authentication (and, for the
retry, the same Origin / fetch-metadata / CSRF rules as every state change):

- ``GET  /inbox/webhooks`` -> the pending and dead deliveries of requests the
  viewer may see (``webhook-id``, subscription, notice, request, state, attempts,
  last error; never the receiver's URL, which for Slack is itself a secret);
- ``POST /inbox/webhooks/{delivery_id}/retry`` -> hands a dead delivery back to
  the senders (404 when unknown, not dead, or not visible).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from fastapi import APIRouter, Request

from aais_langgraph.authority import ApprovalAuthority
from aais_langgraph.ledger import DELIVERY, retry_delivery

from .limits import MAX_CLIENT_ID_LENGTH, id_too_long
from .refusals import refused
from .security import Security

__all__ = ["deliveries_router"]

logger = logging.getLogger(__name__)


def deliveries_router(
    authority: ApprovalAuthority, security: Security, *, limit: int = 200
) -> APIRouter:
    """The routes above; mount at the app root beside the inbox page's routes."""
    router = APIRouter()
    ledger = authority.ledger

    @router.get("/inbox/webhooks")
    async def deliveries(request: Request) -> dict[str, Any]:
        viewer = (await security.actor(request)).principal
        found = await ledger.alist_work(DELIVERY, states=("due", "claimed", "dead"), limit=limit)
        visible = await authority.access.avisible(viewer, [item.request_id for item in found])
        shown = [item for item in found if item.request_id in visible]
        return {"deliveries": [item.to_json() for item in shown]}

    @router.post("/inbox/webhooks/{delivery_id}/retry")
    async def retry(delivery_id: str, request: Request) -> dict[str, Any]:
        authenticated = await security.state_change(request)
        if id_too_long(delivery_id):
            message = f"/path/delivery_id: ids are limited to {MAX_CLIENT_ID_LENGTH} characters"
            raise refused("aais.id_too_long", message)
        found = await ledger.aget_work(DELIVERY, delivery_id)
        visible = found is not None and await authority.access.amay_view(
            authenticated.principal, found.request_id
        )
        retried = None
        if visible:
            retried = await asyncio.to_thread(retry_delivery, ledger, delivery_id, now=time.time())
        if retried is None:
            raise refused("inbox.unknown_delivery", "no dead delivery with that id")
        logger.info(
            "webhook delivery retried through the inbox by actor id %r", authenticated.actor.id
        )
        return {"delivery_id": delivery_id, "state": "pending"}

    return router

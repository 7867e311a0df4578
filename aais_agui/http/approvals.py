"""The AAIS HTTP/SSE presenter profile: snapshot, decisions, and the event stream.

- ``GET  /approvals/snapshot`` -> ``approval.snapshot`` of what is really waiting;
- ``POST /approvals/{request_id}/decisions`` with one ``approval.decided`` ->
  the ``approval.resolved``; a decision that resolves the request resumes its
  thread in the background (under the thread's run lease);
- ``POST /approvals/{request_id}/cancel`` with ``{}`` or ``{"reason": "..."}`` -> the
  ``approval.resolved`` of cancelling it as the authenticated actor (authorization
  ``cancel``: by the policy file's rules, its deciders or, with ``cancel_own``, its
  requester; SPEC §11), its thread resumed as after a decision;
- ``GET  /approvals/events`` -> SSE of AAIS envelopes in sequence order,
  resuming after ``Last-Event-ID`` (see :mod:`aais_agui.http.sse`); its actor is
  authenticated again every ``reauth_interval`` seconds, and the stream ends once
  the login ended or names another actor or other groups;
- ``GET  /approvals/csrf`` -> a CSRF token (and cookie) for cookie sessions.

HTTP status of a decision: 200 for a recorded resolution (approved, denied,
cancelled, expired) or its identical replay, 409 for ``conflict`` and ``stale``,
422 for ``invalid`` and malformed envelopes, 404 for an unknown request. A cancel
answers the same way; a request already resolved otherwise is 409 with its recorded
resolution, a principal who may not cancel is 403 with nothing recorded.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse

from aais_langgraph.authority import (
    TERMINAL,
    ForbiddenError,
    UnknownRequestError,
)
from aais_langgraph.protocol import (
    MAX_SAFE_INTEGER,
    AAISValidationError,
    envelope_text,
    join_pointer,
    loads_strict,
)
from aais_langgraph.threads import AnswerPlanner, Cancellation

from ..service import ApprovalService
from .decisions import DecisionRefused, arecord_decision
from .limits import MAX_CLIENT_ID_LENGTH, ascii_decimal, id_too_long
from .refusals import refused
from .security import CSRF_COOKIE, Security, new_csrf_token
from .sse import event_stream

logger = logging.getLogger(__name__)

_STATUS = {"conflict": 409, "stale": 409, "invalid": 422}
_SEQUENCE_DIGITS = len(str(MAX_SAFE_INTEGER))
_ID_TOO_LONG = {
    "code": "aais.id_too_long",
    "message": f"/path/request_id: ids are limited to {MAX_CLIENT_ID_LENGTH} characters",
}
#: The longest reason a cancel may give (the resolution's message is bounded by the authority).
MAX_CANCEL_REASON = 500


def approvals_router(
    service: ApprovalService, security: Security, *, prefix: str = "/approvals"
) -> APIRouter:
    """The AAIS profile routes under ``prefix`` for ``service`` (whose graph may be None:
    no resuming). An open event stream's actor is authenticated again every
    ``settings.reauth_every`` seconds; a quiet one reads the ledger every
    ``settings.stream_poll`` seconds."""
    router = APIRouter(prefix=prefix)
    authority, resumes = service.authority, service.resumes
    poll_interval = service.settings.stream_poll
    reauth_interval = service.settings.reauth_every

    @router.get("/snapshot")
    async def snapshot(request: Request) -> Response:
        authenticated = await security.actor(request)
        current = await service.snapshot(authenticated.principal)
        # Each pending request's text is written once per listed model (envelope_text),
        # not dumped and then encoded again for every snapshot.
        text = await asyncio.to_thread(envelope_text, current)
        return Response(text, media_type="application/json")

    @router.post("/{request_id}/decisions")
    async def decide(request_id: str, request: Request) -> JSONResponse:
        authenticated = await security.state_change(request)
        if id_too_long(request_id):
            raise HTTPException(422, _ID_TOO_LONG)
        body = await security.read_body(request)
        try:
            _, resolved = await arecord_decision(
                authority, body, authenticated.principal, request_id=request_id
            )
        except DecisionRefused as refused:
            detail = {"code": refused.code, "message": refused.message}
            raise HTTPException(refused.status, detail) from None
        outcome = resolved.resolution.outcome
        if outcome in TERMINAL or outcome == "conflict":
            # A replay or a conflict names what is recorded: a thread still paused on it
            # (its resume failed, or waits for a dead holder's lease) is resumed now.
            resumes.later(request_id)
        return JSONResponse(resolved.to_json(), status_code=_STATUS.get(outcome, 200))

    @router.post("/{request_id}/cancel")
    async def cancel(request_id: str, request: Request) -> JSONResponse:
        authenticated = await security.state_change(request)
        if id_too_long(request_id):
            raise HTTPException(422, _ID_TOO_LONG)
        reason = _cancel_reason(await security.read_body(request))
        try:
            resolved = await AnswerPlanner(authority).arecord_cancel(
                Cancellation(request_id, reason), authenticated.principal
            )
        except UnknownRequestError:
            raise refused("aais.unknown_request", "no such approval request") from None
        except ForbiddenError as error:
            raise refused(error.code, error.reason) from None
        outcome = resolved.resolution.outcome
        if outcome in TERMINAL:
            resumes.later(request_id)
        status = 200 if outcome == "cancelled" else _STATUS.get(outcome, 409)
        return JSONResponse(resolved.to_json(), status_code=status)

    @router.get("/events")
    async def events(request: Request) -> StreamingResponse:
        viewer = (await security.actor(request)).principal
        after = _after(request)

        async def snapshot_now() -> Any:
            return await service.snapshot(viewer)

        async def still_signed_in() -> bool:
            try:
                current = await security.actor(request)
            except HTTPException:
                return False
            return current.principal.id == viewer.id and current.groups == viewer.groups

        return StreamingResponse(
            event_stream(
                authority,
                after=after,
                viewer=viewer,
                snapshot=snapshot_now,
                is_disconnected=request.is_disconnected,
                poll_interval=poll_interval,
                still_signed_in=still_signed_in,
                reauth_interval=reauth_interval,
            ),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    @router.get("/csrf")
    async def csrf(request: Request, response: Response) -> dict[str, str]:
        authenticated = await security.actor(request)
        token = request.cookies.get(CSRF_COOKIE) or new_csrf_token()
        secure = authenticated.secure_cookies
        response.set_cookie(
            CSRF_COOKIE,
            token,
            samesite="strict",
            secure=request.url.scheme == "https" if secure is None else secure,
            httponly=False,
            path="/",
        )
        return {"csrf_token": token, "header": "X-AAIS-CSRF"}

    return router


def _after(request: Request) -> int | None:
    """The sequence to resume after: ``Last-Event-ID`` header, else ``?after=``."""
    raw = request.headers.get("last-event-id") or request.query_params.get("after")
    if raw is None or raw == "":
        return None
    after = ascii_decimal(raw, max_digits=_SEQUENCE_DIGITS)
    if after is None or after > MAX_SAFE_INTEGER:
        raise refused("aais.bad_last_event_id", "Last-Event-ID must be a sequence")
    return after


def _cancel_reason(body: bytes) -> str | None:
    """The optional ``reason`` of a cancel body (``{}`` or ``{"reason": str}``), or 422."""
    try:
        document = loads_strict(body) if body.strip() else {}
    except AAISValidationError as error:
        raise _invalid_cancel(str(error)) from None
    if not isinstance(document, dict):
        raise _invalid_cancel("the body must be a JSON object")
    unknown = sorted(key for key in document if key != "reason")
    if unknown:
        raise _invalid_cancel(f"{join_pointer('', unknown[0])}: unknown field (only reason)")
    reason = document.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise _invalid_cancel("/reason: must be a string")
    if reason is not None and len(reason) > MAX_CANCEL_REASON:
        raise _invalid_cancel(f"/reason: at most {MAX_CANCEL_REASON} characters")
    return reason or None


def _invalid_cancel(message: str) -> HTTPException:
    return refused("aais.invalid_cancel", message)

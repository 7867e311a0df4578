"""The AAIS WebSocket presenter profile: envelopes out and decisions in on one connection.

docs/integration.md ("WebSocket profile"): one AAIS envelope per text frame;
after (re)connecting, a snapshot and then the events after its
``as_of_sequence`` (SPEC §4.4); decisions travel the other way on the same
authenticated connection. ``GET {prefix}/ws`` (a WebSocket handshake):

- The handshake is refused before it is accepted (an HTTP status with the
  ``{"error": {...}}`` body, or close 1008 where the server cannot send one) for
  a foreign ``Origin`` (403), no actor (401, the same ``authenticate`` as HTTP),
  a cookie session without its CSRF token in ``?csrf=`` (403: a browser cannot
  set headers on a handshake) and a bad ``?after=`` (400, ASCII digits only).
- Server to client, on the authority's stream (its ``stream`` id): an
  ``approval.snapshot`` first, then every event after its ``as_of_sequence``. With
  ``?after=N`` the events after ``N`` follow at once; if some were compacted away
  (or ``N`` is ahead of the ledger), a ``{"gap": {"after_sequence", "last_sequence"}}``
  frame (the SSE ``aais.gap``) comes first, then a snapshot that replaces the
  client's state.
- A request that escalates to the actor while the connection is open
  (:meth:`~aais_langgraph.threads.EventFilter.aescalated`) is sent as an
  ``approval.requested`` envelope of the request on the connection's own stream
  (below), so the authority's events stay in order after ``as_of_sequence``.
- Client to server: ``approval.decided`` envelopes, recorded by exactly the HTTP
  endpoint's rules (:func:`aais_agui.http.decisions.arecord_decision`: the
  authenticated actor, strict I-JSON, edited arguments refused). Each frame gets
  one reply on this connection's own stream (``aais-langgraph.ws_<hex>``, sequences
  from 1, SPEC §3): the ``approval.resolved`` of any outcome with the
  ``aais-langgraph.org/in_reply_to`` extension ``{"frame": N, "decision_id"}``, or
  ``{"error": {"code", "pointer", "message", "frame"}}`` naming the field, never
  the value, having changed nothing. A resolution resumes the paused run in the
  background, as the HTTP endpoint does.
- A frame over ``max_body_bytes`` closes the connection with 1009 (message too
  big) and records nothing.
- The connection never outlives its login: the actor is authenticated again (the
  same ``authenticate``, on the handshake's headers and cookies) before each
  decision frame and every ``reauth_interval`` seconds for the outgoing stream; a
  revoked session, or another actor, closes it with 1008 and records nothing.
  ``max_age`` (seconds) bounds how long any connection stays open (1008 as well).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from contextlib import suppress
from typing import Any

from fastapi import APIRouter, HTTPException, WebSocket
from fastapi.responses import JSONResponse
from starlette.websockets import WebSocketDisconnect, WebSocketState

from aais_langgraph.authority import (
    TERMINAL,
    ApprovalAuthority,
    EventFollower,
    LedgerIntegrityError,
    ReplyStream,
)
from aais_langgraph.protocol import (
    MAX_SAFE_INTEGER,
    ApprovalSnapshot,
    envelope_text,
    websocket_close_code,
    websocket_refusal,
)
from aais_langgraph.threads import EventFilter

from ..service import ApprovalService
from .decisions import DecisionRefused, arecord_decision
from .limits import ascii_decimal
from .refusals import refused
from .security import CSRF_COOKIE, Authenticated, Security

__all__ = ["CLOSE_TOO_LARGE", "CSRF_QUERY", "websocket_router"]

logger = logging.getLogger(__name__)

CLOSE_TOO_LARGE = 1009
CLOSE_POLICY = 1008
"""Close code for a frame over the size limit (RFC 6455 "message too big")."""
CSRF_QUERY = "csrf"
"""Query parameter carrying a cookie session's CSRF token on the handshake."""

_SEQUENCE_DIGITS = len(str(MAX_SAFE_INTEGER))


def websocket_router(
    service: ApprovalService,
    security: Security,
    *,
    prefix: str = "/approvals",
    path: str = "/ws",
) -> APIRouter:
    """The WebSocket profile at ``prefix + path`` for ``service`` (whose graph may be
    None: no resuming).

    An open connection's actor is authenticated again for the outgoing stream every
    ``settings.reauth_every`` seconds (decisions are, each one);
    ``settings.websocket_max_age`` (seconds, or None for no limit) closes a connection
    that old.

    Args:
        service: the served process: its driver, authority and settings.
        security: who the connection's actor is.
        prefix: where the AAIS profile routes are mounted.
        path: the WebSocket's path under ``prefix``.
    """
    router = APIRouter(prefix=prefix)
    authority, resumes = service.authority, service.resumes
    poll_interval = service.settings.stream_poll
    reauth_interval = service.settings.reauth_every
    max_age = service.settings.websocket_max_age

    @router.websocket(path)
    async def approvals_ws(websocket: WebSocket) -> None:
        try:
            authenticated = await _handshake(security, websocket)
            after = _after(websocket)
        except HTTPException as error:
            await _refuse(websocket, error)
            return
        await websocket.accept()
        viewer = authenticated.principal

        async def snapshot_now() -> ApprovalSnapshot:
            return await service.snapshot(viewer)

        connection = _Connection(
            websocket,
            authority,
            authenticated,
            snapshot=snapshot_now,
            max_bytes=security.max_body_bytes,
            poll_interval=poll_interval,
            resolved=resumes.later,
            reauthenticate=lambda: security.actor(websocket),
            reauth_interval=reauth_interval,
            max_age=max_age,
        )
        await connection.serve(after)

    return router


async def _handshake(security: Security, websocket: WebSocket) -> Authenticated:
    """The HTTP rules on a handshake: Origin, actor, and a cookie session's CSRF token."""
    security.check_origin(websocket)
    authenticated = await security.actor(websocket)
    if authenticated.cookie_session:
        cookie = websocket.cookies.get(CSRF_COOKIE, "")
        token = websocket.query_params.get(CSRF_QUERY, "")
        if not cookie or not token or not _same(cookie, token):
            raise refused("aais.csrf", "missing or wrong CSRF token (?csrf=)")
    return authenticated


def _same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


def _after(websocket: WebSocket) -> int | None:
    """``?after=N``: resume after sequence N (ASCII digits only), else None (a snapshot)."""
    raw = websocket.query_params.get("after")
    if raw is None or raw == "":
        return None
    after = ascii_decimal(raw, max_digits=_SEQUENCE_DIGITS)
    if after is None or after > MAX_SAFE_INTEGER:
        raise refused("aais.bad_after", "after must be a sequence")
    return after


async def _refuse(websocket: WebSocket, error: HTTPException) -> None:
    """Refuse the handshake with the HTTP status where the server can, else close 1008."""
    if "websocket.http.response" in websocket.scope.get("extensions", {}):
        body = {"error": error.detail}
        await websocket.send_denial_response(JSONResponse(body, status_code=error.status_code))
    else:
        await websocket.close(code=1008)


def error_frame(code: str, pointer: str, message: str, *, frame: int) -> dict[str, Any]:
    """``{"error": {code, pointer, message, frame}}``: names the field, never its value.

    Args:
        code: the refusal code.
        pointer: the JSON pointer of the field (``""``: none).
        message: why, naming fields, never values.
        frame: the frame answered (from 1).
    """
    return websocket_refusal(code, pointer, message, frame=frame)


class _Connection:
    """One accepted connection: the authority's events out, decisions in, replies out."""

    def __init__(
        self,
        websocket: WebSocket,
        authority: ApprovalAuthority,
        authenticated: Authenticated,
        *,
        snapshot: Callable[[], Awaitable[ApprovalSnapshot]],
        max_bytes: int,
        poll_interval: float,
        resolved: Callable[[str], None],
        reauthenticate: Callable[[], Awaitable[Authenticated]],
        reauth_interval: float,
        max_age: float | None,
    ) -> None:
        self.websocket = websocket
        self.reauthenticate = reauthenticate
        self.reauth_interval = reauth_interval
        self.closes_at = None if max_age is None else time.monotonic() + max_age
        self._checked_at = time.monotonic()
        self.authority = authority
        self.actor = authenticated.actor
        self.principal = authenticated.principal
        self.visible = EventFilter(authority, self.principal)
        self.snapshot = snapshot
        self.max_bytes = max_bytes
        self.poll_interval = poll_interval
        self.resolved = resolved
        self.replies = ReplyStream("aais-langgraph.ws")
        self._frames = 0
        self._sending = asyncio.Lock()

    async def serve(self, after: int | None) -> None:
        """Until the client leaves (or the events fail): both directions at once."""
        tasks = {
            asyncio.create_task(self._events(after)),
            asyncio.create_task(self._decisions()),
        }
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                error = task.exception()
                if error is None or isinstance(error, WebSocketDisconnect) or self._gone():
                    continue
                if isinstance(error, LedgerIntegrityError):
                    close = websocket_close_code("aais.ledger_integrity")
                    await self._close(close, "the ledger failed its integrity checks")
                else:
                    logger.error("websocket connection failed", exc_info=error)
                    await self._close(1011, "internal error")
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with suppress(asyncio.CancelledError, Exception):
                    await task

    # -- the authority's stream ---------------------------------------------------------

    async def _events(self, after: int | None) -> None:
        await self.visible.aescalated()  # escalations from here on, before the snapshot
        last = after
        if last is not None:
            page = await self.authority.aevents_after(last, limit=1)
            if page.gap or last > page.last_sequence:
                await self._gap(last, page.last_sequence)
                last = None
        if last is None:
            last = await self._snapshot()
        follower = EventFollower(self.authority, last)
        while True:
            now = time.monotonic()
            too_old = self.closes_at is not None and now >= self.closes_at
            if (too_old or now - self._checked_at >= self.reauth_interval) and not (
                await self._still_signed_in()
            ):
                return
            for envelope in await self.visible.aescalated():
                await self._send(self.replies.shown(envelope, now=self.authority.clock()))
            page = await follower.aread()
            if page.gap:
                await self._gap(follower.last, page.last_sequence)
                follower = EventFollower(self.authority, await self._snapshot())
                continue
            for envelope in await self.visible.akeep(page.events):
                await self._send(envelope)
            if not follower.full:
                await asyncio.sleep(self.poll_interval)

    async def _snapshot(self) -> int:
        current = await self.snapshot()
        text = await asyncio.to_thread(envelope_text, current)  # request texts written once
        async with self._sending:
            await self.websocket.send_text(text)
        return current.snapshot.as_of_sequence

    async def _gap(self, after: int, last: int) -> None:
        await self._send({"gap": {"after_sequence": after, "last_sequence": last}})

    # -- decisions ----------------------------------------------------------------------

    async def _decisions(self) -> None:
        while True:
            message = await self.websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            text, data = message.get("text"), message.get("bytes")
            size = len(text.encode()) if text is not None else len(data or b"")
            if size > self.max_bytes:
                await self._close(CLOSE_TOO_LARGE, f"frames are limited to {self.max_bytes} bytes")
                return
            self._frames += 1
            if not await self._still_signed_in():
                return  # closed 1008: nothing recorded
            if text is None:
                reply = error_frame(
                    "aais.binary_frame",
                    "",
                    "/: send each envelope as a text frame",
                    frame=self._frames,
                )
            else:
                reply = await self._decide(text, self._frames)
            await self._send(reply)

    async def _decide(self, text: str, frame: int) -> dict[str, Any]:
        try:
            decided, resolved = await arecord_decision(self.authority, text, self.principal)
        except DecisionRefused as refused:
            return error_frame(refused.code, refused.pointer, refused.message, frame=frame)
        except LedgerIntegrityError as error:
            return error_frame("aais.ledger_integrity", "", str(error), frame=frame)
        if resolved.resolution.outcome in (*TERMINAL, "conflict"):
            # A conflict names what is recorded: a thread still paused on it resumes too.
            self.resolved(decided.decision.request_id)
        return self.replies.reply(resolved, {"frame": frame, "decision_id": decided.decision.id})

    async def _still_signed_in(self) -> bool:
        """Authenticate the actor again (and check the connection's age); close 1008 and
        return False when the login ended, changed, or the connection is too old."""
        self._checked_at = time.monotonic()
        if self.closes_at is not None and self._checked_at >= self.closes_at:
            await self._close(CLOSE_POLICY, "the connection reached its maximum age")
            return False
        try:
            current = await self.reauthenticate()
        except HTTPException:
            await self._close(CLOSE_POLICY, "the session ended; sign in again")
            return False
        if current.actor.id != self.actor.id:
            await self._close(CLOSE_POLICY, "the session now names another actor")
            return False
        return True

    # -- the socket ---------------------------------------------------------------------

    async def _send(self, document: Mapping[str, Any]) -> None:
        text = json.dumps(document, separators=(",", ":"), ensure_ascii=False)
        async with self._sending:
            await self.websocket.send_text(text)

    def _gone(self) -> bool:
        """Whether either side has closed (a failed send then only means that)."""
        disconnected = WebSocketState.DISCONNECTED
        return disconnected in (self.websocket.client_state, self.websocket.application_state)

    async def _close(self, code: int, reason: str) -> None:
        if self.websocket.application_state is WebSocketState.CONNECTED:
            async with self._sending:
                with suppress(Exception):
                    await self.websocket.close(code=code, reason=reason)

"""The approval inbox page and the two read-only helpers it needs.

- ``GET /`` -> the page; ``GET /inbox/static/{name}`` -> its scripts and style
  (shipped in the package, nothing fetched from elsewhere; a strict CSP says so);
- ``GET /aais-client.js`` -> the dependency-free ES module that turns an interrupt and
  an offered choice into the resume entry (the page uses it too); any origin may load it;
- ``GET /inbox/config`` -> where the AG-UI and AAIS endpoints are, who you are, and
  whether the served graph takes chat messages (``chat``: a ``messages`` channel; the
  page shows the approvals only when it does not);
- ``GET /inbox/explanations/{request_id}`` -> the authority's plain-language
  explanation of every offered choice's scope constraints
  (:func:`~aais_langgraph.authority.explain_constraints`), which the AAIS
  snapshot has no field for, and what the signed-in user may do with the request
  (approve, deny, cancel: allowed, or the reason not); 404 for a request they may
  not see;
- ``GET /inbox/threads/{thread_id}`` -> a thread's messages (AG-UI shape), its
  open approval interrupts and whether its run has settled, so the chat can
  follow a run that another presenter resumed; cut to what the signed-in user may
  see (:mod:`aais_agui.thread_views`), and for a thread they may not see at all,
  the answer an unknown thread gets.

Everything but the static files needs an authenticated actor.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from importlib import resources
from typing import Any

from ag_ui_langgraph.utils import langchain_messages_to_agui
from fastapi import APIRouter, Request
from fastapi.responses import Response

from aais_langgraph.authority import HIDDEN_REQUEST, Verb, explain_constraints
from aais_langgraph.threads import ThreadView

from ..service import ApprovalService
from ..thread_views import visible_messages
from .limits import MAX_CLIENT_ID_LENGTH, id_too_long
from .refusals import refused
from .security import Security

_ASSETS = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "chat.js": "text/javascript; charset=utf-8",
    "cards.js": "text/javascript; charset=utf-8",
    "common.js": "text/javascript; charset=utf-8",
    "standing.js": "text/javascript; charset=utf-8",
    "sign_in.js": "text/javascript; charset=utf-8",
    "aais-client.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
}
_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
#: Headers of every page and asset: the strict CSP (nothing from elsewhere, no inline code).
SECURITY_HEADERS = {
    "Content-Security-Policy": _CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


CLIENT_MODULE_PATH = "/aais-client.js"
"""Where the client helper module is served (stable; ``import ... from "/aais-client.js"``)."""


def _asset(name: str, **extra: str) -> Response:
    body = resources.files("aais_agui").joinpath("static").joinpath(name).read_bytes()
    return Response(body, media_type=_ASSETS[name], headers={**SECURITY_HEADERS, **extra})


def _check_id(name: str, value: str) -> None:
    if id_too_long(value):
        message = f"/path/{name}: ids are limited to {MAX_CLIENT_ID_LENGTH} characters"
        raise refused("aais.id_too_long", message)


def takes_messages(graph: Any) -> bool:
    """Whether ``graph``'s state has a ``messages`` channel (a chat the page can hold)."""
    channels = getattr(graph, "channels", None)
    return isinstance(channels, Mapping) and "messages" in channels


def inbox_router(
    service: ApprovalService,
    security: Security,
    *,
    agent_path: str = "/agent",
    approvals_prefix: str = "/approvals",
    title: str = "AAIS approvals",
) -> APIRouter:
    """The inbox routes of ``service``; mount at the app root (the page lives at ``/``).

    Args:
        service: the served process: its driver, authority and settings.
        security: who the request's actor is.
        agent_path: the AG-UI endpoint the page talks to.
        approvals_prefix: where the AAIS profile routes are mounted.
        title: the page's title.
    """
    router = APIRouter()
    graph, authority = service.graph, service.authority

    @router.get("/", include_in_schema=False)
    async def page() -> Response:
        return _asset("index.html")

    @router.get(CLIENT_MODULE_PATH, include_in_schema=False)
    async def client_module() -> Response:
        # A public, credential-free file: module scripts on other origins need CORS to load it.
        return _asset("aais-client.js", **{"Access-Control-Allow-Origin": "*"})

    @router.get("/inbox/static/{name}", include_in_schema=False)
    async def static(name: str) -> Response:
        if name not in _ASSETS or name == "index.html":
            raise refused("inbox.not_found", "no such file")
        return _asset(name)

    @router.get("/inbox/config")
    async def config(request: Request) -> dict[str, Any]:
        authenticated = await security.actor(request)
        return {
            "title": title,
            "agent_path": agent_path,
            "approvals_prefix": approvals_prefix,
            "actor": authenticated.actor.to_json(),
            "csrf": authenticated.cookie_session,
            "chat": takes_messages(graph),
        }

    @router.get("/inbox/explanations/{request_id}")
    async def explanations(request_id: str, request: Request) -> dict[str, Any]:
        viewer = (await security.actor(request)).principal
        _check_id("request_id", request_id)
        requested = await authority.aget_request(request_id)
        # A request the viewer may not see is answered as if it did not exist.
        if requested is None or not await authority.access.amay_view(viewer, request_id):
            raise refused("aais.unknown_request", "no such approval request")
        stored = await authority.aget_stored_request(request_id)
        permissions: dict[str, Any] = {}
        if stored is not None:
            for kind in ("approve", "deny", "cancel"):
                verb: Verb = "cancel" if kind == "cancel" else "decide"
                # Off the loop: a request the policy escalates reads its escalation.
                resource = await asyncio.to_thread(
                    authority.access.resource_of, stored, requested.request, decision=kind
                )
                allowed = await authority.access.apermits(viewer, verb, resource)
                permissions[kind] = {"allowed": allowed.allowed, "reason": allowed.reason}
        return {
            "request_id": request_id,
            # What the signed-in user may press on this card, and why not (the page
            # disables the rest; the authority refuses them anyway).
            "permissions": permissions,
            "choices": [
                {
                    "decision": choice.decision,
                    "scope": choice.scope,
                    "explanation": explain_constraints(choice.scope_constraints or {}),
                }
                for choice in requested.request.choices
            ],
        }

    @router.get("/inbox/threads/{thread_id}")
    async def thread(thread_id: str, request: Request) -> dict[str, Any]:
        viewer = (await security.actor(request)).principal
        _check_id("thread_id", thread_id)
        access = await authority.access.athread_access(viewer, thread_id)
        if not access.visible:
            # Answered as a thread nobody started: whether it exists is not told.
            return {"thread_id": thread_id, "messages": [], "interrupts": [], "settled": True}
        state = await graph.aget_state({"configurable": {"thread_id": thread_id}})
        values = state.values if isinstance(state.values, dict) else {}
        messages = visible_messages(
            langchain_messages_to_agui(list(values.get("messages") or [])), access
        )
        waiting = ThreadView.of(state).interrupts
        interrupts: list[dict[str, Any]] = []
        for request_id, interrupt_id in waiting.items():
            if access.trusted or request_id in access.shown:
                interrupts.append({"interrupt_id": interrupt_id, "request_id": request_id})
            elif access.content:
                interrupts.append(
                    {"interrupt_id": interrupt_id, "request_id": None, "summary": HIDDEN_REQUEST}
                )
        return {
            "thread_id": thread_id,
            "messages": [
                message.model_dump(mode="json", by_alias=True, exclude_none=True)
                for message in messages
            ],
            "interrupts": interrupts,
            "settled": bool(state.interrupts) or not state.next,
        }

    return router

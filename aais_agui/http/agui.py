"""The AG-UI endpoint: ``POST {path}`` runs or resumes a thread and streams AG-UI events.

The body is checked for duplicate object keys in its raw text before pydantic
decodes it (pydantic, like ``json``, keeps the last of them): a repeated key in an
AAIS envelope of ``resume[]`` is refused as the AAIS HTTP profile refuses it
(``422 aais.invalid_envelope``, naming the JSON pointer), one anywhere else as
``422 agui.invalid_input``. Nothing is recorded or run.

Every ``RUN_STARTED`` it streams declares ``protocolVersion`` (``ag_ui.core.PROTOCOL_VERSION``).

Mountable alone: ``app.include_router(agui_router(agent, security))``.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

from ag_ui.core import PROTOCOL_VERSION, BaseEvent, EventType, RunAgentInput
from ag_ui.encoder import EventEncoder
from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse
from pydantic import ValidationError

from aais_langgraph.protocol import AAISValidationError, check_unique_keys

from ..agent import AAISLangGraphAgent
from .limits import MAX_CLIENT_ID_LENGTH, oversized_id
from .refusals import refused
from .security import Security

# Where a resume entry carries an AAIS envelope (``payload`` or ``metadata``).
_ENVELOPE_POINTER = re.compile(r"/resume/[0-9]+/(payload|metadata)(/|$)")


def agui_router(
    agent: AAISLangGraphAgent, security: Security, *, path: str = "/agent"
) -> APIRouter:
    """Routes: ``POST {path}`` (AG-UI run), ``GET {path}/capabilities``, ``GET {path}/health``."""
    router = APIRouter()
    base = path.rstrip("/")

    @router.post(path or "/")
    async def run_agent(request: Request) -> StreamingResponse:
        authenticated = await security.state_change(request)
        body = await security.read_body(request)
        _refuse_duplicate_keys(body)
        try:
            run_input = RunAgentInput.model_validate_json(body)
        except ValidationError as error:
            first = error.errors(include_input=False, include_url=False)[0]
            location = "/" + "/".join(str(part) for part in first["loc"])
            raise refused("agui.invalid_input", f"{location}: {first['msg']}") from None
        oversized = oversized_id(run_input)
        if oversized is not None:
            message = f"{oversized}: ids are limited to {MAX_CLIENT_ID_LENGTH} characters"
            raise refused("agui.id_too_long", message)
        runner = agent.with_actor(authenticated.principal)
        runner.page_origin = request.headers.get("origin")  # checked by security.state_change
        encoder = EventEncoder(accept=request.headers.get("accept", "text/event-stream"))

        async def events() -> AsyncIterator[str]:
            async for event in runner.run(run_input):
                yield encoder.encode(declare_protocol_version(event))

        return StreamingResponse(
            events(),
            media_type=encoder.get_content_type(),
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    @router.get(f"{base}/capabilities")
    async def capabilities(request: Request) -> dict[str, Any]:
        await security.actor(request)
        return agent.get_capabilities()

    @router.get(f"{base}/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "agent": {"name": agent.name}}

    return router


def declare_protocol_version(event: BaseEvent) -> BaseEvent:
    """``RUN_STARTED`` with ``protocolVersion`` (AG-UI 1.0 versioning: a producer MUST send its
    declaration on the event that opens a run; ag-ui-protocol leaves it ``None``)."""
    if event.type == EventType.RUN_STARTED and getattr(event, "protocol_version", 1) is None:
        return event.model_copy(update={"protocol_version": PROTOCOL_VERSION})
    return event


def _refuse_duplicate_keys(body: bytes) -> None:
    """422 at the first repeated object key of the raw body (see the module docstring)."""
    try:
        check_unique_keys(body)
    except AAISValidationError as error:
        if error.pointer == "":
            return  # not JSON: pydantic reports it with its own location
        envelope = _ENVELOPE_POINTER.match(error.pointer) is not None
        code = "aais.invalid_envelope" if envelope else "agui.invalid_input"
        raise refused(code, str(error)) from None

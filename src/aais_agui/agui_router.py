"""The AG-UI endpoint: ``POST {path}`` runs or resumes a thread and streams AG-UI events.

Mountable alone: ``app.include_router(agui_router(agent, security))``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from ag_ui.core import RunAgentInput
from ag_ui.encoder import EventEncoder
from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import StreamingResponse
from pydantic import ValidationError

from .agent import AAISLangGraphAgent
from .limits import MAX_CLIENT_ID_LENGTH, oversized_id
from .security import Security


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
        try:
            run_input = RunAgentInput.model_validate_json(body)
        except ValidationError as error:
            first = error.errors(include_input=False, include_url=False)[0]
            location = "/" + "/".join(str(part) for part in first["loc"])
            raise HTTPException(
                422, {"code": "agui.invalid_input", "message": f"{location}: {first['msg']}"}
            ) from None
        oversized = oversized_id(run_input)
        if oversized is not None:
            message = f"{oversized}: ids are limited to {MAX_CLIENT_ID_LENGTH} characters"
            raise HTTPException(422, {"code": "agui.id_too_long", "message": message})
        runner = agent.with_actor(authenticated.actor)
        encoder = EventEncoder(accept=request.headers.get("accept", "text/event-stream"))

        async def events() -> AsyncIterator[str]:
            async for event in runner.run(run_input):
                yield encoder.encode(event)

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

"""A refusal in HTTP's words: the status and ``{"code", "message"}`` body the catalogue gives.

Every router raises :func:`refused` for an ``aais.*`` refusal, so the status of a code
is written once (:data:`aais_langgraph.protocol.REFUSALS`); the app's error handler
wraps the body as ``{"error": {...}}``.
"""

from __future__ import annotations

from fastapi import HTTPException
from fastapi.responses import JSONResponse

from aais_langgraph.protocol import http_refusal

__all__ = ["refusal_response", "refused"]


def refused(code: str, message: str, *, headers: dict[str, str] | None = None) -> HTTPException:
    """The ``HTTPException`` of refusal ``code``: the catalogue's status, the code and the
    message (which names fields and rules, never a value)."""
    status, body = http_refusal(code, message)
    return HTTPException(status_code=status, detail=body, headers=headers)


def refusal_response(code: str, message: str) -> JSONResponse:
    """The ``{"error": {"code", "message"}}`` response of refusal ``code``, for an error
    handler that answers without raising."""
    status, body = http_refusal(code, message)
    return JSONResponse({"error": body}, status_code=status)

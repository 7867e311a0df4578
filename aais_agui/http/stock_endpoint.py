"""The FastAPI dependency that lets ag-ui-langgraph's stock endpoint serve our agent.

``add_langgraph_fastapi_endpoint(app, agent, path, dependencies=[...])`` (ag-ui-langgraph's
``endpoint.py``) clones the agent per request and runs it; it authenticates nobody, so
an :class:`~aais_agui.AAISLangGraphAgent` it serves has no actor and refuses every
answer. :func:`stock_endpoint_dependency` applies to that route the checks of this
package's own AG-UI route (:mod:`aais_agui.http.agui`), in its order: Origin and
fetch metadata, ``Content-Type: application/json``, the authenticated actor, CSRF for
cookie sessions, the body size, duplicate object keys and over-long ids. It then vouches
for the principal (:mod:`aais_agui.vouched_actor`), and the agent's ``clone()`` for the
request answers approvals as that principal, never as a body's actor.

FastAPI reads the body before it runs a route's dependencies, so an oversized body is
refused (413, nothing run) only after it was received; put a body limit in the proxy
in front as well, or serve with :func:`~aais_agui.create_app`, which stops reading at
the limit.
"""

from __future__ import annotations

from ag_ui.core import RunAgentInput
from fastapi import Depends, Request, params
from pydantic import ValidationError

from ..vouched_actor import vouch_for
from .agui import _refuse_duplicate_keys
from .limits import MAX_CLIENT_ID_LENGTH, oversized_id
from .refusals import refused
from .security import Security

__all__ = ["stock_endpoint_dependency"]


def stock_endpoint_dependency(security: Security) -> params.Depends:
    """``Depends(...)`` for ``add_langgraph_fastapi_endpoint(..., dependencies=[it])``:
    the request checks of :func:`~aais_agui.agui_router` under ``security``, and the
    authenticated principal handed to the agent clone that serves the request."""

    async def authenticated_run(request: Request) -> None:
        authenticated = await security.state_change(request)
        body = await security.read_body(request)
        _refuse_duplicate_keys(body)
        try:
            run_input = RunAgentInput.model_validate_json(body)
        except ValidationError:
            run_input = None  # FastAPI refuses the body itself, naming the field (422)
        oversized = None if run_input is None else oversized_id(run_input)
        if oversized is not None:
            message = f"{oversized}: ids are limited to {MAX_CLIENT_ID_LENGTH} characters"
            raise refused("agui.id_too_long", message)
        vouch_for(authenticated.principal, origin=request.headers.get("origin"))

    dependency: params.Depends = Depends(authenticated_run)
    return dependency

"""LangGraph Server custom auth for the example: who is calling, from a bearer token.

LangGraph Server runs this handler on every request (``"auth"`` in
``langgraph.json``) and puts the user it returns in the run's reserved
``config["configurable"]["langgraph_auth_user"]``, which clients cannot set.
The approval gate records that user as the actor of a decision, whatever the
decision's body names (``identity`` -> actor id, type ``human``). Without an
``"auth"`` entry the gate refuses decisions sent with ``command={"resume": ...}``.

The ``create_run`` handler makes Agent Chat UI's "Mark as Resolved" (a run sent to its
end without an answer) cancel the thread's pending approvals as the caller, with who
and why, instead of leaving them pending until they expire.

The token table is for the example (``AAIS_EXAMPLE_TOKENS``, ``token=identity``
pairs separated by commas); a deployment verifies its identity provider's
tokens here instead.
"""

from __future__ import annotations

import hmac
import os

from langgraph_sdk import Auth

from aais_langgraph.authority import ForbiddenError
from aais_langgraph.tools.langchain_ui import acancel_marked_resolved

auth = Auth()


def _tokens() -> dict[str, str]:
    pairs = os.environ.get("AAIS_EXAMPLE_TOKENS", "")
    table: dict[str, str] = {}
    for pair in filter(None, (part.strip() for part in pairs.split(","))):
        token, _, identity = pair.partition("=")
        if token and identity:
            table[token] = identity
    return table


@auth.authenticate
async def authenticate(authorization: str | None) -> Auth.types.MinimalUserDict:
    scheme, _, presented = (authorization or "").partition(" ")
    if scheme.lower() == "bearer" and presented:
        for token, identity in _tokens().items():
            if hmac.compare_digest(token.encode(), presented.strip().encode()):
                return {"identity": identity, "display_name": identity.title()}
    raise Auth.exceptions.HTTPException(status_code=401, detail="missing or unknown bearer token")


@auth.on.threads.create_run
async def on_run(ctx: Auth.types.AuthContext, value: Auth.types.RunsCreate) -> None:
    try:
        await acancel_marked_resolved(ctx.user, value)  # type: ignore[arg-type]
    except ForbiddenError as error:
        raise Auth.exceptions.HTTPException(status_code=403, detail=str(error)) from None

"""The actor an outer HTTP endpoint authenticated, handed to the agent it clones for that request.

ag-ui-langgraph's stock endpoint builds each request's agent with ``agent.clone()`` and
passes nothing else; a FastAPI dependency that authenticated the request
(:func:`aais_agui.http.stock_endpoint.stock_endpoint_dependency`) vouches for its principal
here, and :meth:`aais_agui.AAISLangGraphAgent.clone` claims it. A claim is taken once: the
first clone in that request's context gets it, no later clone (nor a later request that
shares the context, as an in-process ASGI transport does) sees it again.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass

from aais_langgraph.authority import Principal

__all__ = ["VouchedActor", "claim_vouched_actor", "vouch_for"]


@dataclass
class VouchedActor:
    """Who the request's channel authenticated, and the page origin it came from."""

    principal: Principal
    origin: str | None
    claimed: bool = False


_VOUCHED: ContextVar[VouchedActor | None] = ContextVar("aais_vouched_actor", default=None)


def vouch_for(principal: Principal, *, origin: str | None) -> None:
    """Record ``principal`` as the authenticated actor of the request being served."""
    _VOUCHED.set(VouchedActor(principal, origin))


def claim_vouched_actor() -> VouchedActor | None:
    """The request's vouched actor, once; None when there is none or it was claimed."""
    vouched = _VOUCHED.get()
    if vouched is None or vouched.claimed:
        return None
    vouched.claimed = True
    return vouched

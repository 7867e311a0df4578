"""Grants: standing approvals from ``session``/``persistent`` choices, and matching them."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from ..ledger import Grant, Ledger
from ..protocol import AAISValidationError, Action, Decision, Origin, Request, new_id
from .constraints import constraints_match, grant_expiry


def grant_from_decision(request: Request, decision: Decision, now: datetime) -> Grant | None:
    """The grant an approved session/persistent choice records (None for ``once``).

    A grant is always limited to the request's action name unless the offered
    constraints name one, and to the request's session for ``session`` scope. A
    malformed expiry constraint yields a grant that never applies: the approval of
    this one action stands, later actions ask again.
    """
    if decision.scope == "once":
        return None
    choice = request.offers(decision.decision, decision.scope)
    constraints = dict(choice.scope_constraints or {}) if choice is not None else {}
    try:
        expiry: datetime | None = grant_expiry(constraints, now)
    except AAISValidationError:
        expiry = now
    return Grant(
        grant_id=new_id("grant"),
        request_id=request.id,
        scope=decision.scope,
        session_id=request.origin.session_id,
        action_name=str(constraints.get("action_name", request.action.name)),
        constraints=constraints,
        created_at=now.timestamp(),
        expires_at=None if expiry is None else expiry.timestamp(),
    )


def find_grant(
    ledger: Ledger,
    action: Action,
    origin: Origin,
    *,
    now: datetime,
    vouch: Callable[[Grant], Grant] = lambda grant: grant,
    granted_for: Callable[[Grant], str | None] = lambda grant: None,
    requester: str | None = None,
) -> Grant | None:
    """A live, unrevoked grant whose constraints cover ``action`` in ``origin``'s session,
    made for ``requester``'s runs.

    ``vouch`` checks each candidate before it is trusted (raising if it cannot be);
    ``granted_for`` says who the request that made a grant acted for: a grant made for
    one person covers only runs acting for that person (the author of the message the
    run answers), never a run someone else sent on the same thread or session.

    Args:
        ledger: where grants are stored.
        action: the action about to run.
        origin: where it runs (its session scopes the grant).
        now: the moment a grant must be live at.
        vouch: checks a candidate before it is trusted (raises when it cannot).
        granted_for: whom the request that made a grant acted for.
        requester: whom the run acts for.
    """
    instant = now.timestamp()
    for candidate in ledger.list_grants(session_id=origin.session_id, action_name=action.name):
        grant = vouch(candidate)
        if grant.expires_at is not None and instant >= grant.expires_at:
            continue
        if grant.scope == "session" and grant.session_id != origin.session_id:
            continue
        if not constraints_match({"action_name": grant.action_name, **grant.constraints}, action):
            continue
        owner = granted_for(grant)
        if owner is None or owner == requester:
            return grant
    return None

"""The one judgement of an answer against its request: pure, no I/O, every channel's.

:func:`judge` decides what a decision is worth for the request it names; the
authority records what it says, and every channel that checks an answer before
the authority (the gate's validation of a resume value, the AG-UI resume
planner, the presenter bindings) asks it too, so no two channels judge alike
in different orders.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Literal

from ..ledger.records import StoredRequest
from ..protocol import Action, Decision, Outcome, Request, parse_timestamp, same_action

__all__ = ["MESSAGES", "TERMINAL", "Judgement", "Rule", "effective_expiry", "judge", "same_action"]

MESSAGES: dict[str, str] = {
    "approved": "Approved.",
    "denied": "Denied.",
    "cancelled": "Cancelled.",
    "expired": "The request expired before a decision arrived.",
    "stale_decision": "The decision does not match the requested action digest.",
    "stale_action": "The action changed after it was presented.",
    "invalid_choice": "The selected decision and scope were not offered.",
    "conflict": "The request was already resolved by a different decision.",
    "other_request": "The decision is for another request.",
}

#: Outcomes that end a request. ``stale`` for a forged or outdated decision digest
#: and ``invalid`` are answers the requester's decision got wrong: they are returned
#: but not recorded, so a correct decision can still answer the request.
TERMINAL: frozenset[str] = frozenset({"approved", "denied", "cancelled", "expired"})


Rule = Literal["request", "expired", "digest", "action", "choice", "policy", "ok"]
"""Which check a judgement turned on (``ok``: every check passed)."""


@dataclass(frozen=True)
class Judgement:
    """The outcome of one decision, whether it ends the request, and the check it turned
    on: ``rule`` and ``pointer`` (the field of the ``approval.decided`` envelope at fault,
    empty when none) let each channel answer in its own words and codes."""

    outcome: Outcome
    message: str
    terminal: bool
    rule: Rule = "ok"
    pointer: str = ""

    @property
    def passed(self) -> bool:
        """True when no check refused the decision (its outcome may still be a denial)."""
        return self.rule == "ok"


def effective_expiry(request: Request | StoredRequest, default_lifetime_seconds: float) -> datetime:
    """When a request expires: its ``expires_at``, or ``created_at`` + the default lifetime
    when it has none. The one rule for every reader; a stored row's indexed ``expires_at``
    column stands for the envelope's, so the inbox need not parse each envelope."""
    if isinstance(request, StoredRequest):
        if request.expires_at is not None:
            return datetime.fromtimestamp(request.expires_at, tz=timezone.utc)
        created_at = str(request.envelope["request"]["created_at"])
    else:
        if request.expires_at is not None:
            return parse_timestamp(request.expires_at)
        created_at = request.created_at
    return parse_timestamp(created_at) + timedelta(seconds=default_lifetime_seconds)


def judge(
    request: Request,
    decision: Decision,
    *,
    now: datetime | None,
    expires_at: datetime | None,
    current_action: Action | None = None,
    policy_objection: str | None = None,
) -> Judgement:
    """The one judgement of an answer against its request, every channel's: the
    authority's decide, the gate's validation of a resume value, the AG-UI and
    presenter pre-checks.

    Applies the checks in spec order (SPEC §4.2, §9): the decision names this
    request, expiry by the authority's clock (skipped when ``now`` is None: a check
    before the authority's), the decision's digest, the digest of the action about
    to run (``current_action``, time of use), the offered choice, and the policy
    (``policy_objection``, for approvals). The digest comparison exists only here.
    """
    if decision.request_id != request.id:
        return Judgement(
            "invalid", MESSAGES["other_request"], False, "request", "/decision/request_id"
        )
    if now is not None and expires_at is not None and now >= expires_at:
        return Judgement("expired", MESSAGES["expired"], True, "expired", "/decision")
    if not same_action(request.action_digest, decision.action_digest):
        return Judgement(
            "stale", MESSAGES["stale_decision"], False, "digest", "/decision/action_digest"
        )
    if current_action is not None and not same_action(request.action_digest, current_action):
        return Judgement("stale", MESSAGES["stale_action"], True, "action", "/current_action")
    if request.offers(decision.decision, decision.scope) is None:
        return Judgement("invalid", MESSAGES["invalid_choice"], False, "choice", "/decision")
    if decision.decision == "approve":
        if policy_objection is not None:
            return Judgement("invalid", policy_objection, False, "policy", "/decision")
        return Judgement("approved", MESSAGES["approved"], True)
    if decision.decision == "deny":
        return Judgement("denied", MESSAGES["denied"], True)
    return Judgement("cancelled", MESSAGES["cancelled"], True)

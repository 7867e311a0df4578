"""The one judgement of an answer against its request: pure, no I/O, every channel's.

:func:`judge` decides what a decision is worth for the request it names; the
authority records what it says, and every channel that checks an answer before
the authority (the gate's validation of a resume value, the AG-UI resume
planner, the presenter bindings) asks it too, so no two channels judge alike
in different orders.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Literal

from ..ledger.records import StoredRequest
from ..protocol import Action, Decision, Outcome, Request, parse_timestamp, same_action

__all__ = [
    "MESSAGES",
    "ORDER",
    "TERMINAL",
    "Judgement",
    "Rule",
    "effective_expiry",
    "judge",
    "same_action",
]

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

ORDER: tuple[Rule, ...] = ("request", "expired", "digest", "action", "choice")
"""The checks of :func:`judge`, in the order its outcome follows (SPEC §4.2, §9)."""


@dataclass(frozen=True)
class Judgement:
    """The outcome of one decision, whether it ends the request, and the check it turned
    on: ``rule`` and ``pointer`` (the field of the ``approval.decided`` envelope at fault,
    empty when none) let each channel answer in its own words and codes; ``broken`` lists
    every check the decision failed, in :data:`ORDER` (``rule`` is its first)."""

    outcome: Outcome
    message: str
    terminal: bool
    rule: Rule = "ok"
    pointer: str = ""
    broken: tuple[Rule, ...] = ()

    @property
    def passed(self) -> bool:
        """True when no check refused the decision (its outcome may still be a denial)."""
        return self.rule == "ok"

    def first_of(self, rules: Sequence[Rule]) -> Rule:
        """The first of ``rules`` the decision broke (a channel that names some checks
        before others, e.g. a forged digest before an expiry), else :attr:`rule`."""
        return next((rule for rule in rules if rule in self.broken), self.rule)


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
) -> Judgement:
    """The one judgement of an answer against its request, every channel's: the
    authority's decide, the gate's validation of a resume value, the AG-UI and
    presenter pre-checks.

    Makes every check, in :data:`ORDER` (SPEC §4.2, §9): the decision names this
    request, expiry by the authority's clock (skipped when ``now`` is None: a check
    before the authority's), the decision's digest, the digest of the action about
    to run (``current_action``, time of use), the offered choice. The outcome is the
    first check's that failed; ``broken`` names them all, so a channel asks once. The
    authority's policy is asked after a passed judgement (it may object to any
    decision). The digest comparison exists only here.

    Args:
        request: the request the answer is for.
        decision: the answer's decision.
        now: the authority's clock now (None: expiry is not checked).
        expires_at: the request's effective expiry (None: no expiry check).
        current_action: the action about to run, checked against the digest at time of use.
    """
    failed: list[tuple[Rule, Outcome, str, bool, str]] = []
    if decision.request_id != request.id:
        failed.append(
            ("request", "invalid", MESSAGES["other_request"], False, "/decision/request_id")
        )
    if now is not None and expires_at is not None and now >= expires_at:
        failed.append(("expired", "expired", MESSAGES["expired"], True, "/decision"))
    if not same_action(request.action_digest, decision.action_digest):
        failed.append(
            ("digest", "stale", MESSAGES["stale_decision"], False, "/decision/action_digest")
        )
    if current_action is not None and not same_action(request.action_digest, current_action):
        failed.append(("action", "stale", MESSAGES["stale_action"], True, "/current_action"))
    if request.offers(decision.decision, decision.scope) is None:
        failed.append(("choice", "invalid", MESSAGES["invalid_choice"], False, "/decision"))
    if failed:
        rule, outcome, message, terminal, pointer = failed[0]
        broken = tuple(item[0] for item in failed)
        return Judgement(outcome, message, terminal, rule, pointer, broken)
    if decision.decision == "approve":
        return Judgement("approved", MESSAGES["approved"], True)
    if decision.decision == "deny":
        return Judgement("denied", MESSAGES["denied"], True)
    return Judgement("cancelled", MESSAGES["cancelled"], True)

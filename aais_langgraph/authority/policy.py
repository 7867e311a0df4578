"""The policy hook: consulted when a request is made and again when it is decided."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal, Protocol

from ..protocol import Action, Choice, Decision, Origin, Request, Risk

Verdict = Literal["allow", "ask", "deny"]


@dataclass(frozen=True)
class PolicyVerdict:
    """What the policy says about a new action.

    ``allow`` approves without asking, ``deny`` refuses without asking, and
    ``ask`` raises a request, optionally with the policy's risk, choices and expiry.
    ``reason`` is a safe, value-free sentence recorded in the resolution.
    """

    verdict: Verdict = "ask"
    risk: Risk | None = None
    choices: Sequence[Choice] | None = None
    expires_in: timedelta | None = None
    reason: str | None = None


class ApprovalPolicy(Protocol):
    """Decides which actions need a human and which approvals stay acceptable."""

    def on_request(self, action: Action, origin: Origin) -> PolicyVerdict:
        """Called before a request is raised."""
        ...

    def on_decision(self, request: Request, decision: Decision) -> str | None:
        """Called before an approval is recorded; a returned reason makes it ``invalid``."""
        ...


class AskEveryTime:
    """The default policy: every action needs a human; every offered approval stands."""

    def on_request(self, action: Action, origin: Origin) -> PolicyVerdict:
        return PolicyVerdict("ask")

    def on_decision(self, request: Request, decision: Decision) -> str | None:
        return None

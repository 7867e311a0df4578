"""Quorum: an action that runs only after several distinct people approved it.

SPEC §10 leaves quorum to the runtime, as separate requests. When the authority's
authorizer asks for n approvals (:meth:`~aais_langgraph.authority.Access.quorum`,
an access policy rule's ``quorum = n``), the gate asks n times in a row, one AAIS
request each, every one bound to the same action digest and resolved on its own:

- each request carries the :data:`~aais_langgraph.protocol.extensions.QUORUM_EXTENSION`
  (``index`` of ``of``, the first request's id, and who approved the earlier ones),
  so presenters show "approval 2 of 2, approved by carol" and the authorizer
  refuses an approval by someone who already gave one;
- only the last approval may execute the action (it alone takes the execution
  claim and is checked at time of use); the first refusal (deny, cancel, expiry)
  ends the quorum, and no further request is made;
- every approval is its own resolution, so the audit shows each one.

Quorum requests offer only one-time choices: a session or persistent grant from one
approver would let later actions skip the others.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..authority import ApprovalAuthority
from ..protocol import Action, Choice, Request, Risk
from ..protocol.extensions import QUORUM_EXTENSION

__all__ = ["Quorum", "quorum_choices"]


@dataclass(frozen=True)
class Quorum:
    """Where one request sits in its action's quorum."""

    index: int
    of: int
    first_request_id: str | None = None
    approved_by: tuple[str, ...] = ()

    @property
    def last(self) -> bool:
        return self.index >= self.of

    def extension(self) -> dict[str, Any]:
        return {
            QUORUM_EXTENSION: {
                "index": self.index,
                "of": self.of,
                "first_request_id": self.first_request_id,
                "approved_by": list(self.approved_by),
            }
        }

    def following(self, request: Request, approver: str) -> Quorum:
        """The next approval's place, after ``approver`` approved ``request``."""
        return Quorum(
            self.index + 1,
            self.of,
            self.first_request_id or request.id,
            (*self.approved_by, approver),
        )

    @classmethod
    def of_request(cls, request: Request) -> Quorum | None:
        """The request's place in its quorum, or None (a request that needs one approval)."""
        value = (request.extensions or {}).get(QUORUM_EXTENSION)
        if not isinstance(value, Mapping):
            return None
        index, of = value.get("index"), value.get("of")
        if not isinstance(index, int) or not isinstance(of, int) or not 1 <= index <= of:
            return None
        approved = value.get("approved_by")
        first = value.get("first_request_id")
        return cls(
            index,
            of,
            first if isinstance(first, str) else None,
            tuple(a for a in approved if isinstance(a, str)) if isinstance(approved, list) else (),
        )

    @classmethod
    def first_for(
        cls, authority: ApprovalAuthority, action: Action, risk: Risk | Mapping[str, Any]
    ) -> Quorum | None:
        """The first place of a new request for ``action``, when it needs a quorum."""
        level = Risk.from_data(risk, pointer="/risk").level
        needed = authority.access.quorum(action.kind, action.name, level)
        return cls(1, needed) if needed > 1 else None


def quorum_choices(
    choices: Sequence[Choice | Mapping[str, Any]] | None,
) -> list[Choice | Mapping[str, Any]] | None:
    """``choices`` with only the one-time ones (None: the default choices, which are)."""
    if choices is None:
        return None
    kept = [
        choice
        for choice in choices
        if (choice.scope if isinstance(choice, Choice) else choice.get("scope")) == "once"
    ]
    return kept

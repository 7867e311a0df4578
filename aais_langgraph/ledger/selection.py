"""Which pending rows a listing reads: a superset of what one viewer may see, in columns.

An inbox listed for one person should cost what that person may see, not what
is pending for everyone. An authorizer describes, for one principal, a
:class:`PendingSelection`: the action kinds, names and risk levels of the rules
that let them see requests, and the requester whose own requests they see. The
ledger reads only the rows the selection admits (SQLite through indexes on those
values), and the exact authorization check then runs on those rows alone.

A selection is a *superset*: a backend may return more rows than it admits (the
Postgres ledger returns every pending row), never fewer, so a wrong or coarse
selection costs time, never a request someone may see. Patterns are ``fnmatch``
patterns (case-sensitive), as the access policy's rules are; a backend that
cannot match a pattern exactly matches its literal prefix instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from ..protocol.extensions import REQUESTER_EXTENSION

__all__ = [
    "EVERY_ROW",
    "ActionPattern",
    "PendingSelection",
    "RowFacts",
    "SelectionSubjects",
    "is_literal",
    "literal_prefix",
]

_WILDCARDS = "*?["


def literal_prefix(pattern: str) -> str:
    """The part of an ``fnmatch`` pattern before its first wildcard."""
    cut = min((i for i in (pattern.find(c) for c in _WILDCARDS) if i >= 0), default=-1)
    return pattern if cut < 0 else pattern[:cut]


def is_literal(pattern: str) -> bool:
    """Whether ``pattern`` matches exactly one string (itself)."""
    return not any(c in pattern for c in _WILDCARDS)


@dataclass(frozen=True)
class ActionPattern:
    """Requests whose action kind, name and risk level match (empty: any)."""

    kinds: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    risks: frozenset[str] = frozenset()

    @property
    def unbounded(self) -> bool:
        """Whether it matches every request."""
        return not self.kinds and not self.names and not self.risks

    def matches(self, kind: str, name: str, risk: str) -> bool:
        return (
            (not self.kinds or any(fnmatchcase(kind, k) for k in self.kinds))
            and (not self.names or any(fnmatchcase(name, n) for n in self.names))
            and (not self.risks or risk in self.risks)
        )


@dataclass(frozen=True)
class RowFacts:
    """What a selection looks at in a pending row: its action kind, name, risk level and
    requester (the request's requester extension, else its context's ``requester``)."""

    kind: str
    name: str
    risk: str
    requester: str | None

    @classmethod
    def of(cls, envelope: Mapping[str, Any], context: Mapping[str, Any]) -> RowFacts:
        """The facts of a stored ``approval.requested`` envelope and its context (values of
        the wrong type read as empty: the selection is a superset, the check is exact)."""
        request = _member(envelope, "request")
        action = _member(request, "action")
        risk = _member(request, "risk")
        requester = _member(_member(request, "extensions"), REQUESTER_EXTENSION).get("id")
        if not isinstance(requester, str):
            requester = context.get("requester")
        return cls(
            kind=_text(action.get("kind")),
            name=_text(action.get("name")),
            risk=_text(risk.get("level")),
            requester=requester if isinstance(requester, str) else None,
        )


@dataclass(frozen=True)
class PendingSelection:
    """The pending rows a listing for one viewer reads: every row, or those an action
    pattern matches or whose requester is ``requester`` (a superset of what they may see)."""

    everything: bool = False
    actions: tuple[ActionPattern, ...] = ()
    requester: str | None = None

    @property
    def unbounded(self) -> bool:
        """Whether it admits every row (nothing to select by)."""
        return self.everything or any(pattern.unbounded for pattern in self.actions)

    def admits(self, facts: RowFacts) -> bool:
        if self.unbounded:
            return True
        if self.requester is not None and facts.requester == self.requester:
            return True
        return any(p.matches(facts.kind, facts.name, facts.risk) for p in self.actions)


@dataclass(frozen=True)
class SelectionSubjects:
    """The SQL expressions (``?`` marks) that read a pending row's facts, as a backend
    indexes them: :meth:`where` is the condition a selection adds to a listing."""

    kind: str
    name: str
    risk: str
    requester: str

    def terms(self, selection: PendingSelection) -> list[tuple[str, list[Any]]]:
        """The selection's terms (a row is selected when any holds), each a condition and
        its parameters: one query per term can read the index that term selects by."""
        terms: list[tuple[str, list[Any]]] = []
        for pattern in selection.actions:
            parts: list[str] = []
            params: list[Any] = []
            for subject, patterns in ((self.kind, pattern.kinds), (self.name, pattern.names)):
                found = _matching(subject, patterns, params)
                if found is not None:
                    parts.append(found)
            if pattern.risks:
                parts.append(f"{self.risk} IN ({_marks(len(pattern.risks))})")
                params.extend(sorted(pattern.risks))
            terms.append((" AND ".join(parts) if parts else "1 = 1", params))
        if selection.requester is not None:
            terms.append((f"{self.requester} = ?", [selection.requester]))
        return terms


def _matching(subject: str, patterns: tuple[str, ...], params: list[Any]) -> str | None:
    """``subject`` matching any of ``patterns`` (literals exactly, others by their literal
    prefix: a superset); None when a pattern matches anything."""
    if not patterns:
        return None
    exact = sorted(p for p in patterns if is_literal(p))
    prefixes = sorted({literal_prefix(p) for p in patterns if not is_literal(p)})
    if "" in prefixes:
        return None
    parts = []
    if exact:
        parts.append(f"{subject} IN ({_marks(len(exact))})")
        params.extend(exact)
    for prefix in prefixes:
        parts.append(f"substr({subject}, 1, ?) = ?")
        params.extend((len(prefix), prefix))
    return "(" + " OR ".join(parts) + ")"


def _marks(count: int) -> str:
    return ", ".join(["?"] * count)


EVERY_ROW = PendingSelection(everything=True)
"""The selection of every pending row (a trusted viewer, or an authorizer that cannot say)."""


def _member(value: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    found = value.get(key) if isinstance(value, Mapping) else None
    return found if isinstance(found, Mapping) else {}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""

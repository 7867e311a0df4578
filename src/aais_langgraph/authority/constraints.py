"""The scope-constraint vocabulary: what a ``session``/``persistent`` grant covers.

A grant covers a later action only if every constraint key is known and holds.
Unknown keys never match, so a constraint this version does not understand can
only narrow a grant, never widen it.

Keys:

- ``action_name``: the action's ``name`` equals this string.
- ``action_kind``: the action's ``kind`` equals this string.
- ``arguments``: an object; each listed argument equals the given JSON value.
- ``argument_prefixes``: an object; each listed argument is a string starting
  with the given prefix.
- ``command_prefix``: shorthand for ``argument_prefixes: {"command": ...}``
  (the form the AAIS examples use).
- ``resource_prefix``: the action's ``resource`` starts with this string.
- ``working_directory``: the action's ``working_directory`` equals this string.
- ``expires_at``: RFC 3339 time after which the grant no longer applies.
- ``expires_in_seconds``: lifetime of the grant from when it is recorded.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from ..protocol import AAISValidationError, Action, parse_timestamp

KNOWN_KEYS = frozenset(
    {
        "action_name",
        "action_kind",
        "arguments",
        "argument_prefixes",
        "command_prefix",
        "resource_prefix",
        "working_directory",
        "expires_at",
        "expires_in_seconds",
    }
)


def _prefixes(constraints: Mapping[str, Any]) -> dict[str, Any]:
    prefixes = dict(constraints.get("argument_prefixes") or {})
    if "command_prefix" in constraints:
        prefixes.setdefault("command", constraints["command_prefix"])
    return prefixes


def constraints_match(constraints: Mapping[str, Any], action: Action) -> bool:
    """True only if every constraint is known and the action satisfies it."""
    if not constraints or not set(constraints) <= KNOWN_KEYS:
        return False
    checks: list[bool] = []
    if "action_name" in constraints:
        checks.append(constraints["action_name"] == action.name)
    if "action_kind" in constraints:
        checks.append(constraints["action_kind"] == action.kind)
    if "arguments" in constraints:
        expected = constraints["arguments"]
        checks.append(
            isinstance(expected, Mapping)
            and all(
                key in action.arguments and _same_json(action.arguments[key], value)
                for key, value in expected.items()
            )
        )
    prefixes = _prefixes(constraints)
    if prefixes or "argument_prefixes" in constraints:
        checks.append(
            all(
                isinstance(prefix, str)
                and isinstance(action.arguments.get(key), str)
                and action.arguments[key].startswith(prefix)
                for key, prefix in prefixes.items()
            )
        )
    if "resource_prefix" in constraints:
        prefix = constraints["resource_prefix"]
        checks.append(
            isinstance(prefix, str)
            and action.resource is not None
            and action.resource.startswith(prefix)
        )
    if "working_directory" in constraints:
        checks.append(constraints["working_directory"] == action.working_directory)
    return all(checks)


def _same_json(left: Any, right: Any) -> bool:
    # bool is an int in Python; JSON keeps them apart.
    if isinstance(left, bool) or isinstance(right, bool):
        return type(left) is type(right) and left == right
    return bool(left == right)


def grant_expiry(constraints: Mapping[str, Any], granted_at: datetime) -> datetime | None:
    """When a grant made at ``granted_at`` stops applying, or None for no time limit."""
    limits: list[datetime] = []
    if "expires_at" in constraints:
        value = constraints["expires_at"]
        if not isinstance(value, str):
            raise AAISValidationError("/scope_constraints/expires_at", "must be an RFC 3339 string")
        limits.append(parse_timestamp(value, "/scope_constraints/expires_at"))
    if "expires_in_seconds" in constraints:
        seconds = constraints["expires_in_seconds"]
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds <= 0:
            raise AAISValidationError(
                "/scope_constraints/expires_in_seconds", "must be a positive number"
            )
        limits.append(granted_at + timedelta(seconds=seconds))
    return min(limits) if limits else None


def explain_constraints(constraints: Mapping[str, Any]) -> list[str]:
    """Plain-language lines a presenter shows before a human grants this scope."""
    lines: list[str] = []
    unknown = sorted(set(constraints) - KNOWN_KEYS)
    if "action_name" in constraints:
        lines.append(f"only the action named {constraints['action_name']!r}")
    if "action_kind" in constraints:
        lines.append(f"only actions of kind {constraints['action_kind']!r}")
    for key, value in dict(constraints.get("arguments") or {}).items():
        lines.append(f"argument {key!r} exactly equal to {value!r}")
    for key, prefix in _prefixes(constraints).items():
        lines.append(f"argument {key!r} starting with {prefix!r}")
    if "resource_prefix" in constraints:
        lines.append(f"resource starting with {constraints['resource_prefix']!r}")
    if "working_directory" in constraints:
        lines.append(f"working directory exactly {constraints['working_directory']!r}")
    if "expires_at" in constraints:
        lines.append(f"until {constraints['expires_at']}")
    if "expires_in_seconds" in constraints:
        lines.append(f"for {constraints['expires_in_seconds']} seconds after approval")
    if unknown:
        lines.append(
            "unrecognised constraint(s) "
            + ", ".join(map(repr, unknown))
            + ": the grant will never apply"
        )
    return lines

"""The scope-constraint vocabulary: what a ``session``/``persistent`` grant covers.

A grant covers a later action only if every constraint key is known, well-formed
and holds. Unknown keys and malformed values never match, so a constraint this
version does not understand can only narrow a grant, never widen it.

Keys:

- ``action_name``: the action's ``name`` equals this string.
- ``action_kind``: the action's ``kind`` equals this string.
- ``arguments``: an object; each listed argument equals the given JSON value.
- ``argument_prefixes``: an object; each listed argument is a string starting
  with the given prefix.
- ``command_prefix``: the ``command`` argument is a string starting with this
  prefix (the form the AAIS examples use); checked in addition to any
  ``argument_prefixes``, so it can only narrow them.
- ``resource_prefix``: the action's ``resource`` starts with this string.
- ``working_directory``: the action's ``working_directory`` equals this string.
- ``expires_at``: RFC 3339 time after which the grant no longer applies.
- ``expires_in_seconds``: lifetime of the grant from when it is recorded.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
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


def _prefix_maps(constraints: Mapping[str, Any]) -> list[Any]:
    """Every argument-prefix map the constraints state; each must hold on its own.

    ``command_prefix`` is checked apart from ``argument_prefixes``, so a second
    prefix for ``command`` can only narrow the grant, never replace the first.
    """
    maps: list[Any] = []
    if "argument_prefixes" in constraints:
        maps.append(constraints["argument_prefixes"])
    if "command_prefix" in constraints:
        maps.append({"command": constraints["command_prefix"]})
    return maps


def _prefixes_hold(prefixes: Any, action: Action) -> bool:
    if not isinstance(prefixes, Mapping):
        return False
    return all(
        isinstance(prefix, str)
        and isinstance(action.arguments.get(key), str)
        and action.arguments[key].startswith(prefix)
        for key, prefix in prefixes.items()
    )


def constraints_match(constraints: Mapping[str, Any], action: Action) -> bool:
    """True only if every constraint is known, well-formed, and the action satisfies it."""
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
    checks.extend(_prefixes_hold(prefixes, action) for prefixes in _prefix_maps(constraints))
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
    malformed: list[str] = []
    if "action_name" in constraints:
        lines.append(f"only the action named {constraints['action_name']!r}")
    if "action_kind" in constraints:
        lines.append(f"only actions of kind {constraints['action_kind']!r}")
    if "arguments" in constraints:
        arguments = constraints["arguments"]
        if isinstance(arguments, Mapping):
            for key, value in arguments.items():
                lines.append(f"argument {key!r} exactly equal to {value!r}")
        else:
            malformed.append("arguments")
    for name in ("argument_prefixes", "command_prefix"):
        if name not in constraints:
            continue
        value = constraints[name]
        prefixes = value if name == "argument_prefixes" else {"command": value}
        if isinstance(prefixes, Mapping):
            for key, prefix in prefixes.items():
                lines.append(f"argument {key!r} starting with {prefix!r}")
        else:
            malformed.append(name)
    if "resource_prefix" in constraints:
        lines.append(f"resource starting with {constraints['resource_prefix']!r}")
    if "working_directory" in constraints:
        lines.append(f"working directory exactly {constraints['working_directory']!r}")
    if "expires_at" in constraints:
        lines.append(f"until {constraints['expires_at']}")
    if "expires_in_seconds" in constraints:
        lines.append(f"for {constraints['expires_in_seconds']} seconds after approval")
    try:
        grant_expiry(constraints, datetime.now(timezone.utc))
    except AAISValidationError as error:
        malformed.append(error.pointer.rsplit("/", 1)[-1])
    if unknown:
        lines.append(
            "unrecognised constraint(s) "
            + ", ".join(map(repr, unknown))
            + ": the grant will never apply"
        )
    if malformed:
        lines.append(
            "malformed constraint(s) "
            + ", ".join(map(repr, malformed))
            + ": the grant will never apply"
        )
    return lines

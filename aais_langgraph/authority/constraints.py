"""The scope-constraint vocabulary: what a ``session``/``persistent`` grant covers.

A grant covers a later action only if every constraint key is known, well-formed
and holds. Unknown keys and malformed values never match, so a constraint this
version does not understand can only narrow a grant, never widen it. Each key
is one row of :data:`VOCABULARY`: how it is checked and how it is explained to
the human who grants it, side by side.

Keys:

- ``action_name``: the action's ``name`` equals this string.
- ``action_kind``: the action's ``kind`` equals this string.
- ``arguments``: an object; each listed argument equals the given JSON value.
- ``argument_prefixes``: an object; each listed argument is an absolute path or
  URL at or under the given one, compared by normalised path components
  (:mod:`.paths`). A prefix that is not an absolute path or URL never matches.
- ``command_prefix``: words (a string, split like a shell would, or a list of
  words); the ``command`` argument (a string or an argv list) is a plain command
  whose first words are exactly these (:mod:`.commands`). Any shell operator,
  substitution, redirection, glob or newline fails the match. Checked apart
  from ``argument_prefixes``, so each can only narrow the other.
- ``resource_prefix``: the action's ``resource`` is an absolute path or URL at or
  under this one (components, as ``argument_prefixes``).
- ``working_directory``: the action's ``working_directory`` is this absolute
  directory, after normalisation (not a subdirectory).
- ``expires_at``: RFC 3339 time after which the grant no longer applies.
- ``expires_in_seconds``: lifetime of the grant from when it is recorded.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import PurePosixPath
from typing import Any

from ..protocol import AAISValidationError, Action, parse_timestamp
from .commands import command_argv, prefix_words
from .paths import location_covers, path_parts, show_location

__all__ = [
    "KNOWN_KEYS",
    "VOCABULARY",
    "ConstraintKey",
    "constraints_match",
    "explain_constraints",
    "grant_expiry",
    "never_applies",
]

_PLAIN_COMMAND = (
    "as whole words, with no shell operators, substitutions, redirections, globs or newlines"
)


@dataclass(frozen=True)
class ConstraintKey:
    """One constraint key: whether an action satisfies its value, and what it says to a human.

    ``holds(value, action)`` is False for a malformed value; ``explain(value)``
    returns the plain-language lines, or None for a malformed value.
    """

    holds: Callable[[Any, Action], bool]
    explain: Callable[[Any], list[str] | None]


def _equal(field: str) -> Callable[[Any, Action], bool]:
    return lambda value, action: isinstance(value, str) and getattr(action, field) == value


def _arguments_hold(expected: Any, action: Action) -> bool:
    return isinstance(expected, Mapping) and all(
        key in action.arguments and _same_json(action.arguments[key], value)
        for key, value in expected.items()
    )


def _explain_arguments(expected: Any) -> list[str] | None:
    if not isinstance(expected, Mapping):
        return None
    return [f"argument {key!r} exactly equal to {value!r}" for key, value in expected.items()]


def _argument_prefixes_hold(prefixes: Any, action: Action) -> bool:
    return isinstance(prefixes, Mapping) and all(
        location_covers(prefix, action.arguments.get(key)) for key, prefix in prefixes.items()
    )


def _explain_argument_prefixes(prefixes: Any) -> list[str] | None:
    if not isinstance(prefixes, Mapping):
        return None
    shown = {key: show_location(prefix) for key, prefix in prefixes.items()}
    if None in shown.values():
        return None
    return [f"argument {key!r} at or under {place!r}" for key, place in shown.items()]


def _command_prefix_holds(prefix: Any, action: Action) -> bool:
    words = prefix_words(prefix)
    argv = command_argv(action.arguments.get("command"))
    return words is not None and argv is not None and argv[: len(words)] == words


def _explain_command_prefix(prefix: Any) -> list[str] | None:
    words = prefix_words(prefix)
    if words is None:
        return None
    return [f"argument 'command' starting with {' '.join(words)!r} {_PLAIN_COMMAND}"]


def _resource_prefix_holds(prefix: Any, action: Action) -> bool:
    return location_covers(prefix, action.resource)


def _explain_resource_prefix(prefix: Any) -> list[str] | None:
    place = show_location(prefix)
    return None if place is None else [f"resource at or under {place!r}"]


def _working_directory_holds(directory: Any, action: Action) -> bool:
    expected = path_parts(directory)
    return expected is not None and path_parts(action.working_directory) == expected


def _explain_working_directory(directory: Any) -> list[str] | None:
    parts = path_parts(directory)
    return None if parts is None else [f"working directory exactly {str(PurePosixPath(*parts))!r}"]


def _expiry_holds(key: str) -> Callable[[Any, Action], bool]:
    # The limit itself is the grant's expires_at (see grant_expiry); here only its form.
    return lambda value, action: _expiry_error(key, value) is None


def _expiry_error(key: str, value: Any) -> AAISValidationError | None:
    try:
        grant_expiry({key: value}, datetime.now(timezone.utc))
    except AAISValidationError as error:
        return error
    return None


def _explain_expiry(key: str, line: str) -> Callable[[Any], list[str] | None]:
    return lambda value: None if _expiry_error(key, value) else [line.format(value)]


VOCABULARY: Mapping[str, ConstraintKey] = {
    "action_name": ConstraintKey(
        _equal("name"),
        lambda value: [f"only the action named {value!r}"] if isinstance(value, str) else None,
    ),
    "action_kind": ConstraintKey(
        _equal("kind"),
        lambda value: [f"only actions of kind {value!r}"] if isinstance(value, str) else None,
    ),
    "arguments": ConstraintKey(_arguments_hold, _explain_arguments),
    "argument_prefixes": ConstraintKey(_argument_prefixes_hold, _explain_argument_prefixes),
    "command_prefix": ConstraintKey(_command_prefix_holds, _explain_command_prefix),
    "resource_prefix": ConstraintKey(_resource_prefix_holds, _explain_resource_prefix),
    "working_directory": ConstraintKey(_working_directory_holds, _explain_working_directory),
    "expires_at": ConstraintKey(
        _expiry_holds("expires_at"), _explain_expiry("expires_at", "until {}")
    ),
    "expires_in_seconds": ConstraintKey(
        _expiry_holds("expires_in_seconds"),
        _explain_expiry("expires_in_seconds", "for {} seconds after approval"),
    ),
}
"""Every constraint key this version understands; adding a key is adding a row."""

KNOWN_KEYS = frozenset(VOCABULARY)


def constraints_match(constraints: Mapping[str, Any], action: Action) -> bool:
    """True only if every constraint is known, well-formed, and the action satisfies it."""
    if not constraints or not set(constraints) <= KNOWN_KEYS:
        return False
    return all(VOCABULARY[key].holds(value, action) for key, value in constraints.items())


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


def never_applies(constraints: Mapping[str, Any]) -> str | None:
    """The first key (in the vocabulary's order, unknown keys last) that makes a grant of
    ``constraints`` cover nothing, by the matcher's own rules: unknown, or malformed.
    None when every key can hold."""
    for key in VOCABULARY:
        if key in constraints and VOCABULARY[key].explain(constraints[key]) is None:
            return key
    unknown = sorted(set(constraints) - KNOWN_KEYS)
    return unknown[0] if unknown else None


def explain_constraints(constraints: Mapping[str, Any]) -> list[str]:
    """Plain-language lines a presenter shows before a human grants this scope."""
    lines: list[str] = []
    malformed: list[str] = []
    for key in VOCABULARY:  # the vocabulary's order, whatever the constraints' order
        if key not in constraints:
            continue
        explained = VOCABULARY[key].explain(constraints[key])
        if explained is None:
            malformed.append(key)
        else:
            lines.extend(explained)
    unknown = sorted(set(constraints) - KNOWN_KEYS)
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

"""How one tool's approval is configured: the ``interrupt_on`` entry, checked and normalised.

The shape follows ``HumanInTheLoopMiddleware`` (``{tool_name: True | False | config}``)
so migrating is a rename; the config adds what AAIS needs: risk, offered scopes
and expiry. Everything is validated when the node or middleware is built, so a
typo fails at startup rather than at the first tool call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal, TypedDict, Union

from ..protocol import AAISValidationError, Choice, Presentation, Risk, RiskLevel

if TYPE_CHECKING:
    from langgraph.prebuilt.tool_node import ToolCallRequest

ToolCallDescriber = Callable[["ToolCallRequest"], str]
"""Makes the ``action.summary`` a human reads: given the tool call request, return text."""

ToolCallPredicate = Callable[["ToolCallRequest"], bool]
"""``when``: True to ask a human about this call, False to let it run ungated."""

AllowedDecision = Literal["approve", "reject", "edit"]

_RISK_LEVELS = ("low", "medium", "high", "critical")
_KNOWN_KEYS = frozenset(
    {
        "allowed_decisions",
        "choices",
        "session_scope",
        "risk",
        "expires_in",
        "description",
        "when",
        "presentation",
        "idempotent",
        "args_schema",  # accepted for HumanInTheLoopMiddleware configs; unused there too
    }
)


class ToolApprovalConfig(TypedDict, total=False):
    """Approval settings for one tool (every key optional).

    - ``allowed_decisions``: subset of ``"approve"``, ``"reject"``, ``"edit"``
      (HumanInTheLoopMiddleware's names; ``"respond"`` has no AAIS meaning and is
      refused). ``approve`` offers *approve once*, ``reject`` offers *deny*, ``edit``
      lets a reviewer supersede the call with edited arguments (see
      :func:`~aais_langgraph.tools.edit_tool_call`). Default: all three.
    - ``choices``: the exact AAIS choices to offer, replacing those derived from
      ``allowed_decisions`` (must include a deny or cancel).
    - ``session_scope``: scope constraints for an extra *approve for this session*
      choice; an approval with that scope records a grant that auto-approves later
      calls of this tool inside the constraints (see ``authority.constraints``).
    - ``risk``: ``"low" | "medium" | "high" | "critical"``, or a full AAIS risk object.
    - ``expires_in``: a ``timedelta`` or seconds; default is the authority's expiry.
    - ``description``: the summary shown to the reviewer, a string or a describer.
    - ``when``: predicate on the ``ToolCallRequest``; evaluated once, when the call
      first reaches the gate. Once a request exists for the call, the request
      stands and ``when`` is not asked again.
    - ``presentation``: the AAIS ``action.presentation`` of every request for this
      tool, e.g. ``{"redacted": True, "binding_hint": ...}`` when an argument is an
      opaque reference to a secret (the secret itself must never be an argument).
    - ``idempotent``: True if running the tool twice under one approval is harmless
      because it deduplicates on :func:`~aais_langgraph.gate.approval_key`. After a
      crash while it ran, it is run again; by default (False) it is not, and the
      model is told its outcome is unknown.
    - ``args_schema``: accepted and ignored, as HumanInTheLoopMiddleware does.
    """

    allowed_decisions: Sequence[AllowedDecision]
    choices: Sequence[Choice | Mapping[str, Any]]
    session_scope: Mapping[str, Any]
    risk: RiskLevel | Risk | Mapping[str, Any]
    expires_in: timedelta | float
    description: str | ToolCallDescriber
    when: ToolCallPredicate
    presentation: Presentation | Mapping[str, Any]
    idempotent: bool
    args_schema: Mapping[str, Any]


InterruptOn = Mapping[str, Union[bool, ToolApprovalConfig]]  # noqa: UP007 - runtime alias on 3.10


@dataclass(frozen=True)
class ToolRule:
    """The normalised approval rule of one gated tool."""

    tool: str
    choices: tuple[Choice, ...] | None
    editable: bool
    risk: Risk | None = None
    expires_in: timedelta | None = None
    description: str | ToolCallDescriber | None = None
    when: ToolCallPredicate | None = None
    presentation: Presentation | None = None
    idempotent: bool = False


def _risk(tool: str, value: Any) -> Risk:
    if isinstance(value, str):
        if value not in _RISK_LEVELS:
            raise ValueError(f"interrupt_on[{tool!r}].risk: expected one of {_RISK_LEVELS}")
        reason = f"The tool '{tool}' is configured as {value} risk"
        return Risk.from_data({"level": value, "reasons": [reason]}, pointer="/risk")
    return Risk.from_data(value, pointer=f"/interrupt_on/{tool}/risk")


def _expiry(tool: str, value: Any) -> timedelta:
    if isinstance(value, timedelta):
        lifetime = value
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        lifetime = timedelta(seconds=value)
    else:
        raise ValueError(f"interrupt_on[{tool!r}].expires_in: expected a timedelta or seconds")
    if lifetime <= timedelta(0):
        raise ValueError(f"interrupt_on[{tool!r}].expires_in: must be positive")
    return lifetime


def _choices(tool: str, config: Mapping[str, Any]) -> tuple[tuple[Choice, ...] | None, bool]:
    """The offered choices (None: leave them to the policy) and whether edits are allowed."""
    allowed = list(config.get("allowed_decisions", ("approve", "reject", "edit")))
    unknown = sorted(set(allowed) - {"approve", "reject", "edit"})
    if unknown:
        raise ValueError(
            f"interrupt_on[{tool!r}].allowed_decisions: unsupported {unknown}; AAIS offers "
            "approve and deny (reject), and edits supersede the request"
        )
    if not {"allowed_decisions", "choices", "session_scope"} & set(config):
        return None, True
    if "choices" in config:
        choices = [
            Choice.from_data(choice, pointer=f"/interrupt_on/{tool}/choices/{index}")
            for index, choice in enumerate(config["choices"])
        ]
    else:
        choices = []
        if "approve" in allowed:
            choices.append(Choice(decision="approve", scope="once", label="Approve once"))
        if "session_scope" in config:
            choices.append(
                Choice.from_data(
                    {
                        "decision": "approve",
                        "scope": "session",
                        "label": "Approve for this session",
                        "scope_constraints": dict(config["session_scope"]),
                    },
                    pointer=f"/interrupt_on/{tool}/session_scope",
                )
            )
        if "reject" in allowed:
            choices.append(Choice(decision="deny", scope="once", label="Deny"))
    if not any(choice.decision in ("deny", "cancel") for choice in choices):
        raise ValueError(f"interrupt_on[{tool!r}]: the choices must offer deny or cancel")
    return tuple(choices), "edit" in allowed


def rule_for(tool: str, entry: bool | Mapping[str, Any]) -> ToolRule | None:
    """Normalise one ``interrupt_on`` entry; None when the tool is not gated."""
    if entry is False:
        return None
    config: Mapping[str, Any] = {} if entry is True else entry
    if not isinstance(config, Mapping):
        raise ValueError(f"interrupt_on[{tool!r}]: expected True, False or a config mapping")
    unknown = sorted(set(config) - _KNOWN_KEYS)
    if unknown:
        raise ValueError(f"interrupt_on[{tool!r}]: unknown keys {unknown}")
    for key in ("description", "when"):
        value = config.get(key)
        if value is not None and not (callable(value) or (key == "description" and value)):
            raise ValueError(f"interrupt_on[{tool!r}].{key}: expected a callable")
    idempotent = config.get("idempotent", False)
    if not isinstance(idempotent, bool):
        raise ValueError(f"interrupt_on[{tool!r}].idempotent: expected True or False")
    try:
        choices, editable = _choices(tool, config)
        risk = _risk(tool, config["risk"]) if "risk" in config else None
        presentation = (
            Presentation.from_data(
                config["presentation"], pointer=f"/interrupt_on/{tool}/presentation"
            )
            if "presentation" in config
            else None
        )
    except AAISValidationError as error:
        raise ValueError(f"interrupt_on[{tool!r}]: {error}") from None
    return ToolRule(
        tool=tool,
        choices=choices,
        editable=editable,
        risk=risk,
        expires_in=_expiry(tool, config["expires_in"]) if "expires_in" in config else None,
        description=config.get("description"),
        when=config.get("when"),
        presentation=presentation,
        idempotent=idempotent,
    )


def rules_from(interrupt_on: InterruptOn) -> dict[str, ToolRule]:
    """The rules of every gated tool in an ``interrupt_on`` mapping."""
    rules: dict[str, ToolRule] = {}
    for tool, entry in interrupt_on.items():
        rule = rule_for(tool, entry)
        if rule is not None:
            rules[tool] = rule
    return rules

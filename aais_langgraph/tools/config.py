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

from ..authority.commands import prefix_words, session_prefix
from ..authority.constraints import constraints_match
from ..protocol import AAISValidationError, Action, Choice, Presentation, Risk, RiskLevel

if TYPE_CHECKING:
    from langgraph.prebuilt.tool_node import ToolCallRequest

ToolCallDescriber = Callable[..., str]
"""Makes the ``action.summary`` a human reads: given the tool call request, return text.
A HumanInTheLoopMiddleware describer, ``(tool_call, state, runtime)``, works as it is."""

ToolCallPredicate = Callable[["ToolCallRequest"], bool]
"""``when``: True to ask a human about this call, False to let it run ungated."""

SessionScopeDeriver = Callable[["ToolCallRequest"], Union[Mapping[str, Any], None]]  # noqa: UP007
"""``session_scope`` as a function of the call: the constraints of the *approve for this
session* choice offered for it, or None to offer none (see :func:`command_session_scope`)."""

AllowedDecision = Literal["approve", "reject", "edit", "respond"]

ALL_DECISIONS: tuple[AllowedDecision, ...] = ("approve", "edit", "reject", "respond")
"""What ``True`` allows, and the default of a config without ``allowed_decisions``."""

STOP_LABEL = "Cancel: do not run this call"
"""Label of the cancel choice offered when ``allowed_decisions`` has no ``reject``
(AAIS requires every request to offer a deny or cancel choice)."""

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
        "reviewer_note",
        "args_schema",  # accepted for HumanInTheLoopMiddleware configs; unused there too
    }
)


class ToolApprovalConfig(TypedDict, total=False):
    """Approval settings for one tool (every key optional).

    - ``allowed_decisions``: a non-empty subset of ``"approve"``, ``"reject"``,
      ``"edit"``, ``"respond"`` (HumanInTheLoopMiddleware's names). ``approve`` offers
      *approve once*, ``reject`` offers *deny*, ``respond`` a deny whose reviewer's text
      is the tool's result (the tool does not run), ``edit`` lets a reviewer run the
      call with edited arguments in one action (see
      :func:`~aais_langgraph.tools.edit_tool_call`). An AAIS request always lets the
      reviewer stop the call: without ``reject`` or ``respond`` it offers a *cancel*
      choice instead (labelled :data:`STOP_LABEL`), which resolves ``cancelled`` and
      runs nothing. Default: all four. LangChain's approval UIs (Agent Chat UI, Agent
      Inbox) are shown these names.
    - ``choices``: the exact AAIS choices to offer, replacing those derived from
      ``allowed_decisions`` (must include a deny or cancel).
    - ``session_scope``: scope constraints for an extra *approve for this session*
      choice; an approval with that scope records a grant that auto-approves later
      calls of this tool inside the constraints (see ``authority.constraints``).
      Either fixed constraints, or a function of the call that derives them
      (:func:`command_session_scope` derives them from a proposed command). A
      session choice is offered only for a call its constraints cover, so what
      is granted is what the reviewer was shown.
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
    - ``reviewer_note``: True to pass a reviewer's note on a denial to the model in
      the denial ``ToolMessage`` (HumanInTheLoopMiddleware's reject ``message``). The
      note travels in the decision (:func:`~aais_langgraph.protocol.with_note`), bounded to
      :data:`~aais_langgraph.protocol.extensions.NOTE_MAX_LENGTH` characters, and is
      recorded in the resolution; by default (False) the model gets the fixed text.
    - ``args_schema``: accepted and ignored, as HumanInTheLoopMiddleware does.
    """

    allowed_decisions: Sequence[AllowedDecision]
    choices: Sequence[Choice | Mapping[str, Any]]
    session_scope: Mapping[str, Any] | SessionScopeDeriver
    risk: RiskLevel | Risk | Mapping[str, Any]
    expires_in: timedelta | float
    description: str | ToolCallDescriber
    when: ToolCallPredicate
    presentation: Presentation | Mapping[str, Any]
    idempotent: bool
    reviewer_note: bool
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
    session_scope: SessionScopeDeriver | None = None
    idempotent: bool = False
    reviewer_note: bool = False
    allowed: tuple[AllowedDecision, ...] = ALL_DECISIONS
    """HumanInTheLoopMiddleware's names of what a reviewer may answer (what LangChain's
    approval UIs are shown)."""

    def choices_for(self, request: ToolCallRequest, action: Action) -> tuple[Choice, ...] | None:
        """The choices to offer for this call (None: leave them to the policy).

        A derived session choice is added after *approve once*; any standing
        choice whose constraints do not cover ``action`` itself is left out.
        """
        if self.choices is None:
            return None
        choices = list(self.choices)
        if self.session_scope is not None:
            constraints = self.session_scope(request)
            if constraints is not None:
                pointer = f"/interrupt_on/{self.tool}/session_scope"
                choices.insert(_after_approve_once(choices), session_choice(constraints, pointer))
        return offered_for(choices, action)


def offered_for(choices: Sequence[Choice], action: Action) -> tuple[Choice, ...]:
    """``choices`` without the standing ones whose constraints do not cover ``action``.

    Approving such a choice would grant something other than what is on the card.
    """
    return tuple(
        choice
        for choice in choices
        if choice.scope == "once"
        or constraints_match(
            {"action_name": action.name, **(choice.scope_constraints or {})}, action
        )
    )


def _after_approve_once(choices: Sequence[Choice]) -> int:
    for index, choice in enumerate(choices):
        if (choice.decision, choice.scope) == ("approve", "once"):
            return index + 1
    return 0


def session_choice(constraints: Mapping[str, Any], pointer: str) -> Choice:
    """The *approve for this session* choice granting ``constraints``, labelled with the
    command words it covers when it covers a command."""
    words = prefix_words(constraints.get("command_prefix"))
    label = (
        f"Approve `{' '.join(words)} ...` for this session"
        if words is not None
        else "Approve for this session"
    )
    return Choice.from_data(
        {
            "decision": "approve",
            "scope": "session",
            "label": label,
            "scope_constraints": dict(constraints),
        },
        pointer=pointer,
    )


def command_session_scope(**constraints: Any) -> SessionScopeDeriver:
    """A ``session_scope`` derived from the proposed ``command`` argument.

    It covers the call's program and subcommand as whole words (``git status -s``
    -> ``command_prefix: ["git", "status"]``; ``ls -la`` -> ``["ls"]``), limited to
    this tool, plus ``constraints`` (e.g. ``expires_in_seconds=1800``). No session
    choice is offered for a command that is not plain (any shell operator,
    substitution, redirection, glob or newline) or whose program runs other
    programs (:data:`~aais_langgraph.authority.commands.RUNS_OTHER_PROGRAMS`).
    """

    def derive(request: ToolCallRequest) -> Mapping[str, Any] | None:
        words = session_prefix(request.tool_call["args"].get("command"))
        if words is None:
            return None
        return {"action_name": request.tool_call["name"], "command_prefix": words, **constraints}

    return derive


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
    allowed = list(config.get("allowed_decisions", ALL_DECISIONS))
    unknown = sorted(set(allowed) - set(ALL_DECISIONS))
    if unknown:
        raise ValueError(
            f"interrupt_on[{tool!r}].allowed_decisions: unsupported {unknown}; AAIS offers "
            "approve and deny (reject, respond), and edits supersede the request"
        )
    if not allowed:
        raise ValueError(f"interrupt_on[{tool!r}].allowed_decisions: name at least one decision")
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
        scope = config.get("session_scope")
        if isinstance(scope, Mapping):
            choices.append(session_choice(scope, f"/interrupt_on/{tool}/session_scope"))
        elif scope is not None and not callable(scope):
            raise ValueError(
                f"interrupt_on[{tool!r}].session_scope: expected constraints or a function"
            )
        if "reject" in allowed or "respond" in allowed:
            choices.append(Choice(decision="deny", scope="once", label="Deny"))
        else:
            choices.append(Choice(decision="cancel", scope="once", label=STOP_LABEL))
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
    scope = config.get("session_scope")
    idempotent = config.get("idempotent", False)
    reviewer_note = config.get("reviewer_note", False)
    for key, flag in (("idempotent", idempotent), ("reviewer_note", reviewer_note)):
        if not isinstance(flag, bool):
            raise ValueError(f"interrupt_on[{tool!r}].{key}: expected True or False")
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
        session_scope=None if isinstance(scope, Mapping) else scope,
        idempotent=idempotent,
        reviewer_note=reviewer_note,
        allowed=tuple(dict.fromkeys(config.get("allowed_decisions", ALL_DECISIONS))),
    )


def normalised(interrupt_on: InterruptOn) -> dict[str, dict[str, Any]]:
    """``interrupt_on`` as HumanInTheLoopMiddleware normalises it: gated tools only, each
    a config with its ``allowed_decisions`` spelled out (``True``: all four)."""
    shown: dict[str, dict[str, Any]] = {}
    for tool, entry in interrupt_on.items():
        if entry is False:
            continue
        config: dict[str, Any] = {} if entry is True else dict(entry)
        allowed = config.get("allowed_decisions", ALL_DECISIONS)
        config["allowed_decisions"] = list(allowed)
        shown[tool] = config
    return shown


def rules_from(interrupt_on: InterruptOn) -> dict[str, ToolRule]:
    """The rules of every gated tool in an ``interrupt_on`` mapping."""
    rules: dict[str, ToolRule] = {}
    for tool, entry in interrupt_on.items():
        rule = rule_for(tool, entry)
        if rule is not None:
            rules[tool] = rule
    return rules

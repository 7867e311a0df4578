"""LangChain's approval UIs: the interrupt keys they read and the answers they send, as AAIS.

Agent Chat UI, Agent Inbox and LangSmith Studio read and answer
``HumanInTheLoopMiddleware``'s shapes, not AAIS envelopes. A gate that opts in
(``ApprovalMiddleware`` always does; a bare ``request_approval`` with
``langchain_ui=True``) adds their keys to its interrupt value, beside the
``approval.requested`` envelope's own (:func:`interrupt_keys`), and reads their
answers (:meth:`LangChainUI.read`):

- HITL's request (what Agent Chat UI draws buttons for): ``action_requests`` =
  ``[{name, args, description}]`` and ``review_configs`` = ``[{action_name,
  allowed_decisions}]``, one entry: the one call this interrupt shows. Agent Inbox
  reads the same list's items as ``arguments``, so each item carries that too;
- HITL's ``per_call`` ``ToolApprovalRequest`` fields: ``tool_call_id``, ``name``,
  ``args``, ``description`` (its ``type`` stays ``approval.requested``: the AAIS
  envelope is the contract);
- Agent Inbox's ``HumanInterrupt``: ``action_request`` = ``{action, args}``,
  ``config`` = ``{allow_accept, allow_edit, allow_respond, allow_ignore}``,
  ``description``.

The answers, and their AAIS meaning (the answer has no id or digest: the server binds
it to the request this interrupt shows, and records it as the authenticated user):

- ``approve`` (HITL), ``accept`` (Agent Inbox): approve once;
- ``edit`` (``edited_action`` / ``args``): supersede: a new request for the edited
  call, approved by the same person in the same action;
- ``reject``, with or without ``message``: deny; the message is the reviewer's note
  (shown to the model when the tool sets ``reviewer_note``);
- ``respond`` (HITL), ``response`` (Agent Inbox): deny; the text is the tool's result
  (the tool does not run);
- ``ignore`` (Agent Inbox): cancel, by that person.

HITL's batched ``{"decisions": [one decision]}`` (Agent Chat UI), one decision alone
(``per_call``, answered by interrupt id) and Agent Inbox's one-item list are read
alike. Anything else, an answer without an authenticated user, or an answer meant for
another interrupt (several decisions, an edit of another tool, an Agent Inbox answer
naming another action) is refused with a catalogue code (:class:`AnswerShapeRefused`)
while LangGraph validates the resume value, so the approval stays pending.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..authority import ApprovalAuthority, ForbiddenError
from ..protocol import (
    AAISValidationError,
    Actor,
    ApprovalDecided,
    ApprovalResolved,
    Request,
    build_decision_for_request,
)
from ..protocol.envelopes import INTERRUPT_VIEW_KEYS
from ..protocol.extensions import NOTE_MAX_LENGTH, REPLY_EXTENSION, TOOL_CALL_ID_EXTENSION
from ..protocol.notes import with_note
from ..protocol.refusals import (
    INVALID_RESUME,
    STALE,
    UNAUTHENTICATED,
    UNKNOWN_INTERRUPT,
    Refusal,
)
from .response import RefusalCarrier, RejectedResumeError
from .seams import mark_invalid_resume

__all__ = [
    "ACCEPTED_SHAPES",
    "LANGCHAIN_UI_KEYS",
    "REPLY_EXTENSION",
    "AnswerShapeRefused",
    "Decision",
    "DeferredAnswer",
    "LangChainUI",
    "UIAnswer",
    "approval_envelope",
    "checkpoint_envelope",
    "interrupt_keys",
]

Decision = Literal["approve", "edit", "reject", "respond"]
"""HITL's decision names (``review_configs[].allowed_decisions``)."""

LANGCHAIN_UI_KEYS = INTERRUPT_VIEW_KEYS
"""The keys an opted-in gate adds to its interrupt value, beside the envelope's."""

ACCEPTED_SHAPES = (
    "an approval.decided or approval.resolved envelope; HITL's {decisions: [one decision]} "
    "or one decision {type: approve | edit | reject | respond} (edit: edited_action "
    "{name, args}; reject: optional message; respond: message); or Agent Inbox's "
    "[{type: accept | edit | response | ignore, args}]"
)
"""What a refusal of a badly shaped answer names (Studio sends whatever JSON is typed)."""

IGNORE_REASON = "Ignored by the reviewer in Agent Inbox."


class AnswerShapeRefused(RejectedResumeError, Refusal):
    """A LangChain UI answer this gate cannot take; nothing was recorded and the interrupt
    stays pending. ``code`` is a catalogue code (``aais.invalid_resume``,
    ``aais.unknown_interrupt``, ``aais.unauthenticated``); the message starts with it and
    names fields, never values."""

    def __init__(self, code: str, pointer: str, reason: str) -> None:
        super().__init__(pointer, f"{code}: {reason}", code=code)
        self.code = code
        self.pointer = pointer


def refused(code: str, pointer: str, reason: str) -> RefusalCarrier:
    """An :class:`AnswerShapeRefused` (marked as an invalid resume) ready to raise."""
    error = AnswerShapeRefused(code, pointer, reason)
    mark_invalid_resume(error)
    return RefusalCarrier(error)


def approval_envelope(value: Any) -> Any:
    """The ``approval.requested`` envelope an interrupt value carries: the value without
    the LangChain UI keys (any other value as it is)."""
    requested = isinstance(value, Mapping) and value.get("type") == "approval.requested"
    if requested and any(key in value for key in LANGCHAIN_UI_KEYS):
        return {key: item for key, item in value.items() if key not in LANGCHAIN_UI_KEYS}
    return value


def checkpoint_envelope(value: Any) -> Any:
    """The envelope a checkpoint's interrupt value carries, for comparing with the ledger's
    copy: without the LangChain UI keys when they show exactly the envelope's request; the
    whole value (so it differs from any envelope) when they show anything else, since
    those UIs answer what they show, bound to the envelope's request."""
    envelope = approval_envelope(value)
    if envelope is value or _view_matches(value, envelope):
        return envelope
    return value


def _view_matches(value: Mapping[str, Any], envelope: Mapping[str, Any]) -> bool:
    """True when the value's LangChain UI keys show the envelope's request."""
    request = envelope.get("request")
    if not isinstance(request, Mapping) or not isinstance(request.get("action"), Mapping):
        return False
    action = request["action"]
    name, arguments, summary = action.get("name"), action.get("arguments"), action.get("summary")
    shown = {
        "action_requests": [
            {"name": name, "args": arguments, "arguments": arguments, "description": summary}
        ],
        "action_request": {"action": name, "args": arguments},
        "description": summary,
        "name": name,
        "args": arguments,
    }
    tool_call_id = (request.get("extensions") or {}).get(TOOL_CALL_ID_EXTENSION)
    if isinstance(tool_call_id, str):
        shown["tool_call_id"] = tool_call_id
    if any(value.get(key) != item for key, item in shown.items()):
        return False
    configs = value.get("review_configs")
    return (
        isinstance(configs, list)
        and len(configs) == 1
        and isinstance(configs[0], Mapping)
        and configs[0].get("action_name") == name
        and set(value) - set(envelope) <= set(LANGCHAIN_UI_KEYS)
    )


def allowed_decisions(
    request: Request, *, editable: bool, respond: bool = True
) -> tuple[Decision, ...]:
    """HITL's names for what ``request`` offers: ``approve`` when it offers an approval,
    ``edit`` when it is ``editable``, ``reject`` (and ``respond`` unless left out) when
    it offers a deny."""
    kinds = {choice.decision for choice in request.choices}
    allowed: list[Decision] = []
    if "approve" in kinds:
        allowed.append("approve")
    if editable:
        allowed.append("edit")
    if "deny" in kinds:
        allowed.append("reject")
        if respond:
            allowed.append("respond")
    return tuple(allowed)


def interrupt_keys(request: Request, allowed: Sequence[Decision]) -> dict[str, Any]:
    """The keys LangChain's UIs read, for the one action ``request`` shows."""
    action = request.action
    arguments = action.to_json()["arguments"]
    description = action.summary
    keys: dict[str, Any] = {
        "action_requests": [
            {
                "name": action.name,
                "args": arguments,
                "arguments": arguments,
                "description": description,
            }
        ],
        "review_configs": [{"action_name": action.name, "allowed_decisions": list(allowed)}],
        "action_request": {"action": action.name, "args": arguments},
        "config": {
            "allow_accept": "approve" in allowed,
            "allow_edit": "edit" in allowed,
            "allow_respond": "respond" in allowed,
            "allow_ignore": True,
        },
        "description": description,
        "name": action.name,
        "args": arguments,
    }
    tool_call_id = (request.extensions or {}).get(TOOL_CALL_ID_EXTENSION)
    if isinstance(tool_call_id, str):
        keys["tool_call_id"] = tool_call_id
    return keys


@dataclass(frozen=True)
class UIAnswer:
    """One LangChain UI answer, read: its HITL decision (``ignore``: Agent Inbox's), the
    reviewer's text, and an edit's arguments."""

    decision: Literal["approve", "edit", "reject", "respond", "ignore"]
    message: str | None = None
    arguments: Mapping[str, Any] | None = None


EditHandler = Callable[[Request, Mapping[str, Any], Actor], ApprovalResolved]
"""Supersedes ``request`` with an edited call approved by the actor; returns the
original's ``cancelled`` resolution (the tools layer provides it)."""


def _text(value: Any, pointer: str, *, required: bool) -> str | None:
    if value is None or (value == "" and not required):
        if required:
            raise refused(INVALID_RESUME, pointer, "a text is required")
        return None
    if not isinstance(value, str) or not 0 < len(value) <= NOTE_MAX_LENGTH:
        raise refused(
            INVALID_RESUME, pointer, f"must be a string of 1 to {NOTE_MAX_LENGTH} characters"
        )
    return value


def _arguments(value: Any, pointer: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise refused(INVALID_RESUME, pointer, "must be an object of arguments")
    return value


def _one(items: Any, pointer: str) -> Any:
    if not isinstance(items, list) or not items:
        raise refused(INVALID_RESUME, pointer, f"expected one answer; accepted: {ACCEPTED_SHAPES}")
    if len(items) != 1:
        raise refused(
            UNKNOWN_INTERRUPT,
            pointer,
            "this interrupt shows one action, so it takes exactly one answer; answer each "
            "interrupt on its own",
        )
    return items[0]


def _hitl(decision: Any, request: Request, pointer: str) -> UIAnswer:
    """A HITL decision (Agent Chat UI's, or ``per_call``'s)."""
    if not isinstance(decision, Mapping):
        raise refused(INVALID_RESUME, pointer, f"not an answer; accepted: {ACCEPTED_SHAPES}")
    kind = decision.get("type")
    if kind == "approve":
        return UIAnswer("approve")
    if kind == "reject":
        return UIAnswer(
            "reject", _text(decision.get("message"), pointer + "/message", required=False)
        )
    if kind == "respond":
        return UIAnswer(
            "respond", _text(decision.get("message"), pointer + "/message", required=True)
        )
    if kind == "edit":
        edited = decision.get("edited_action")
        if not isinstance(edited, Mapping):
            raise refused(INVALID_RESUME, pointer + "/edited_action", "must be {name, args}")
        if edited.get("name") != request.action.name:
            raise refused(
                UNKNOWN_INTERRUPT,
                pointer + "/edited_action/name",
                "names another action than the one this interrupt shows",
            )
        return UIAnswer(
            "edit", arguments=_arguments(edited.get("args"), pointer + "/edited_action/args")
        )
    raise refused(
        INVALID_RESUME, pointer + "/type", f"unknown decision; accepted: {ACCEPTED_SHAPES}"
    )


def _inbox(response: Any, request: Request, pointer: str) -> UIAnswer:
    """An Agent Inbox ``HumanResponse``."""
    if not isinstance(response, Mapping):
        raise refused(INVALID_RESUME, pointer, f"not an answer; accepted: {ACCEPTED_SHAPES}")
    kind, args = response.get("type"), response.get("args")
    if kind == "ignore":
        return UIAnswer("ignore")
    if kind == "response":
        return UIAnswer("respond", _text(args, pointer + "/args", required=True))
    if kind in ("accept", "edit"):
        if kind == "accept" and args is None:
            return UIAnswer("approve")
        if not isinstance(args, Mapping):
            raise refused(INVALID_RESUME, pointer + "/args", "must be {action, args}")
        if args.get("action") != request.action.name:
            raise refused(
                UNKNOWN_INTERRUPT,
                pointer + "/args/action",
                "names another action than the one this interrupt shows",
            )
        arguments = _arguments(args.get("args"), pointer + "/args/args")
        if kind == "edit":
            return UIAnswer("edit", arguments=arguments)
        if dict(arguments) != request.action.to_json()["arguments"]:
            # An accept carries the action its reviewer was shown: it must be this one.
            raise refused(
                UNKNOWN_INTERRUPT,
                pointer + "/args/args",
                "the accepted arguments are not the ones this interrupt shows",
            )
        return UIAnswer("approve")
    raise refused(
        INVALID_RESUME, pointer + "/type", f"unknown response; accepted: {ACCEPTED_SHAPES}"
    )


def read_answer(value: Any, request: Request) -> UIAnswer:
    """A LangChain UI answer to ``request``, read (or raise :class:`RefusalCarrier`)."""
    if isinstance(value, Mapping) and "decisions" in value:
        return _hitl(_one(value["decisions"], "/decisions"), request, "/decisions/0")
    if isinstance(value, list):
        return _inbox(_one(value, ""), request, "/0")
    if isinstance(value, Mapping) and "type" in value:
        return _hitl(value, request, "")
    raise refused(INVALID_RESUME, "", f"not an answer; accepted: {ACCEPTED_SHAPES}")


@dataclass(frozen=True)
class LangChainUI:
    """A gate's opt-in to LangChain's approval UIs: the decisions it shows them, and how
    an edit supersedes its request (None: edits are not offered).

    Args:
        allowed: HITL's decision names the interrupt shows (``review_configs``); None:
            what the request offers (:func:`allowed_decisions`).
        edit: supersedes the request with the edited call (tool-call gates only).
        shown: see the attribute.
    """

    allowed: tuple[Decision, ...] | None = None
    edit: EditHandler | None = None
    shown: bool = True
    """False for a request raised while an answer was already waiting for its task (a
    resume sent when nothing waited, e.g. after the thread's state changed): nobody was
    shown it, so an answer without an id or digest cannot be for it."""

    def decisions(self, request: Request) -> tuple[Decision, ...]:
        """HITL's names for the decisions this interrupt takes."""
        offered = allowed_decisions(request, editable=self.edit is not None)
        if self.allowed is None:
            return offered
        return tuple(decision for decision in self.allowed if decision in offered)

    def keys(self, request: Request) -> dict[str, Any]:
        """The keys added to the interrupt value of ``request``."""
        return interrupt_keys(request, self.decisions(request))

    def read(
        self,
        request: Request,
        value: Any,
        actor: Actor | None,
        refusal: str | None,
        authority: ApprovalAuthority,
        *,
        defer: bool = False,
    ) -> ApprovalDecided | ApprovalResolved | DeferredAnswer:
        """The AAIS answer a LangChain UI answer means, bound to ``request`` (its id and
        stored digest) and given by ``actor``, the authenticated user; or raise
        :class:`RefusalCarrier`.

        A decision's id is derived from the request, the user and the answer, so LangGraph
        handing a task's saved answer back (a re-run) is read as the same decision. An
        ``edit`` or ``ignore`` is recorded here (the ledger's work), or, with ``defer`` (an
        async gate, on the event loop), returned as a :class:`DeferredAnswer` to record in
        a worker thread.

        Args:
            request: the request this interrupt shows.
            value: the resume value.
            actor: the run's authenticated user (None: nobody authenticated).
            refusal: why the run takes no raw answers at all, if it takes none.
            authority: the authority, which records an ``ignore`` (a cancel) as ``actor``.
            defer: return an ``edit`` or ``ignore`` unrecorded, as a :class:`DeferredAnswer`.
        """
        answer = read_answer(value, request)
        if refusal is not None or actor is None:
            raise refused(
                UNAUTHENTICATED,
                "",
                "a LangChain UI answer names nobody, so it needs the server's authenticated "
                "user (LangGraph Server custom auth); " + (refusal or "this run has none"),
            )
        if not self.shown:
            raise refused(
                STALE,
                "",
                "this answer was sent before this action was shown (the thread changed since "
                "the card was drawn); nothing was recorded, answer the action now waiting",
            )
        allowed = self.decisions(request)
        if answer.decision != "ignore" and answer.decision not in allowed:
            raise refused(INVALID_RESUME, "/type", "this decision is not offered for this action")
        if answer.decision in ("edit", "ignore"):
            deferred = DeferredAnswer(self, request, answer, actor, authority)
            if defer:
                return deferred
            try:
                return deferred.record()
            except (AAISValidationError, ForbiddenError) as error:
                raise _refusal_of(error) from None
        kind: Literal["approve", "deny"] = "approve" if answer.decision == "approve" else "deny"
        try:
            decided = build_decision_for_request(
                request,
                decision=kind,
                actor=actor,
                decision_id=_decision_id(request, actor, value),
            )
            note = answer.message
            if note is not None:
                decided = with_note(decided, note)
            if answer.decision == "respond":
                document = decided.to_json()
                extensions = {**document["decision"].get("extensions", {}), REPLY_EXTENSION: True}
                document["decision"]["extensions"] = extensions
                decided = ApprovalDecided.from_data(document)
        except AAISValidationError as error:
            raise refused(INVALID_RESUME, error.pointer, error.reason) from None
        return decided


@dataclass(frozen=True)
class DeferredAnswer:
    """An ``edit`` or ``ignore`` read by an async gate and not yet recorded (recording it
    is ledger work, done in a worker thread by :meth:`record`)."""

    ui: LangChainUI
    request: Request
    answer: UIAnswer
    actor: Actor
    authority: ApprovalAuthority

    def record(self) -> ApprovalResolved:
        """Record it: an edit supersedes the request, an ignore cancels it, as the user.
        Returns the request's ``cancelled`` resolution; raises
        :class:`~aais_langgraph.protocol.AAISValidationError` or
        :class:`~aais_langgraph.authority.ForbiddenError` with nothing recorded."""
        if self.answer.decision == "ignore":
            return self.authority.cancel(self.request.id, reason=IGNORE_REASON, actor=self.actor)
        assert self.ui.edit is not None and self.answer.arguments is not None
        return self.ui.edit(self.request, self.answer.arguments, self.actor)


def _refusal_of(error: AAISValidationError | ForbiddenError) -> RefusalCarrier:
    """The refusal of an edit or ignore that could not be recorded (nothing was)."""
    if isinstance(error, ForbiddenError):
        mark_invalid_resume(error)  # the interrupt stays pending
        return RefusalCarrier(error)
    return refused(INVALID_RESUME, error.pointer, error.reason)


def _decision_id(request: Request, actor: Actor, value: Any) -> str:
    """One decision id per request, user and answer (the same answer handed back again is
    the same decision)."""
    text = json.dumps([request.id, actor.id, value], sort_keys=True, default=repr)
    return "dec_" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]

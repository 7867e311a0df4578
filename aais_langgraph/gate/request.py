"""``request_approval``: pause the current node until a digest-bound decision arrives.

The node re-runs from its start when resumed, so everything here is idempotent:
the request id is derived from thread, task namespace and call index, and the
stored request (with its original timestamps) is read back from the ledger.

The answer is judged while LangGraph validates the resume value (see
:mod:`.response`), so a refused answer leaves the interrupt pending and
answerable. After that, the approval is checked once more against the action
the node computes now (time of use).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, cast

from langgraph.config import get_config
from langgraph.types import interrupt

from ..authority import ApprovalAuthority, ForbiddenError
from ..authority.resolutions import resolution_envelope
from ..protocol import (
    AAISValidationError,
    Action,
    ApprovalRequested,
    ApprovalResolved,
    Choice,
    Request,
    Risk,
    RiskLevel,
)
from ..protocol.builders import DEFAULT_RISK, risk_from
from ..protocol.extensions import QUORUM_EXTENSION, REQUESTER_EXTENSION
from .answer_sources import answer_source, authorized_answers
from .execution import (
    SKIPPED,
    Claim,
    RetryAnswerType,
    execution_state,
)
from .judging import at_time_of_use, prejudge, resolve_answer, resolve_late
from .langchain_ui import DeferredAnswer, LangChainUI
from .quorum import Quorum, quorum_choices
from .response import (
    AnswerType,
    BoundAnswer,
    RefusalCarrier,
    RejectedResumeError,
    Translate,
    refuse,
)
from .run_context import (
    RunCoordinates,
    afind_authority,
    claim_ttl,
    current_coordinates,
    derive_origin,
    find_authority,
    subagent_extension,
)
from .seams import interrupt_will_pause

__all__ = ["RejectedResumeError", "arequest_approval", "request_approval"]


@dataclass(frozen=True)
class _Opened:
    """The stored request of this call, and its resolution if it has one already."""

    requested: ApprovalRequested
    recorded: ApprovalResolved | None


def _open_request(
    authority: ApprovalAuthority,
    action: Action,
    coordinates: RunCoordinates,
    *,
    session_id: str | None,
    graph_id: str | None,
    risk: Risk | RiskLevel | Mapping[str, Any] | None,
    choices: Sequence[Choice | Mapping[str, Any]] | None,
    expires_in: timedelta | None,
    context: Mapping[str, Any] | None,
    quorum: Quorum | None = None,
    extensions: Mapping[str, Any] | None = None,
) -> _Opened | ApprovalResolved:
    """The stored request for this call, or a standing resolution from policy or a grant.

    ``quorum`` is this request's place among several approvals of one action (None: the
    first request; it starts a quorum when the authority asks for one)."""
    assessed = None if risk is None else risk_from(risk, "/risk")
    handed = authorized_answers(get_config().get("configurable") or {})
    carried = None if handed is None else handed.stored_row(coordinates.request_id)
    stored, recorded = authority.opened_request(coordinates.request_id, carried=carried)
    if stored is not None:
        return _Opened(stored, recorded)
    origin = derive_origin(
        coordinates, harness=authority.harness, session_id=session_id, graph_id=graph_id
    )
    if quorum is None:
        screening = authority.screen(action, origin=origin, requester=coordinates.requester)
        if screening.resolved is not None:
            return screening.resolved
        verdict = screening.verdict
        assessed = assessed if assessed is not None else verdict.risk
        choices = choices if choices is not None else verdict.choices
        expires_in = expires_in if expires_in is not None else verdict.expires_in
        quorum = Quorum.first_for(
            authority, action, assessed if assessed is not None else DEFAULT_RISK
        )
    if quorum is not None:
        choices = quorum_choices(choices)
    requested = authority.request(
        action,
        origin=origin,
        risk=assessed,
        choices=choices,
        expires_in=expires_in,
        request_id=coordinates.request_id,
        unseen=True,  # read just above
        thread_id=coordinates.thread_id,
        context={
            "checkpoint_ns": coordinates.checkpoint_ns,
            "node": coordinates.node,
            "call_index": coordinates.call_index,
            **(context or {}),
            **({"requester": coordinates.requester} if coordinates.requester else {}),
        },
        extensions={
            **subagent_extension(coordinates),
            **(extensions or {}),
            **({} if quorum is None else quorum.extension()),
        }
        or None,
    )
    return _Opened(requested, None)


def _claim_for(coordinates: RunCoordinates, idempotent: bool) -> Claim:
    """The execution claim this call takes if its answer approves (none for a replay)."""
    ttl = claim_ttl() if coordinates.answer_is_fresh else None
    return Claim(ttl, coordinates.thread_id, idempotent)


def _retry_context(
    context: Mapping[str, Any] | None, retry_of: str | None
) -> Mapping[str, Any] | None:
    return context if retry_of is None else {**(context or {}), "retry_of": retry_of}


def _answer_type(
    request: Request, settle: Any, retry_of: str | None, translate: Translate | None = None
) -> AnswerType:
    """The response schema of this call (a retry's skips the replaced request's answer)."""
    if retry_of is None:
        return AnswerType(request, settle, translate)
    answer_type = RetryAnswerType(request, settle, retry_of)
    answer_type.translate = translate
    return answer_type


def _langchain_ui(option: LangChainUI | bool | None) -> LangChainUI | None:
    if option is True:
        return LangChainUI()
    return option or None


def _translator(
    ui: LangChainUI | None,
    authority: ApprovalAuthority,
    request: Request,
    produced: list[Any] | None = None,
) -> Translate | None:
    """How the gate reads a LangChain UI answer to ``request`` (None: it does not), as the
    run's authenticated user; ``produced`` (an async gate's) collects the answers it read,
    an edit or ignore unrecorded (:class:`~.langchain_ui.DeferredAnswer`)."""
    if ui is None:
        return None
    source = answer_source()

    def translate(value: Any) -> BoundAnswer:
        # An async gate (``produced`` given) reads on the event loop: ledger work waits.
        answer = ui.read(
            request, value, source.actor, source.refusal, authority, defer=produced is not None
        )
        if produced is not None:
            produced.append(answer)
        return cast(BoundAnswer, answer)

    return translate


def _ask(opened: _Opened, answer_type: AnswerType, ui: LangChainUI | None = None) -> Any:
    """Raise the interrupt, or return the judged answer; refusals raise their error.

    Where it is sure to pause (a fresh task), the interrupt is raised with the answer
    type's JSON Schema as a ready dict: LangGraph would otherwise have pydantic generate
    the same schema from the type (about 5% of a round trip). ``ui``: the keys LangChain's
    approval UIs read are added to the value, beside the envelope's."""
    value = opened.requested.to_json()
    if ui is not None:
        value = {**value, **ui.keys(opened.requested.request)}
    if interrupt_will_pause(get_config()["configurable"]):
        interrupt(value, response_schema=answer_type.json_schema())
        # Only reached if LangGraph handed out an answer after all: refuse it unjudged
        # (marked as an invalid resume, so the interrupt stays pending).
        raise refuse("/resume", "an answer arrived that the gate did not expect").error
    try:
        return interrupt(value, response_schema=cast(Any, answer_type))
    except RefusalCarrier as refusal:
        raise refusal.error from None


def request_approval(
    action: Action | Mapping[str, Any],
    *,
    authority: ApprovalAuthority | None = None,
    risk: Risk | RiskLevel | Mapping[str, Any] | None = None,
    choices: Sequence[Choice | Mapping[str, Any]] | None = None,
    expires_in: timedelta | None = None,
    session_id: str | None = None,
    graph_id: str | None = None,
    context: Mapping[str, Any] | None = None,
    idempotent: bool = False,
    langchain_ui: LangChainUI | bool | None = None,
    _retry_of: str | None = None,
    _take_recorded: bool = False,
) -> ApprovalResolved:
    """Ask a human to approve ``action``; returns the resolution, approved or not.

    Call it inside a LangGraph node or functional-API task. Policy and live
    grants are consulted first (no interrupt when they settle it). Otherwise the
    request is persisted and the run pauses with the complete
    ``approval.requested`` envelope as the interrupt value. Resume with
    ``Command(resume={interrupt_id: approval_decided_envelope})`` or with
    :func:`~aais_langgraph.threads.resume_with_decisions`. Only an ``approved``
    outcome for the action as it is *now* may execute: check ``resolution.approved``.

    ``risk`` is a risk object (``{"level": "high", "reasons": [...]}``) or a level alone
    (``"high"``, as ``interrupt_on`` takes it); without it, policy's or the default.

    An answer for another request or digest, or with a choice that was not
    offered, raises ``pydantic.ValidationError``; one the authority refuses
    (policy, a conflicting decision) raises :class:`RejectedResumeError`. Either
    way the interrupt stays pending.

    An approved action runs at most once, even across crashes: if a run that was
    executing it died, the re-run raises :class:`ExecutionUnknownError` (the
    interrupt stays pending until a human reconciles it), or gets a result that is
    not approved when the action is known to have run. ``idempotent=True`` runs it
    again instead: key its effect by ``resolved.resolution.request_id``.

    Args:
        action: the action to approve (SPEC §5): kind, name, summary, arguments.
        authority: the authority (default: the one in the run's ``configurable``).
        risk: a risk object or a level alone (default: the policy's).
        choices: the decisions offered (default: approve or deny once).
        expires_in: how long the request stays answerable (default: the authority's).
        session_id: the AAIS session (default: the thread id).
        graph_id: names the graph in the request's origin.
        context: runtime facts stored beside the request.
        idempotent: the action may run again after a crash (key it by ``approval_key()``).
        langchain_ui: True (or a :class:`~aais_langgraph.gate.langchain_ui.LangChainUI`)
            to show the request to LangChain's approval UIs (Agent Chat UI, Agent Inbox,
            Studio) and take their answers, bound to this request, as the authenticated
            user (see :mod:`aais_langgraph.gate.langchain_ui`).
        _retry_of: internal: the request a reconciled ``retry`` replaces.
        _take_recorded: internal: a resolution recorded before the gate asked (an edit
            made in this run's answer) is taken without pausing.
    """
    action_model = Action.from_data(action, pointer="/action")
    found = find_authority(authority)
    ui = _langchain_ui(langchain_ui)
    coordinates = current_coordinates(retry_of=_retry_of)
    opened = _open_request(
        found,
        action_model,
        coordinates,
        session_id=session_id,
        graph_id=graph_id,
        risk=risk,
        choices=choices,
        expires_in=expires_in,
        context=_retry_context(context, _retry_of),
    )
    if isinstance(opened, ApprovalResolved):
        return opened
    while True:
        request = opened.requested.request
        place = Quorum.of_request(request)
        last = place is None or place.last
        # Only the last approval of a quorum executes (and claims) the action.
        claim = _claim_for(coordinates, idempotent) if last else None
        source = answer_source()
        while True:
            settle_answer = functools.partial(
                resolve_answer,
                found,
                request,
                action_model,
                known=opened.recorded,
                claim=claim,
                authorized=source.authorized,
                unresolved=opened.recorded is None,
                actor=source.actor,
            )
            # The run's answer source decides whose raw decision counts (invariant 7).
            guarded = source.guard(settle_answer, opened.recorded)
            if _take_recorded and opened.recorded is not None:
                resolved = guarded(opened.recorded)
                break
            translate = _translator(ui, found, request)
            resolved = _ask(opened, _answer_type(request, guarded, _retry_of, translate), ui)
            if resolved is not SKIPPED:
                break
            coordinates = current_coordinates(retry_of=_retry_of)  # the next slot
            claim = _claim_for(coordinates, idempotent) if last else None
        if last or not resolved.approved or place is None:
            break
        following = _following(found, request, place, resolved)
        if isinstance(following, ApprovalResolved):
            return following
        coordinates = current_coordinates(retry_of=_retry_of)
        opened = _open_next(
            found,
            action_model,
            coordinates,
            request,
            following,
            session_id=session_id,
            graph_id=graph_id,
            expires_in=expires_in,
            context=_retry_context(context, _retry_of),
        )
    if execution_state(resolved) == "retry":
        # A reviewer asked for this action to be approved again: a fresh request.
        return request_approval(
            action_model,
            authority=found,
            risk=risk,
            choices=choices,
            expires_in=expires_in,
            session_id=session_id,
            graph_id=graph_id,
            context=context,
            idempotent=idempotent,
            langchain_ui=langchain_ui,
            _retry_of=request.id,
        )
    return at_time_of_use(found, request, resolved, action_model)


def _following(
    authority: ApprovalAuthority, request: Request, place: Quorum, resolved: ApprovalResolved
) -> Quorum | ApprovalResolved:
    """The next approval's place in the quorum, or (fail closed) a result that does not
    run the action when who approved this one cannot be told."""
    approver = authority.decided_by(resolved)
    if approver is None:
        return resolution_envelope(
            request,
            outcome="invalid",
            message="The quorum cannot tell who gave this approval, so it does not count.",
            now=authority.clock(),
            sequence=authority.ledger.last_sequence(),
        )
    return place.following(request, approver)


_OWN_CONTEXT = frozenset({"checkpoint_ns", "node", "call_index", "requester"})
_OWN_EXTENSIONS = frozenset({QUORUM_EXTENSION, REQUESTER_EXTENSION})


def _open_next(
    authority: ApprovalAuthority,
    action: Action,
    coordinates: RunCoordinates,
    request: Request,
    place: Quorum,
    *,
    session_id: str | None,
    graph_id: str | None,
    expires_in: timedelta | None,
    context: Mapping[str, Any] | None,
) -> _Opened:
    """The quorum's next request after ``request``, at ``place``: the same action, risk and
    choices, keeping its extensions (a tool call's id, say) and context, less what every
    request records for itself. Never settled by screening (it is not screened)."""
    extensions = {
        key: value
        for key, value in (request.extensions or {}).items()
        if key not in _OWN_EXTENSIONS
    }
    stored = authority.get_stored_request(request.id)
    kept = {
        key: value
        for key, value in (stored.context if stored is not None else {}).items()
        if key not in _OWN_CONTEXT
    }
    opened = _open_request(
        authority,
        action,
        coordinates,
        session_id=session_id,
        graph_id=graph_id,
        risk=request.risk,
        choices=list(request.choices),
        expires_in=expires_in,
        context={**kept, **(context or {})},
        quorum=place,
        extensions=extensions,
    )
    if isinstance(opened, ApprovalResolved):  # pragma: no cover - members skip screening
        raise RuntimeError("a quorum's next approval was settled without a request")
    return opened


async def arequest_approval(
    action: Action | Mapping[str, Any],
    *,
    authority: ApprovalAuthority | None = None,
    risk: Risk | RiskLevel | Mapping[str, Any] | None = None,
    choices: Sequence[Choice | Mapping[str, Any]] | None = None,
    expires_in: timedelta | None = None,
    session_id: str | None = None,
    graph_id: str | None = None,
    context: Mapping[str, Any] | None = None,
    idempotent: bool = False,
    langchain_ui: LangChainUI | bool | None = None,
    _retry_of: str | None = None,
    _take_recorded: bool = False,
) -> ApprovalResolved:
    """Async twin of :func:`request_approval`; ledger work runs in a worker thread.

    The answer's shape, binding, policy and any resolution recorded before the
    run resumed are checked while LangGraph validates it (refusals keep the
    interrupt pending, as in the sync gate). The authority then judges it in a
    thread; a decision that lost a race with another one in that window is not
    refused but fails closed (the node sees ``conflict``).
    """
    action_model = Action.from_data(action, pointer="/action")
    found = await afind_authority(authority)
    ui = _langchain_ui(langchain_ui)
    coordinates = current_coordinates(retry_of=_retry_of)
    opened = await asyncio.to_thread(
        _open_request,
        found,
        action_model,
        coordinates,
        session_id=session_id,
        graph_id=graph_id,
        risk=risk,
        choices=choices,
        expires_in=expires_in,
        context=_retry_context(context, _retry_of),
    )
    if isinstance(opened, ApprovalResolved):
        return opened
    while True:
        request = opened.requested.request
        place = Quorum.of_request(request)
        last = place is None or place.last
        source = answer_source()
        produced: list[Any] = []
        check = functools.partial(_prejudged, found, request, opened.recorded, produced)
        guarded = source.guard(check, opened.recorded)
        translate = _translator(ui, found, request, produced)
        answer: BoundAnswer
        if _take_recorded and opened.recorded is not None:
            answer = opened.recorded
        else:
            answer = _ask(opened, _answer_type(request, guarded, _retry_of, translate), ui)
        while answer is SKIPPED:
            coordinates = current_coordinates(retry_of=_retry_of)  # the next slot
            answer = _ask(opened, _answer_type(request, guarded, _retry_of, translate), ui)
        if isinstance(answer, DeferredAnswer):
            answer = await asyncio.to_thread(_record_deferred, found, request, answer)
        # Only the last approval of a quorum executes (and claims) the action.
        claim = _claim_for(coordinates, idempotent) if last else None
        resolved = await asyncio.to_thread(
            resolve_late,
            found,
            request,
            action_model,
            answer,
            claim,
            source.authorized,
            source.actor,
        )
        if last or not resolved.approved or place is None:
            break
        following = await asyncio.to_thread(_following, found, request, place, resolved)
        if isinstance(following, ApprovalResolved):
            return following
        coordinates = current_coordinates(retry_of=_retry_of)
        opened = await asyncio.to_thread(
            _open_next,
            found,
            action_model,
            coordinates,
            request,
            following,
            session_id=session_id,
            graph_id=graph_id,
            expires_in=expires_in,
            context=_retry_context(context, _retry_of),
        )
    if execution_state(resolved) == "retry":
        return await arequest_approval(
            action_model,
            authority=found,
            risk=risk,
            choices=choices,
            expires_in=expires_in,
            session_id=session_id,
            graph_id=graph_id,
            context=context,
            idempotent=idempotent,
            langchain_ui=langchain_ui,
            _retry_of=request.id,
        )
    return await asyncio.to_thread(at_time_of_use, found, request, resolved, action_model)


def _prejudged(
    authority: ApprovalAuthority,
    request: Request,
    recorded: ApprovalResolved | None,
    produced: list[Any],
    answer: BoundAnswer,
) -> BoundAnswer:
    """:func:`prejudge`, except for an edit or ignore the gate's own reading of a LangChain
    UI answer produced (recorded after the answer is accepted)."""
    if isinstance(answer, DeferredAnswer) and any(answer is item for item in produced):
        return answer
    return prejudge(authority, request, recorded, answer)


def _record_deferred(
    authority: ApprovalAuthority, request: Request, deferred: DeferredAnswer
) -> ApprovalResolved:
    """Record an accepted edit or ignore (in a worker thread). Accepted, it can only fail
    closed now: a refusal (nothing recorded) is an ``invalid`` result that runs nothing."""
    try:
        return deferred.record()
    except (AAISValidationError, ForbiddenError) as error:
        return resolution_envelope(
            request,
            outcome="invalid",
            message=str(error)[:2000],
            now=authority.clock(),
            sequence=authority.ledger.last_sequence(),
        )

"""Who may answer a gate from inside the graph, and as whom: the run's answer source.

A gate accepts two answers: an ``approval.resolved`` notice, worth only the
resolution the authority already recorded, and a raw ``approval.decided``, which
the gate records itself. The actor of a raw decision must come from an
authenticated channel (DESIGN invariant 7), and what that channel is depends on
who runs the graph, never on the answer:

- **Served by aais-agui** (``configurable[RECORDED_ONLY_KEY]``, set by the server,
  out of clients' reach): every presenter records through the authority under its
  authenticated actor first and resumes with the notice, so a raw decision that
  reaches the gate by any other route is refused.
- **LangGraph Server** (the server's reserved ``configurable`` keys are present):
  the actor is the user the server's custom auth put in
  ``configurable["langgraph_auth_user"]``, replacing whatever the body names. With
  no authentication configured, raw decisions are refused unless the deployment
  sets ``AAIS_ALLOW_UNAUTHENTICATED_DECISIONS=1`` (local development; logged loudly).
- **In process** (neither): the caller is trusted code holding the graph; the
  body's actor is recorded as given (``Command(resume={id: decided})``).

Whichever the run, a driver may hand the run answers the one planner already
authorized but has not recorded (:class:`AuthorizedAnswers` in
``configurable[AUTHORIZED_ANSWERS_KEY]``, a Python object no client input can
produce): the gate records each one under the planner's actor, with its execution
claim, in one ledger write. A raw decision LangGraph hands a gate again after
that gate recorded it (a task that failed after consuming its answer keeps it) is
worth the recorded resolution of that decision, nothing more.

Refusals are raised while LangGraph validates the resume value, so the interrupt
stays pending for a correct answer (see :mod:`.response`).
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config

from ..authority import Principal
from ..ledger import StoredRequest
from ..protocol import AAISValidationError, Actor, ApprovalDecided, ApprovalResolved, Resolution
from .response import BoundAnswer, refuse

__all__ = [
    "ALLOW_UNAUTHENTICATED_VAR",
    "AUTHORIZED_ANSWERS_KEY",
    "LANGGRAPH_AUTH_USER_KEY",
    "RECORDED_ONLY_KEY",
    "AnswerSource",
    "AuthorizedAnswer",
    "AuthorizedAnswers",
    "actor_from_langgraph_user",
    "answer_source",
    "on_langgraph_server",
]

logger = logging.getLogger(__name__)

RECORDED_ONLY_KEY = "aais_recorded_answers_only"
"""``configurable`` key: when true, gates accept only resolutions the authority recorded."""

LANGGRAPH_AUTH_USER_KEY = "langgraph_auth_user"
"""LangGraph Server's reserved ``configurable`` key for the authenticated user."""

AUTHORIZED_ANSWERS_KEY = "aais_authorized_answers"
"""``configurable`` key: the :class:`AuthorizedAnswers` a driver hands this run."""

ALLOW_UNAUTHENTICATED_VAR = "AAIS_ALLOW_UNAUTHENTICATED_DECISIONS"
"""``1`` lets an unauthenticated LangGraph Server record raw decisions (local development)."""

# Keys LangGraph Server sets on every run and strips from client input.
_SERVER_KEYS = (LANGGRAPH_AUTH_USER_KEY, "langgraph_auth_user_id", "langgraph_request_id")

RECORDED_ONLY = (
    "this graph accepts only decisions recorded by its server; answer through the "
    "server's AG-UI resume or POST /approvals/{request_id}/decisions"
)
UNAUTHENTICATED = (
    "LangGraph Server runs this graph without authentication, so a decision has no "
    "authenticated actor; configure custom auth (langgraph.json 'auth') or, for local "
    f"development only, set {ALLOW_UNAUTHENTICATED_VAR}=1"
)

S = TypeVar("S")


@dataclass
class AuthorizedAnswer:
    """A decision the one planner authorized for a run and did not record: the gate it
    answers records it as ``actor``, and puts what that write answered in ``recorded``.

    Args:
        decided: the decision, as the planner parsed it.
        actor: who gives it (the authenticated channel's; None: trusted in-process code).
        stored: its request's stored row, read once by the planner.
    """

    decided: ApprovalDecided
    actor: Principal | Actor | Mapping[str, Any] | None
    stored: StoredRequest
    recorded: ApprovalResolved | None = None
    """The resolution the gate's write answered (None until a gate took the answer)."""

    @property
    def resolution(self) -> Resolution | None:
        """What the answer came to (:attr:`recorded`'s resolution), None until recorded."""
        return None if self.recorded is None else self.recorded.resolution


class AuthorizedAnswers:
    """The answers a driver hands one run (``configurable[AUTHORIZED_ANSWERS_KEY]``), by
    request id; filled by the planner before the run starts, read by its gates."""

    __slots__ = ("_by_request",)

    def __init__(self) -> None:
        self._by_request: dict[str, AuthorizedAnswer] = {}

    def add(self, answer: AuthorizedAnswer) -> None:
        """Hand ``answer`` to the run (one per request)."""
        self._by_request[answer.stored.request_id] = answer

    def __len__(self) -> int:
        return len(self._by_request)

    def __iter__(self) -> Iterator[AuthorizedAnswer]:
        return iter(self._by_request.values())

    def stored_row(self, request_id: str) -> StoredRequest | None:
        """The stored row of ``request_id`` as the planner read it for this run, if it
        handed an answer to that request."""
        found = self._by_request.get(request_id)
        return None if found is None else found.stored

    def for_answer(self, answer: BoundAnswer) -> AuthorizedAnswer | None:
        """The handed answer ``answer`` is (the same decision for the same request), or None."""
        if not isinstance(answer, ApprovalDecided):
            return None
        found = self._by_request.get(answer.decision.request_id)
        if found is None or found.decided.decision != answer.decision:
            return None
        return found


def authorized_answers(configurable: Mapping[str, Any]) -> AuthorizedAnswers | None:
    """The answers handed to the run, when a driver handed any (never client input)."""
    found = configurable.get(AUTHORIZED_ANSWERS_KEY)
    return found if isinstance(found, AuthorizedAnswers) else None


def replayed(answer: BoundAnswer, recorded: ApprovalResolved | None) -> bool:
    """True for a raw decision the gate already recorded (the same decision id and digest
    as the recorded resolution): LangGraph handing back an answer a task consumed."""
    if recorded is None or not isinstance(answer, ApprovalDecided):
        return False
    resolution = recorded.resolution
    return (
        resolution.decision_id == answer.decision.id
        and resolution.action_digest == answer.decision.action_digest
    )


@dataclass(frozen=True)
class AnswerSource:
    """How a gate treats a raw ``approval.decided``: refuse it, or record it as ``actor``.

    ``refusal`` set: raw decisions are refused with it. Otherwise ``actor`` (when
    set) replaces the decision's actor; None keeps the body's actor (in process,
    or on an unauthenticated server that opted in: ``warn`` logs each one).
    """

    refusal: str | None = None
    actor: Actor | None = None
    pointer: str = "/decision"
    warn: bool = False
    authorized: AuthorizedAnswers | None = None
    """The answers the planner authorized for this run (recorded by the gate as given)."""

    def admit(self, answer: BoundAnswer, recorded: ApprovalResolved | None = None) -> BoundAnswer:
        """The answer as the gate may judge it, or raise the refusal (keeps the interrupt).

        ``recorded``: the request's resolution read before the interrupt; a raw decision
        it records is that resolution's notice (:func:`replayed`)."""
        if not isinstance(answer, ApprovalDecided):
            return answer  # a notice is judged against the ledger alone
        if self.authorized is not None and self.authorized.for_answer(answer) is not None:
            return answer  # authorized by the planner, under the actor it names
        if recorded is not None and replayed(answer, recorded):
            return recorded
        if self.refusal is not None:
            raise refuse(self.pointer, self.refusal)
        if self.warn:
            logger.warning(
                "%s=1: recording an approval decision under the actor its body names, "
                "without authentication. Never run a deployment like this.",
                ALLOW_UNAUTHENTICATED_VAR,
            )
        if self.actor is None:
            return answer
        decision = answer.decision.model_copy(update={"actor": self.actor})
        return answer.model_copy(update={"decision": decision})

    def guard(
        self, settle: Callable[[BoundAnswer], S], recorded: ApprovalResolved | None = None
    ) -> Callable[[BoundAnswer], S]:
        """``settle`` behind :meth:`admit` (``recorded``: as :meth:`admit` takes it)."""
        if (
            self.refusal is None
            and self.actor is None
            and not self.warn
            and self.authorized is None
            and recorded is None
        ):
            return settle
        return lambda answer: settle(self.admit(answer, recorded))


def answer_source(config: RunnableConfig | None = None) -> AnswerSource:
    """The answer source of the calling run (see the module docstring)."""
    cfg = config if config is not None else get_config()
    configurable: Mapping[str, Any] = cfg.get("configurable") or {}
    handed = authorized_answers(configurable)
    if configurable.get(RECORDED_ONLY_KEY):
        return AnswerSource(refusal=RECORDED_ONLY, authorized=handed)
    if not on_langgraph_server(configurable):
        return AnswerSource(authorized=handed)
    actor = actor_from_langgraph_user(configurable.get(LANGGRAPH_AUTH_USER_KEY))
    if actor is not None:
        return AnswerSource(actor=actor, authorized=handed)
    if os.environ.get(ALLOW_UNAUTHENTICATED_VAR, "").strip() == "1":
        return AnswerSource(warn=True, authorized=handed)
    return AnswerSource(refusal=UNAUTHENTICATED, pointer="/decision/actor", authorized=handed)


def on_langgraph_server(configurable: Mapping[str, Any]) -> bool:
    """True for a run LangGraph Server started: its reserved keys are in ``configurable``.

    There every other ``configurable`` key is client input (``config`` and
    ``context`` of the run request), so a gate trusts none of its own keys.
    """
    return any(key in configurable for key in _SERVER_KEYS)


def _field(user: Any, name: str) -> Any:
    if isinstance(user, Mapping):
        return user.get(name)
    try:
        return getattr(user, name, None)
    except (NotImplementedError, KeyError):
        return None


def actor_from_langgraph_user(user: Any) -> Actor | None:
    """The AAIS actor of LangGraph Server's authenticated user, or None if unauthenticated.

    ``identity`` becomes the actor id when it is a valid AAIS id, else
    ``sha256:`` + the hex digest of it (one id per identity; the identity is kept
    as ``display_name``). The type is ``human`` unless the auth handler's user
    says ``aais_actor_type: "policy"``.
    """
    if user is None or _field(user, "is_authenticated") is False:
        return None
    identity = _field(user, "identity")
    if not isinstance(identity, str) or not identity:
        return None
    display = _field(user, "display_name")
    display = display if isinstance(display, str) and display else identity
    kind = _field(user, "aais_actor_type")
    fields = {
        "type": kind if kind in ("human", "policy") else "human",
        "display_name": display[:200],
        "authenticated_by": "langgraph-server auth",
    }
    try:
        return Actor.from_data({"id": identity, **fields})
    except AAISValidationError:
        digest = hashlib.sha256(identity.encode("utf-8", "surrogatepass")).hexdigest()
        try:
            return Actor.from_data({"id": f"sha256:{digest}", **fields})
        except AAISValidationError:  # a display name that is not valid text
            return Actor.from_data({"id": f"sha256:{digest}", "type": fields["type"]})

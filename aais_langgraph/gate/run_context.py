"""What a gate knows about the run it is in: thread, task namespace, node, authority."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config

from ..authority import ApprovalAuthority
from ..authority.limits import checked_requester
from ..ledger import Ledger, ledger_location, same_ledger
from ..protocol import Origin, id_for
from ..protocol.extensions import SUBAGENT_EXTENSION
from ..server_env import aauthority_from_env, authority_from_env, env_authority_configured
from .answer_sources import (
    LANGGRAPH_AUTH_USER_KEY,
    RECORDED_ONLY_KEY,
    actor_from_langgraph_user,
    on_langgraph_server,
)
from .seams import interrupt_id_for, resume_map, saved_answers, scratchpad

AUTHORITY_KEY = "aais_authority"
"""``config["configurable"]`` key (or runtime-context attribute ``authority``) for the authority."""

CLAIM_TTL_KEY = "aais_claim_ttl"
"""``config["configurable"]`` key: seconds an approval's execution claim lasts. A resume
driven under a run lease passes :func:`claim_ttl_for_lease`, so a crashed run's claim
is gone before its lease is."""

_CALLS: ContextVar[tuple[object, int] | None] = ContextVar("aais_gate_calls", default=None)


@dataclass(frozen=True)
class RunCoordinates:
    """Where a gate call sits: stable across the node's re-execution on resume."""

    thread_id: str
    checkpoint_ns: str
    node: str | None
    run_id: str | None
    call_index: int
    answer_is_fresh: bool = True
    """Whether this gate's answer (if any) was submitted for this run, rather than
    replayed from an earlier execution of the task that already consumed it."""
    retry_of: str | None = None
    """The request a reviewer asked to approve again (its outcome was unknown)."""
    requester: str | None = None
    """Who the run acts for (``configurable[REQUESTER_KEY]``): bounded and recorded."""
    agent_name: str | None = None
    """The name of the agent the call runs in (LangChain's ``lc_agent_name``), if any."""

    @property
    def request_id(self) -> str:
        """Deterministic request id for this thread, task and call index."""
        if self.retry_of is not None:
            return retry_request_id(self.retry_of)
        key = f"{self.thread_id}\x00{self.checkpoint_ns}\x00{self.call_index}"
        return "apr_" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _next_call_index(configurable: Mapping[str, Any], *, consume: bool = True) -> int:
    """Count gate calls within one execution of a task (the scratchpad is per execution)."""
    pad = scratchpad(configurable)
    current = _CALLS.get()
    index = current[1] + 1 if current is not None and current[0] is pad else 0
    if consume:
        _CALLS.set((pad, index))
    return index


def peek_coordinates(config: RunnableConfig | None = None) -> RunCoordinates:
    """The coordinates the next gate call in this execution will get, without using them up.

    Lets a caller look up the request that call would raise (or find already
    stored) before deciding to make it, e.g. a tool gate checking for an edit.
    """
    return current_coordinates(config, _consume=False)


def retry_request_id(request_id: str) -> str:
    """The id of the fresh request that replaces ``request_id`` after a ``retry``."""
    digest = hashlib.sha256(f"{request_id}\x00retry".encode()).hexdigest()
    return "apr_" + digest[:32]


def current_coordinates(
    config: RunnableConfig | None = None,
    *,
    retry_of: str | None = None,
    _consume: bool = True,
) -> RunCoordinates:
    """Read the run coordinates of the calling node or task."""
    cfg = config if config is not None else get_config()
    configurable = cfg.get("configurable") or {}
    thread_id = configurable.get("thread_id")
    if thread_id is None:
        raise RuntimeError(
            "thread_id: request_approval needs a checkpointer and a thread_id in the config"
        )
    metadata = cfg.get("metadata") or {}
    run_id = None
    try:
        from langgraph.runtime import get_runtime

        info = get_runtime().execution_info
        run_id = info.run_id if info is not None else None
    except (RuntimeError, AttributeError):
        run_id = None
    return RunCoordinates(
        thread_id=str(thread_id),
        checkpoint_ns=str(configurable.get("checkpoint_ns", "")),
        node=metadata.get("langgraph_node"),
        run_id=run_id,
        call_index=(index := _next_call_index(configurable, consume=_consume)),
        answer_is_fresh=_answer_is_fresh(configurable, index),
        retry_of=retry_of,
        requester=_requester(configurable),
        agent_name=_agent_name(metadata),
    )


def _agent_name(metadata: Mapping[str, Any]) -> str | None:
    name = metadata.get("lc_agent_name")
    return name if isinstance(name, str) and name else None


def subagent_run_id(checkpoint_ns: str) -> str | None:
    """The id of the subgraph invocation a call at ``checkpoint_ns`` runs in (the AAIS id
    of the parent namespace, the same across the pause and the resume); None at the top
    level of the thread's graph."""
    parent, separator, _ = checkpoint_ns.rpartition("|")
    return id_for(parent) if separator and parent else None


def subagent_extension(coordinates: RunCoordinates) -> dict[str, Any]:
    """The :data:`~aais_langgraph.protocol.extensions.SUBAGENT_EXTENSION` of a request
    raised at ``coordinates`` (empty at the top level)."""
    run_id = subagent_run_id(coordinates.checkpoint_ns)
    if run_id is None:
        return {}
    named = {"name": coordinates.agent_name} if coordinates.agent_name else {}
    return {SUBAGENT_EXTENSION: {"run_id": run_id, **named}}


REQUESTER_KEY = "aais_requester"
"""``config["configurable"]`` key naming the authenticated person a run acts for (the
AG-UI server sets it to the signed-in user): stored in each request's context as
``requester`` and held to :class:`~aais_langgraph.authority.RequestLimits`."""


def _requester(configurable: Mapping[str, Any]) -> str | None:
    if on_langgraph_server(configurable):
        # There ``configurable`` is client input: the run acts for its authenticated user.
        actor = actor_from_langgraph_user(configurable.get(LANGGRAPH_AUTH_USER_KEY))
        return None if actor is None else actor.id
    return checked_requester(configurable.get(REQUESTER_KEY), f"configurable.{REQUESTER_KEY}")


def _answer_is_fresh(configurable: Mapping[str, Any], call_index: int) -> bool:
    """True unless LangGraph will hand this gate an answer saved by an earlier execution.

    A resume map (``Command(resume={id: value})``) names the interrupts answered
    now; a plain resume fills the first slot past the answers already saved.
    """
    answered = resume_map(configurable)
    if answered:
        namespace = str(configurable.get("checkpoint_ns", ""))
        return interrupt_id_for(namespace, call_index) in answered
    return call_index >= len(saved_answers(configurable))


def safe_id(text: str | None, *, fallback: str | None = None) -> str | None:
    """The AAIS id for free text (or ``fallback`` when there is none), for origin fields.

    Injective (:func:`~aais_langgraph.protocol.id_for`): thread ids come from
    clients, and two threads must never share a session, nor its grants.
    """
    if not text:
        return fallback
    return id_for(text)


def derive_origin(
    coordinates: RunCoordinates,
    *,
    harness: str,
    session_id: str | None = None,
    graph_id: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> Origin:
    """AAIS origin of a gate call: session = thread unless given, plus run coordinates.

    Args:
        coordinates: the run's thread, checkpoint namespace and task.
        harness: the ``origin.harness``.
        session_id: the session (default: the thread id).
        graph_id: names the graph.
        extra: further origin members.
    """
    fields: dict[str, Any] = {
        "harness": harness,
        "session_id": safe_id(session_id or coordinates.thread_id),
        "task_id": safe_id(coordinates.checkpoint_ns.split("|")[-1].split(":")[-1]),
        "node_id": safe_id(coordinates.node),
        "run_id": safe_id(coordinates.run_id),
        "graph_id": safe_id(graph_id),
        # SPEC section 7: the subgraph invocation (a deep agent's subagent) that asked.
        "subagent_run_id": subagent_run_id(coordinates.checkpoint_ns),
    }
    fields.update(extra or {})
    return Origin.from_data({k: v for k, v in fields.items() if v is not None}, pointer="/origin")


def authority_in(context: Any, config: RunnableConfig | None) -> ApprovalAuthority | None:
    """The authority a run carries: runtime context ``authority``, else ``configurable``."""
    candidate = (
        context.get("authority")
        if isinstance(context, Mapping)
        else getattr(context, "authority", None)
    )
    if isinstance(candidate, ApprovalAuthority):
        return candidate
    candidate = ((config or {}).get("configurable") or {}).get(AUTHORITY_KEY)
    if isinstance(candidate, ApprovalAuthority):
        return candidate
    return None


MISSING_AUTHORITY = (
    "authority: pass authority=..., give the graph a context with an 'authority' "
    f"attribute, set config['configurable']['{AUTHORITY_KEY}'], or set the "
    "AAIS_LEDGER_URL environment variable"
)


class MissingAuthorityError(RuntimeError, ValueError):
    """No authority was given or found (a ``RuntimeError`` inside a run, as LangGraph's
    own configuration errors are, and a ``ValueError`` for a caller's arguments)."""


class LedgerMismatchError(RuntimeError, ValueError):
    """A gate was handed an authority over another ledger than the one serving its graph
    reads: the requests it records would reach nobody, and every answer would find no
    such request. Raised when serving starts, or at the gate's first request."""

    @classmethod
    def between(cls, gate_ledger: Ledger, served_ledger: Ledger) -> LedgerMismatchError:
        """The refusal naming both places (paths and URLs, never a password)."""
        return cls(
            f"authority: a gate records its approvals in {ledger_location(gate_ledger)}, but "
            f"the server reads {ledger_location(served_ledger)}: nobody would see them, and "
            "every answer would find no such request. Leave authority= out of the gates (a "
            "served run carries the server's authority), or serve the gates' ledger "
            "(aais-agui serve --db)"
        )


def refuse_other_ledger(explicit: ApprovalAuthority, config: RunnableConfig | None) -> None:
    """:class:`LedgerMismatchError` when a served run (one whose gates accept only recorded
    answers) carries an authority over another ledger than ``explicit``'s."""
    configurable = (config or {}).get("configurable") or {}
    served = configurable.get(AUTHORITY_KEY)
    if not configurable.get(RECORDED_ONLY_KEY) or not isinstance(served, ApprovalAuthority):
        return
    if served is not explicit and not same_ledger(explicit.ledger, served.ledger):
        raise LedgerMismatchError.between(explicit.ledger, served.ledger)


def _carried_authority(
    explicit: ApprovalAuthority | None, config: RunnableConfig | None, context: Any
) -> ApprovalAuthority | None:
    """The authority given or carried by the run (no I/O): see :func:`find_authority`."""
    if explicit is not None:
        if config is None:
            try:
                config = get_config()
            except RuntimeError:
                config = None
        refuse_other_ledger(explicit, config)
        return explicit
    if context is None:
        try:
            from langgraph.runtime import get_runtime

            context = get_runtime().context
        except (RuntimeError, AttributeError):
            context = None
    if config is None:
        try:
            config = get_config()
        except RuntimeError:
            config = None
    return authority_in(context, config)


def find_authority(
    explicit: ApprovalAuthority | None,
    config: RunnableConfig | None = None,
    *,
    context: Any = None,
) -> ApprovalAuthority:
    """The authority to use, the one rule for the gate, resumes and edits: the argument,
    else the runtime context's ``authority`` (``context``, or inside a run the run's),
    else ``configurable`` (``config``, or inside a run the run's), else the one
    ``AAIS_LEDGER_URL`` configures (:mod:`aais_langgraph.server_env`). An argument over
    another ledger than a served run's authority is refused (:class:`LedgerMismatchError`)."""
    found = _carried_authority(explicit, config, context)
    if found is None and env_authority_configured():
        # Hosted graphs (LangGraph Server) cannot be handed objects: use AAIS_LEDGER_URL.
        found = authority_from_env()
    if found is None:
        raise MissingAuthorityError(MISSING_AUTHORITY)
    return found


async def afind_authority(
    explicit: ApprovalAuthority | None,
    config: RunnableConfig | None = None,
    *,
    context: Any = None,
) -> ApprovalAuthority:
    """Async twin of :func:`find_authority`: the same rule, and the ledger
    ``AAIS_LEDGER_URL`` names is opened in a worker thread, never on the event loop."""
    found = _carried_authority(explicit, config, context)
    if found is None and env_authority_configured():
        found = await aauthority_from_env()
    if found is None:
        raise MissingAuthorityError(MISSING_AUTHORITY)
    return found


def claim_ttl(config: RunnableConfig | None = None, default: float = 60.0) -> float:
    """The execution-claim lifetime for this run (see :data:`CLAIM_TTL_KEY`); on
    LangGraph Server, where clients write ``configurable``, always ``default``."""
    cfg = config if config is not None else get_config()
    configurable = cfg.get("configurable") or {}
    if on_langgraph_server(configurable):
        return default
    value = configurable.get(CLAIM_TTL_KEY, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        return default
    return float(value)


def claim_ttl_for_lease(lease_ttl: float) -> float:
    """A claim lifetime that ends before the lease of the run that took it.

    The lease is renewed every third of its TTL, so it outlives its holder by at
    least two thirds of the TTL after any claim; half the TTL is inside that.
    """
    return lease_ttl / 2

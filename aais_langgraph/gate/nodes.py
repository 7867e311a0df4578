"""Ready-made gates: a node that writes the resolution to state, and a node decorator."""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any, TypeVar

from ..authority import ApprovalAuthority
from ..protocol import Action, ApprovalResolved, same_action
from .execution import finish
from .request import arequest_approval, request_approval
from .run_context import afind_authority, find_authority, peek_coordinates, retry_request_id

ActionSource = Callable[[Any], "Action | Mapping[str, Any]"] | str
F = TypeVar("F", bound=Callable[..., Any])

_MAX_RETRIES = 16
APPROVAL_KEY: ContextVar[str | None] = ContextVar("aais_approval_key", default=None)


def approval_key() -> str:
    """The idempotency key of the approved action the calling node body performs.

    Inside a node decorated with :func:`requires_approval` (or a tool gated by
    ``ApprovalToolNode`` / ``ApprovalMiddleware``) this is the approved request's
    deterministic id (thread, task and call index): the same on every
    re-execution of the node. A body declared ``idempotent=True`` runs again when
    the replica running it died, so it must deduplicate its effect on this key.
    (A node calling ``request_approval`` itself has ``resolved.resolution.request_id``.)
    """
    key = APPROVAL_KEY.get()
    if key is None:
        raise RuntimeError(
            "approval_key(): only inside an approved body (requires_approval, or a gated tool)"
        )
    return key


def key_of(asked: str, resolved: ApprovalResolved) -> str:
    """The idempotency key of an approved call: the id of the request the gate raised
    (``asked``), or of the fresh request a reviewer's retry replaced it with.

    A standing approval (policy, grant) names a fresh resolution id on every run,
    so it is not a key; the gate's deterministic request id is.
    """
    granted = resolved.resolution.request_id
    candidate = asked
    for _ in range(_MAX_RETRIES):
        if candidate == granted:
            return granted
        candidate = retry_request_id(candidate)
    return asked


def run_approved(request_id: str, body: Callable[[], Any]) -> Any:
    """Run an approved body with its :func:`approval_key`; the caller records it finished."""
    token = APPROVAL_KEY.set(request_id)
    try:
        return body()
    finally:
        APPROVAL_KEY.reset(token)


def _action_of(source: ActionSource, state: Any) -> Action:
    if isinstance(source, str):
        value = state[source] if isinstance(state, Mapping) else getattr(state, source)
    else:
        value = source(state)
    return Action.from_data(value, pointer="/action")


def approval_node(
    action: ActionSource = "action",
    *,
    result_key: str = "approval",
    authority: ApprovalAuthority | None = None,
    **request_options: Any,
) -> Callable[[Any], dict[str, Any]]:
    """A gate node: reads the action from state (a key or a function) and writes
    the ``approval.resolved`` envelope (a JSON dict) to ``state[result_key]``.

    Route on it with a conditional edge, e.g.
    ``lambda s: "run" if s["approval"]["resolution"]["outcome"] == "approved" else "skip"``.

    Args:
        action: the state key holding the action, or a function of state returning it.
        result_key: the state key the ``approval.resolved`` envelope is written to.
        authority: the authority (default: the one in the run's ``configurable``).
        **request_options: passed to :func:`~.request.request_approval` (``risk``, ``choices``,
            ``expires_in``, ...).
    """

    def gate(state: Any) -> dict[str, Any]:
        resolved = request_approval(
            _action_of(action, state), authority=authority, **request_options
        )
        return {result_key: resolved.to_json()}

    return gate


def is_approved_for(resolved: ApprovalResolved, action: Action) -> bool:
    """Time-of-use check: approved, and for exactly this action."""
    return resolved.approved and same_action(resolved.resolution.action_digest, action)


def requires_approval(
    action: ActionSource,
    *,
    on_reject: Callable[[Any, ApprovalResolved], Any] | Mapping[str, Any] | None = None,
    authority: ApprovalAuthority | None = None,
    **request_options: Any,
) -> Callable[[F], F]:
    """Decorate a node so its body runs only after an approval of the action it derives.

    The action is recomputed from state right before the body runs and must have
    the approved digest. Otherwise the node returns ``on_reject`` (a state update,
    or a function of state and resolution); by default no update. The body can
    read its idempotency key with :func:`approval_key`.

    The body runs at most once per approval, even across crashes: the gate
    records that it finished as soon as it returns, and a re-run after a crash
    mid-body raises :class:`~aais_langgraph.gate.ExecutionUnknownError` for a human
    to reconcile. ``idempotent=True`` runs the body again instead (it must then
    deduplicate on :func:`approval_key`).

    Args:
        action: a function of state returning the action the body will run.
        on_reject: the state update (or a function of state and resolution) when not approved.
        authority: the authority (default: the one in the run's ``configurable``).
        **request_options: passed to :func:`~.request.request_approval` (``risk``,
            ``idempotent``, ...).
    """

    def rejected(state: Any, resolved: ApprovalResolved) -> Any:
        if on_reject is None:
            return {}
        if callable(on_reject):
            return on_reject(state, resolved)
        return dict(on_reject)

    def decorate(node: F) -> F:
        if inspect.iscoroutinefunction(node):

            @functools.wraps(node)
            async def async_gate(state: Any, *args: Any, **kwargs: Any) -> Any:
                asked = peek_coordinates().request_id
                found = await afind_authority(authority)
                resolved = await arequest_approval(
                    _action_of(action, state), authority=found, **request_options
                )
                if not is_approved_for(resolved, _action_of(action, state)):
                    return rejected(state, resolved)
                key = key_of(asked, resolved)
                token = APPROVAL_KEY.set(key)
                try:
                    result = await node(state, *args, **kwargs)
                finally:
                    APPROVAL_KEY.reset(token)
                await asyncio.to_thread(finish, found, key)
                return result

            return async_gate  # type: ignore[return-value]

        @functools.wraps(node)
        def gate(state: Any, *args: Any, **kwargs: Any) -> Any:
            asked = peek_coordinates().request_id
            resolved = request_approval(
                _action_of(action, state), authority=authority, **request_options
            )
            if not is_approved_for(resolved, _action_of(action, state)):
                return rejected(state, resolved)
            key = key_of(asked, resolved)
            result = run_approved(key, lambda: node(state, *args, **kwargs))
            finish(find_authority(authority), key)
            return result

        return gate  # type: ignore[return-value]

    return decorate

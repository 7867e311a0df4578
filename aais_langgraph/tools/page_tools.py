"""Approvals for page tools: tools the client declares (AG-UI frontend tools, WebMCP-style).

A page tool runs in the user's page, not on the server: the model's call is
handed to the client, which runs it and sends the result back. Gating one means
asking for approval *before* the call leaves the server. :class:`PageToolGate`
is a graph node that does that, one task per call (route with
:meth:`PageToolGate.route`), following the AAIS WebMCP mapping:

- the action is ``kind: tool.call`` with the exact tool name, and its
  ``arguments`` hold the page ``origin``, the ``registry_revision`` (the digest of
  the tool definitions the client declared, :func:`registry_revision`) and the
  call's own ``arguments``: all three are under the ``action_digest``;
- at time of use the action is computed again from the page the *current* run
  serves (:class:`PageBinding`, put in ``configurable[PAGE_BINDING_KEY]`` by the
  server, see :mod:`aais_agui.frontend_tools`): a page that declares other tools,
  or another origin, makes the approval ``stale`` and the call is not released;
- a refused call (denied, cancelled, expired, stale) gets an error
  ``ToolMessage`` the model reads; the client never sees it;
- a released call is recorded ``executed`` in the ledger (released at most once),
  and the server streams it to the client as ordinary ``TOOL_CALL_*`` events.

Offered scopes are ``once`` only (the mapping's recommended default); grants and
policy approvals do not skip the card, a policy denial refuses the call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.messages.tool import ToolCall
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.constants import END
from langgraph.types import Send

from ..authority import ApprovalAuthority
from ..gate import ExecutionUnknownError, arequest_approval, request_approval
from ..gate.execution import finish
from ..gate.quorum import Quorum
from ..gate.run_context import afind_authority, derive_origin, find_authority, peek_coordinates
from ..protocol import (
    AAISValidationError,
    Action,
    ApprovalRequested,
    ApprovalResolved,
    build_request,
    canonical_json,
    same_action,
    sha256_digest,
)
from ..protocol.builders import DEFAULT_RISK
from ..protocol.extensions import EXTENSION_NAMESPACE, TOOL_CALL_ID_EXTENSION
from .call_gate import request_context, requester_extension
from .config import InterruptOn, ToolRule, rules_from
from .describe import SUMMARY_LIMIT
from .messages import not_run_message, refusal_message, time_of_use_message, unpresentable_message
from .tool_node import pending_tool_calls

PAGE_BINDING_KEY = "aais_page"
"""``configurable`` key of the :class:`PageBinding` (as JSON) of the page a run serves."""
PAGE_TOOL_EXTENSION = EXTENSION_NAMESPACE + "page_tool"
"""Request extension: True on a request for a page tool call."""

NO_PAGE_MESSAGE = (
    "This call to '{tool}' was approved while no page was connected to run it, so it was "
    "not run. Ask the user before trying again."
)
"""What the model reads when an approval arrives outside the page (inbox, CLI) and the
run it resumes has no page to hand the call to."""

_TOOL_FIELDS = ("name", "description", "parameters")


def registry_revision(tools: Sequence[Mapping[str, Any]]) -> str:
    """The registry revision of a page: ``sha256:`` + hex SHA-256 of the RFC 8785 form of
    the declared tool definitions (``name``, ``description``, ``parameters``), ordered by
    name. Any change to any declared tool changes it."""
    definitions = []
    for index, tool in enumerate(tools):
        name = tool.get("name")
        if not isinstance(name, str) or not name:
            raise AAISValidationError(f"/tools/{index}/name", "must be a non-empty string")
        definition = {key: tool[key] for key in _TOOL_FIELDS if tool.get(key) is not None}
        canonical_json(definition, pointer=f"/tools/{index}")  # I-JSON, named where it is
        definitions.append(definition)
    definitions.sort(key=lambda definition: str(definition["name"]))
    return sha256_digest(definitions)


@dataclass(frozen=True)
class PageBinding:
    """The page a run serves: its ``origin`` and the ``registry_revision`` of its tools.

    ``tools`` are the names the page declared. The server builds it for every run
    from the request's ``Origin`` header (or a declared origin) and
    ``RunAgentInput.tools``.
    """

    origin: str | None
    registry_revision: str
    tools: tuple[str, ...] = ()

    @classmethod
    def of(cls, tools: Sequence[Mapping[str, Any]], *, origin: str | None) -> PageBinding:
        """The binding of a page that declared ``tools`` and is served to ``origin``."""
        names = tuple(sorted(str(tool.get("name")) for tool in tools))
        return cls(origin=origin, registry_revision=registry_revision(tools), tools=names)

    def to_json(self) -> dict[str, Any]:
        """The binding as plain data (what ``configurable[PAGE_BINDING_KEY]`` holds)."""
        return {
            "origin": self.origin,
            "registry_revision": self.registry_revision,
            "tools": list(self.tools),
        }

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | None) -> PageBinding | None:
        """The binding the run's ``configurable`` carries; None when it serves no page."""
        value = ((config or {}).get("configurable") or {}).get(PAGE_BINDING_KEY)
        if not isinstance(value, Mapping):
            return None
        origin, revision = value.get("origin"), value.get("registry_revision")
        if not isinstance(revision, str) or not (origin is None or isinstance(origin, str)):
            return None
        return cls(origin=origin, registry_revision=revision, tools=tuple(value.get("tools", ())))


def page_tool_arguments(arguments: Mapping[str, Any], page: PageBinding | None) -> dict[str, Any]:
    """The digested ``action.arguments`` of a page tool call: origin, revision, arguments."""
    return {
        "origin": None if page is None else page.origin,
        "registry_revision": None if page is None else page.registry_revision,
        "arguments": dict(arguments),
    }


def summarize_page_call(name: str, arguments: Mapping[str, Any], origin: str | None) -> str:
    """A value-free summary, as a tool call's reads: the page tool, its argument names in
    the call's order and the page origin (``change_background (color) in the page at
    https://app.example``); never an argument's value."""
    text = name
    if arguments:
        text += " (" + ", ".join(str(key) for key in arguments) + ")"
    text += f" in the page at {origin or 'an unknown origin'}"
    return text if len(text) <= SUMMARY_LIMIT else text[: SUMMARY_LIMIT - 1] + "…"


class PageToolGate:
    """A graph node asking for approval of page tool calls before they reach the client.

    ``interrupt_on`` maps page tool names to ``True`` or a
    :class:`~aais_langgraph.tools.ToolApprovalConfig` (as for ``ApprovalMiddleware``;
    ``session_scope`` and edits are not offered for page tools). Add it as a node and
    route the model's page tool calls to it, one task each::

        gate = PageToolGate({"change_background": True}, name="page_tools", model="model")
        graph.add_node("page_tools", gate.node)
        graph.add_conditional_edges("model", gate.route, ["page_tools", END])
        graph.add_conditional_edges("page_tools", gate.after, ["model", END])

    Serve the graph with the same gate (``create_app(..., page_tools=gate)``) so the
    server holds the calls' ``TOOL_CALL_*`` events until they are released.

    Args:
        interrupt_on: which page tools need approval, and how each is asked.
        authority: the authority; by default the run's (``configurable``).
        name: the name of this node in the graph (where :meth:`route` sends calls).
        model: the node :meth:`after` returns to when every call was refused.
        origin: the page origin to bind when a request carries no ``Origin`` header
            (a client that is not a browser); a browser's ``Origin`` header wins.
        graph_id: the graph's id in the requests' AAIS origin.
        messages_key: the state key of the message list.
    """

    def __init__(
        self,
        interrupt_on: InterruptOn,
        *,
        authority: ApprovalAuthority | None = None,
        name: str = "page_tools",
        model: str = "model",
        origin: str | None = None,
        graph_id: str | None = None,
        messages_key: str = "messages",
    ) -> None:
        for tool, entry in interrupt_on.items():
            if not isinstance(entry, Mapping):
                continue
            if "session_scope" in entry:
                raise ValueError(
                    f"interrupt_on[{tool!r}].session_scope: page tools are approved once"
                )
            if "when" in entry:
                raise ValueError(f"interrupt_on[{tool!r}].when: every page tool call is asked")
            if callable(entry.get("description")):
                raise ValueError(f"interrupt_on[{tool!r}].description: expected text")
        self.rules: dict[str, ToolRule] = rules_from(interrupt_on)
        self.authority = authority
        self.name = name
        self.model = model
        self.origin = origin
        self.graph_id = graph_id
        self.messages_key = messages_key

    @property
    def gated(self) -> frozenset[str]:
        """The names of the page tools whose calls need approval."""
        return frozenset(self.rules)

    def gates(self, tool_name: str) -> bool:
        """True if calls to this page tool need approval."""
        return tool_name in self.rules

    # -- routing -------------------------------------------------------------------------

    def route(self, state: Any) -> list[Send] | str:
        """A conditional edge after the model: one ``Send`` per pending gated page tool
        call, else ``END`` (ungated page tool calls go to the client as they are)."""
        calls = [
            call
            for call in pending_tool_calls(state, messages_key=self.messages_key)
            if self.gates(call["name"])
        ]
        return [Send(self.name, call) for call in calls] or END

    def after(self, state: Any) -> str:
        """A conditional edge after this node: back to the model when every call of the
        last AI message has its answer (all refused), else ``END`` (released calls wait
        for the client's results)."""
        if pending_tool_calls(state, messages_key=self.messages_key):
            return END
        return self.model

    # -- the node ------------------------------------------------------------------------

    @property
    def node(self) -> RunnableLambda[ToolCall, dict[str, Any]]:
        """The node to add to the graph (sync and async)."""
        return RunnableLambda(self.gate, afunc=self.agate, name=self.name)

    def gate(self, call: ToolCall, config: RunnableConfig) -> dict[str, Any]:
        """Gate one page tool call: release it (no update) or answer it with a refusal."""
        authority = find_authority(self.authority, config)
        rule, page = self.rules.get(call["name"]), PageBinding.from_config(config)
        try:
            action = self._open(authority, rule, call, page)
        except (AAISValidationError, ValueError) as error:
            return self._answer(unpresentable_message(call, str(error)))
        if isinstance(action, ToolMessage):
            return self._answer(action)
        unreleased = self._unreleasable(authority, call, action, page)
        if unreleased is not None:
            return self._answer(unreleased)
        try:
            resolved = request_approval(action, authority=authority)
        except ExecutionUnknownError as unknown:
            return self._answer(not_run_message(call, "unknown", unknown.request_id))
        return self._release(authority, call, resolved)

    async def agate(self, call: ToolCall, config: RunnableConfig) -> dict[str, Any]:
        """Async twin of :meth:`gate` (ledger work in a thread)."""
        authority = await afind_authority(self.authority, config)
        rule, page = self.rules.get(call["name"]), PageBinding.from_config(config)
        try:
            action = await asyncio.to_thread(self._open, authority, rule, call, page)
        except (AAISValidationError, ValueError) as error:
            return self._answer(unpresentable_message(call, str(error)))
        if isinstance(action, ToolMessage):
            return self._answer(action)
        unreleased = await asyncio.to_thread(self._unreleasable, authority, call, action, page)
        if unreleased is not None:
            return self._answer(unreleased)
        try:
            resolved = await arequest_approval(action, authority=authority)
        except ExecutionUnknownError as unknown:
            return self._answer(not_run_message(call, "unknown", unknown.request_id))
        return await asyncio.to_thread(self._release, authority, call, resolved)

    # -- steps ---------------------------------------------------------------------------

    def _answer(self, message: ToolMessage) -> dict[str, Any]:
        return {self.messages_key: [message]}

    def _open(
        self,
        authority: ApprovalAuthority,
        rule: ToolRule | None,
        call: ToolCall,
        page: PageBinding | None,
    ) -> Action | ToolMessage:
        """The action as of this run's page; the request is stored the first time."""
        if rule is None:
            raise ValueError(f"page tool {call['name']!r} is not gated by this node")
        call_id = call.get("id")
        if not call_id:
            raise ValueError(f"page tool call to {call['name']!r}: a gated call needs an id")
        arguments = page_tool_arguments(call["args"], page)
        coordinates = peek_coordinates()
        stored = authority.get_stored_request(coordinates.request_id)
        if stored is not None:
            # The request stands as raised; the action *now* binds this run's page.
            shown = ApprovalRequested.from_data(stored.envelope).request.action
            return Action.from_data(
                {**shown.to_json(), "name": call["name"], "arguments": arguments},
                pointer="/action",
            )
        if page is None or page.origin is None:
            raise ValueError(
                f"page tool call to {call['name']!r}: the run serves no page origin to bind"
            )
        fields: dict[str, Any] = {
            "kind": "tool.call",
            "name": call["name"],
            "resource": page.origin,
            "summary": self._summary(rule, call, page),
            "arguments": arguments,
        }
        if rule.presentation is not None:
            fields["presentation"] = rule.presentation.to_json()
        action = Action.from_data(fields, pointer="/action")
        origin = derive_origin(coordinates, harness=authority.harness, graph_id=self.graph_id)
        screening = authority.screen(action, origin=origin, requester=coordinates.requester)
        if screening.resolved is not None and not screening.resolved.approved:
            return refusal_message(call, screening.resolved)
        verdict = screening.verdict
        offered = rule.choices
        if offered is None and verdict.choices is not None:
            offered = tuple(verdict.choices)
        if offered is not None:
            offered = tuple(choice for choice in offered if choice.scope == "once")
        risk = rule.risk if rule.risk is not None else verdict.risk
        # A call that needs several approvers asks each one (request_approval goes on).
        quorum = Quorum.first_for(authority, action, risk if risk is not None else DEFAULT_RISK)
        requested = build_request(
            action,
            origin=origin,
            risk=risk,
            choices=offered,
            expires_in=rule.expires_in or verdict.expires_in or authority.default_expiry,
            request_id=coordinates.request_id,
            created_at=authority.clock(),
            extensions={
                TOOL_CALL_ID_EXTENSION: call_id,
                PAGE_TOOL_EXTENSION: True,
                **requester_extension(coordinates.requester),
                **({} if quorum is None else quorum.extension()),
            },
        )
        authority.add(
            requested,
            thread_id=coordinates.thread_id,
            context=request_context(coordinates, call_id, page_tool=True),
        )
        return action

    @staticmethod
    def _unreleasable(
        authority: ApprovalAuthority, call: ToolCall, action: Action, page: PageBinding | None
    ) -> ToolMessage | None:
        """The answer to a call approved elsewhere for another page (or while no page was
        connected), checked before the approval is taken up: nothing is claimed or run."""
        recorded = authority.get_resolution(peek_coordinates().request_id)
        if recorded is None or not recorded.approved:
            return None
        if same_action(recorded.resolution.action_digest, action):
            return None
        request_id = recorded.resolution.request_id
        if page is None:
            return ToolMessage(
                content=NO_PAGE_MESSAGE.format(tool=call["name"])
                + f" (approval request {request_id})",
                name=call["name"],
                tool_call_id=call.get("id") or "",
                status="error",
                artifact={"aais": recorded.to_json()},
            )
        return time_of_use_message(call, request_id)

    @staticmethod
    def _summary(rule: ToolRule, call: ToolCall, page: PageBinding) -> str:
        if isinstance(rule.description, str):
            return rule.description[:SUMMARY_LIMIT]
        return summarize_page_call(call["name"], call["args"], page.origin)

    def _release(
        self, authority: ApprovalAuthority, call: ToolCall, resolved: ApprovalResolved
    ) -> dict[str, Any]:
        """Release an approval of the action as it is now (``request_approval`` checked the
        digest at time of use), recording it ``executed``; any other outcome answers the
        call with a refusal."""
        request_id = resolved.resolution.request_id
        if not resolved.approved:
            if resolved.resolution.outcome == "stale":
                return self._answer(time_of_use_message(call, request_id))
            return self._answer(refusal_message(call, resolved))
        finish(authority, request_id)
        return {}

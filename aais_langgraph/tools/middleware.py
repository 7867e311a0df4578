"""``ApprovalMiddleware``: AAIS tool-call approvals for LangChain's ``create_agent``.

A drop-in for ``HumanInTheLoopMiddleware``: same ``interrupt_on`` shape, but
each gated call raises its own AAIS request (``create_agent`` already sends each
tool call to its own task), decisions bind by request id and digest, and a
``when`` predicate is asked once per call. Answer with
:func:`~aais_langgraph.threads.resume_with_decisions`; run a call with edited
arguments, in one reviewer action, with :func:`~aais_langgraph.tools.edit_tool_call`.

Needs the ``langchain`` extra.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

from langchain.agents.middleware import AgentMiddleware
from langchain.agents.middleware.types import ToolCallRequest
from langchain_core.messages import ToolMessage
from langgraph.types import Command

from ..authority import ApprovalAuthority
from .call_gate import ToolCallGate
from .config import InterruptOn, ToolCallDescriber, normalised, rules_from
from .messages import EDIT_NOTICE


class ApprovalMiddleware(AgentMiddleware):
    """Pause each gated tool call on an AAIS ``approval.requested`` interrupt.

    ``interrupt_on`` maps tool names to ``True`` (ask with the defaults),
    ``False`` (never ask) or a :class:`~aais_langgraph.tools.ToolApprovalConfig`.
    Tools not listed run untouched. ``authority`` defaults to the one found in the
    runtime context or ``config["configurable"]`` (as for ``request_approval``).

    Put it first in ``middleware=[...]``: middleware listed after it wraps the tool
    inside the gate and runs only for approved calls.
    """

    def __init__(
        self,
        interrupt_on: InterruptOn,
        *,
        authority: ApprovalAuthority | None = None,
        describe: ToolCallDescriber | None = None,
        graph_id: str | None = None,
        edit_notice: str | None = EDIT_NOTICE,
        interrupt_mode: Literal["per_call"] = "per_call",
    ) -> None:
        """Gate the tools ``interrupt_on`` names.

        Args:
            interrupt_on: tool name -> ``True``, ``False`` or a tool approval config.
            authority: the approval authority (default: the run's, see above).
            describe: makes the summary a reviewer reads, for every gated tool.
            graph_id: the ``origin.graph_id`` of the requests.
            edit_notice: text added to the result of a call run with edited arguments.
            interrupt_mode: HumanInTheLoopMiddleware's, taken only as ``"per_call"``, the
                one mode: every gated call is its own interrupt, answered by request id.
        """
        if interrupt_mode != "per_call":
            raise ValueError(
                "interrupt_mode: only 'per_call' is supported; every gated call is its own "
                "AAIS request (there is no batched list of decisions matched by position)"
            )
        super().__init__()
        self.interrupt_mode: Literal["per_call"] = interrupt_mode
        self.gate = ToolCallGate(
            rules_from(interrupt_on),
            authority=authority,
            describe=describe,
            graph_id=graph_id,
            edit_notice=edit_notice,
        )
        self._interrupt_on = normalised(interrupt_on)

    @property
    def interrupt_on(self) -> dict[str, dict[str, Any]]:
        """The gated tools and their configs, normalised as HumanInTheLoopMiddleware's
        ``interrupt_on`` is (``False`` entries dropped, ``allowed_decisions`` spelled
        out). A copy: changing it changes nothing."""
        return {
            tool: {**config, "allowed_decisions": list(config["allowed_decisions"])}
            for tool, config in self._interrupt_on.items()
        }

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """Ask for approval of a gated call; run it only if approved for these arguments."""
        return self.gate.wrap(request, handler)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """Async twin of :meth:`wrap_tool_call`."""
        return await self.gate.awrap(request, handler)

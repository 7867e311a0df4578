"""``approval_deep_agent``: a deep agent whose listed tools ask for AAIS approval wherever they run.

``create_deep_agent(interrupt_on={...})`` (the ``deepagents`` package) puts LangChain's
``HumanInTheLoopMiddleware`` in the parent, in every declarative subagent and in the
general-purpose subagent. :func:`approval_deep_agent` takes the same arguments and the
same ``interrupt_on`` and puts :class:`~aais_langgraph.tools.ApprovalMiddleware` in each
of them instead, so a listed tool pauses on an AAIS request wherever the deep agent
can call it:

- the parent: the gate goes first in its ``middleware``;
- each declarative subagent: the gate goes first in the spec's ``middleware`` (a spec's
  own ``interrupt_on`` replaces the top-level one for it, as ``deepagents`` does; a
  spec's ``interrupt_on=None`` keeps the top-level one);
- the general-purpose subagent: ``deepagents`` gives it the parent's tools but not the
  parent's ``middleware``, so, unless a ``general-purpose`` spec is given (then gated as
  above), the helper adds that spec itself, as ``deepagents`` builds it: the stock
  name, description and prompt, the parent's model, tools, skills and permissions, and
  the parent's middleware that takes one of ``deepagents``' default places;
- a ``CompiledSubAgent`` (a runnable of your own) cannot be gated from outside: if its
  graph holds a ToolNode with a listed tool, the helper refuses to build, unless the
  subagent is named in ``gated_inside`` (you gated it in the runnable). A runnable the
  helper cannot look into, and an ``AsyncSubAgent`` (a graph on another deployment),
  are yours to gate.

Needs the ``deepagents`` extra; this module is imported on first use.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from deepagents import create_deep_agent
from deepagents.middleware.subagents import GENERAL_PURPOSE_SUBAGENT
from langchain.agents.middleware import AgentMiddleware
from langchain_core.runnables import RunnableBinding
from langgraph.prebuilt import ToolNode
from langgraph.pregel import Pregel

from ..authority import ApprovalAuthority
from .config import InterruptOn, ToolCallDescriber, normalised
from .middleware import ApprovalMiddleware

GENERAL_PURPOSE = GENERAL_PURPOSE_SUBAGENT["name"]
"""The name ``deepagents`` gives its general-purpose subagent."""

_DEFAULT_PLACES = frozenset(
    {
        "FilesystemMiddleware",
        "SummarizationMiddleware",
        "PatchToolCallsMiddleware",
        "SkillsMiddleware",
        "AnthropicPromptCachingMiddleware",
        "BedrockPromptCachingMiddleware",
        "FireworksPromptCachingMiddleware",
    }
)
"""Names of the middleware ``deepagents`` builds into its general-purpose subagent: a
parent middleware of one of these names replaces the default there too."""


def approval_deep_agent(
    model: Any = None,
    tools: Sequence[Any] | None = None,
    *,
    interrupt_on: InterruptOn,
    authority: ApprovalAuthority | None = None,
    describe: ToolCallDescriber | None = None,
    graph_id: str | None = None,
    middleware: Sequence[AgentMiddleware] = (),
    subagents: Sequence[Any] | None = None,
    gated_inside: Collection[str] = (),
    **options: Any,
) -> Any:
    """``create_deep_agent`` with AAIS approvals of the ``interrupt_on`` tools everywhere.

    Args:
        model: the parent's chat model, as for ``create_deep_agent``.
        tools: the parent's tools (the general-purpose subagent gets them too).
        interrupt_on: tool name -> ``True``, ``False`` or a tool approval config, as for
            :class:`~aais_langgraph.tools.ApprovalMiddleware`.
        authority: the approval authority (default: the run's, as the middleware finds it).
        describe: makes the summary a reviewer reads, for every gated tool.
        graph_id: the ``origin.graph_id`` of the requests.
        middleware: the parent's own middleware (without an ``ApprovalMiddleware``).
        subagents: the subagent specs, as for ``create_deep_agent``.
        gated_inside: names of ``CompiledSubAgent`` s whose runnables gate the listed
            tools themselves.
        options: every other ``create_deep_agent`` argument (``checkpointer``, ``skills``,
            ``backend``, ...), passed on unchanged.

    Raises:
        ValueError: a listed tool is reachable in a subagent the helper cannot gate, an
            ``ApprovalMiddleware`` is already in a ``middleware`` list, or ``interrupt_on``
            is not a valid tool approval configuration.
    """
    gate = ApprovalMiddleware(
        interrupt_on, authority=authority, describe=describe, graph_id=graph_id
    )

    def gate_for(spec: dict[str, Any]) -> ApprovalMiddleware:
        if "interrupt_on" not in spec or spec["interrupt_on"] is None:
            return gate
        return ApprovalMiddleware(
            spec["interrupt_on"], authority=authority, describe=describe, graph_id=graph_id
        )

    _refuse_second_gate("middleware", middleware)
    specs: list[Any] = []
    for index, spec in enumerate(subagents or ()):
        where = f"subagents[{index}]"
        if "graph_id" in spec:  # an AsyncSubAgent: runs on another deployment
            specs.append(spec)
        elif "runnable" in spec:
            if spec["name"] not in gated_inside:
                _refuse_reachable(where, spec, set(normalised(interrupt_on)))
            specs.append(spec)
        else:
            _refuse_second_gate(f"{where}.middleware", spec.get("middleware", ()))
            gated = {key: value for key, value in spec.items() if key != "interrupt_on"}
            gated["middleware"] = [gate_for(spec), *spec.get("middleware", ())]
            specs.append(gated)
    if not any(spec["name"] == GENERAL_PURPOSE and "graph_id" not in spec for spec in specs):
        specs.insert(0, _general_purpose(gate, middleware, options.get("skills")))
    return create_deep_agent(
        model, tools, middleware=[gate, *middleware], subagents=specs, **options
    )


def _general_purpose(
    gate: ApprovalMiddleware, middleware: Sequence[AgentMiddleware], skills: Any
) -> dict[str, Any]:
    """The general-purpose subagent ``deepagents`` would add, carrying the gate. Without
    ``model`` and ``tools`` a spec takes the parent's."""
    spec: dict[str, Any] = {
        **GENERAL_PURPOSE_SUBAGENT,
        "middleware": [gate, *(m for m in middleware if m.name in _DEFAULT_PLACES)],
    }
    if skills is not None:
        spec["skills"] = skills
    return spec


def _refuse_second_gate(where: str, middleware: Sequence[AgentMiddleware]) -> None:
    if any(isinstance(m, ApprovalMiddleware) for m in middleware):
        raise ValueError(
            f"{where}: already holds an ApprovalMiddleware; approval_deep_agent adds the "
            "gate itself (give a subagent spec its own interrupt_on to gate it differently)"
        )


def _refuse_reachable(where: str, spec: Any, gated: set[str]) -> None:
    reachable = sorted(gated & _tool_names(spec["runnable"]))
    if reachable:
        raise ValueError(
            f"{where}: the compiled subagent {spec['name']!r} can call the gated "
            f"tool(s) {', '.join(map(repr, reachable))} and approval_deep_agent cannot gate "
            "a runnable from outside: put ApprovalMiddleware in it and name the subagent "
            "in gated_inside"
        )


def _tool_names(runnable: Any) -> set[str]:
    """The tools the ToolNodes of a compiled graph (and its subgraphs) hold; empty for a
    runnable that is not a graph."""
    while isinstance(runnable, RunnableBinding):
        runnable = runnable.bound
    if not isinstance(runnable, Pregel):
        return set()
    graphs = [runnable, *(graph for _, graph in runnable.get_subgraphs(recurse=True))]
    names: set[str] = set()
    for graph in graphs:
        for node in getattr(graph, "nodes", {}).values():
            if isinstance(node.bound, ToolNode):
                names.update(node.bound.tools_by_name)
    return names

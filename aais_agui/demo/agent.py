"""The demo agent: ``create_agent`` with the fake model, the tools and ``ApprovalMiddleware``."""

from __future__ import annotations

from typing import Any

from aais_langgraph.tools import ApprovalMiddleware

from .model import DemoChatModel
from .tools import DemoWorkspace, demo_interrupt_on, demo_tools

SYSTEM_PROMPT = "You are the aais-langgraph demo agent. Every side effect needs approval."


def build_demo_agent(workspace: DemoWorkspace, *, checkpointer: Any) -> Any:
    """The compiled demo agent graph; its approvals find the authority in ``configurable``.

    Serve it with :func:`aais_agui.create_app`, which puts the authority there.
    """
    from langchain.agents import create_agent

    return create_agent(
        DemoChatModel(),
        demo_tools(workspace),
        system_prompt=SYSTEM_PROMPT,
        middleware=[ApprovalMiddleware(demo_interrupt_on(workspace), graph_id="aais-demo")],
        checkpointer=checkpointer,
        name="aais-demo",
    )

"""A user agent whose tools take ``ToolRuntime``, served by ``create_app``: the runtime is stock's.

ag-ui-langgraph passes ``config["configurable"]`` (the thread id included) as the run's
``context``; the served agent keeps that, so a tool reads the same ``runtime.context``
behind ``create_app`` as behind a stock ``LangGraphAgent``.
"""

from __future__ import annotations

from typing import Any

import httpx
from langchain.agents import create_agent
from langchain.tools import ToolRuntime, tool
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver

from aais_agui import bearer_token_authenticator, create_app, run_agent_input
from aais_langgraph import ApprovalAuthority

from .conftest import ALICE
from .http_support import agui_run, serve

SEEN: list[str] = []
CONTEXTS: list[Any] = []


@tool
def which_thread(runtime: ToolRuntime) -> str:
    """Say which thread this is."""
    thread_id = str(runtime.config.get("configurable", {}).get("thread_id"))
    SEEN.append(thread_id)
    CONTEXTS.append(runtime.context)
    return thread_id


class ScriptedModel(FakeMessagesListChatModel):
    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self


def test_a_tool_runtime_tool_gets_stock_runtime_context_behind_create_app() -> None:
    model = ScriptedModel(
        responses=[
            AIMessage(content="", tool_calls=[{"name": "which_thread", "args": {}, "id": "c1"}]),
            AIMessage(content="done"),
        ]
    )
    agent = create_agent(model, tools=[which_thread], checkpointer=InMemorySaver())
    app = create_app(
        agent,
        authority=ApprovalAuthority(),
        authenticate=bearer_token_authenticator({"alice-token": ALICE}),
    )
    with (
        serve(app) as url,
        httpx.Client(
            base_url=url, headers={"Authorization": "Bearer alice-token"}, timeout=30
        ) as client,
    ):
        events = agui_run(client, "/agent", run_agent_input("runtime-thread", text="hi"))
    assert events[-1]["type"] == "RUN_FINISHED"
    assert SEEN == ["runtime-thread"]  # the tool gets its runtime
    [context] = CONTEXTS
    assert isinstance(context, dict) and context["thread_id"] == "runtime-thread"

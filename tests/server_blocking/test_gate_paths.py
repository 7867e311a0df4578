"""Every gate path, run as LangGraph Server runs it, under the server's blocking-call detector.

LangGraph Server drives a graph with ``astream`` on its event loop and, without
``--allow-blocking``, fails any blocking call made there (``blockbuster``,
:mod:`.detector`). Each test here builds one gate path, finds its authority
through ``AAIS_LEDGER_URL`` as a hosted graph does (the ledger is opened on the
first gated call, inside the run), runs it with an async checkpointer (as the
server's is), and goes request -> pause -> decision -> resume -> the action runs
once, with the detector active throughout. A decision is sent as the server passes it
on: a raw ``approval.decided`` whose body names mallory, in a run whose
``configurable`` carries the custom-auth user, who is what gets recorded.

Each path runs on a SQLite ledger (with ``AsyncSqliteSaver``) and on a Postgres
ledger (with ``AsyncPostgresSaver``).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command

from aais_langgraph import (
    ApprovalRequested,
    arequest_approval,
    aresume_with_decisions,
    build_decision,
    request_approval,
    requires_approval,
)
from aais_langgraph.gate import approval_key, approval_node
from aais_langgraph.server_env import (
    aauthority_from_env,
    authority_from_env,
    close_env_authorities,
)
from aais_langgraph.tools import ApprovalMiddleware, ApprovalToolNode, route_tool_calls

from .detector import BlockingError, server_detector

MALLORY = {"id": "mallory", "type": "human"}
ALICE = {"identity": "alice", "display_name": "Alice"}
RECORDED_ALICE = {
    "id": "alice",
    "type": "human",
    "display_name": "Alice",
    "authenticated_by": "langgraph-server auth",
}
ACTION = {"kind": "process.exec", "name": "shell.exec", "summary": "Run `ls`"}


# -- the scene: a ledger named by AAIS_LEDGER_URL and an async checkpointer -------------


@pytest.fixture(params=["sqlite", "postgres"])
def ledger_url(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """The ledger a hosted graph finds through ``AAIS_LEDGER_URL`` (opened by the gate)."""
    url = (
        request.getfixturevalue("postgres_url")
        if request.param == "postgres"
        else str(tmp_path / "approvals.db")
    )
    monkeypatch.setenv("AAIS_LEDGER_URL", url)
    close_env_authorities()
    yield url
    close_env_authorities()


@pytest.fixture
async def saver(ledger_url: str, tmp_path: Path) -> AsyncIterator[Any]:
    """An async checkpointer on the ledger's kind of database (the server's is async)."""
    if ledger_url.startswith("postgresql://"):
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        async with AsyncPostgresSaver.from_conn_string(ledger_url) as postgres:
            await postgres.setup()
            yield postgres
    else:
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "checkpoints.db")) as sqlite:
            yield sqlite


def served_config() -> RunnableConfig:
    """A run's config as LangGraph Server builds it: the custom-auth user is reserved."""
    return {
        "configurable": {
            "thread_id": str(uuid.uuid4()),
            "langgraph_auth_user": ALICE,
            "langgraph_auth_user_id": ALICE["identity"],
            "langgraph_request_id": str(uuid.uuid4()),
        }
    }


async def approve_in_turn(graph: Any, first_input: Any, effects: list[str]) -> tuple[str, Any]:
    """Run to the pause, check nothing ran, approve (as mallory's body, alice's run), resume;
    all of it under the server's detector. Returns the approved request's id and what the
    resumed run returned."""
    config = served_config()
    with server_detector():
        paused = await graph.ainvoke(first_input, config)
        [interrupt] = paused["__interrupt__"]
        requested = ApprovalRequested.from_data(interrupt.value)
        assert effects == [], "nothing runs before the decision"
        assert await pending_ids() == [requested.request.id]
        decided = build_decision(requested, decision="approve", scope="once", actor=MALLORY)
        done = await graph.ainvoke(Command(resume={interrupt.id: decided.to_json()}), config)
    assert "__interrupt__" not in done, "the run finished"
    return requested.request.id, done


async def recorded_actor(request_id: str) -> dict[str, Any]:
    """The actor the ledger recorded for the decision on ``request_id``."""
    authority = await aauthority_from_env()
    page = await authority.ledger.aevents_after(0, limit=10_000)
    [decided] = [
        event
        for event in page
        if event["type"] == "approval.decided" and event["decision"]["request_id"] == request_id
    ]
    return dict(decided["decision"]["actor"])


async def pending_ids() -> list[str]:
    authority = await aauthority_from_env()
    return [stored.request_id for stored in await authority.ledger.alist_pending()]


async def assert_ran_once_for_alice(effects: list[str], request_id: str) -> None:
    assert effects == [request_id]
    assert await pending_ids() == []
    assert await recorded_actor(request_id) == RECORDED_ALICE


# -- the detector is live ---------------------------------------------------------------


async def test_the_detector_fails_a_sqlite_ledger_opened_on_the_loop(tmp_path: Path) -> None:
    from aais_langgraph.ledger import SqliteLedger

    with server_detector(), pytest.raises(BlockingError):
        SqliteLedger(str(tmp_path / "blocked.db"))


async def test_the_detector_fails_a_postgres_query_on_the_loop(postgres_url: str) -> None:
    import psycopg

    # Connected before the detector is on: only the query runs under it.
    with (
        psycopg.connect(postgres_url) as connection,
        server_detector(),
        pytest.raises(BlockingError),
    ):
        connection.execute("SELECT 1")


async def test_the_environments_ledger_opened_on_the_loop_is_what_the_detector_fails(
    ledger_url: str,
) -> None:
    with server_detector(), pytest.raises(BlockingError):
        authority_from_env()


async def test_the_async_twin_opens_the_environments_ledger_off_the_loop(ledger_url: str) -> None:
    with server_detector():
        first = await aauthority_from_env()
        again = await aauthority_from_env()
    assert first is again
    assert await pending_ids() == []


# -- bare gates in nodes --------------------------------------------------------------------


class CommandState(TypedDict, total=False):
    command: str
    outcome: str


def node_graph(node: Callable[..., Any], saver: Any) -> Any:
    builder = StateGraph(CommandState)
    builder.add_node("act", node)
    builder.add_edge(START, "act")
    builder.add_edge("act", END)
    return builder.compile(checkpointer=saver)


async def test_async_node_gate_runs_its_action_once_off_the_loop(
    ledger_url: str, saver: Any
) -> None:
    effects: list[str] = []

    async def act(state: CommandState) -> dict[str, Any]:
        resolved = await arequest_approval({**ACTION, "arguments": {"command": state["command"]}})
        if resolved.approved:
            effects.append(resolved.resolution.request_id)
        return {"outcome": resolved.resolution.outcome}

    request_id, done = await approve_in_turn(node_graph(act, saver), {"command": "ls"}, effects)
    await assert_ran_once_for_alice(effects, request_id)
    assert done["outcome"] == "approved"


async def test_sync_node_gate_runs_its_action_once_in_a_worker_thread(
    ledger_url: str, saver: Any
) -> None:
    effects: list[str] = []

    def act(state: CommandState) -> dict[str, Any]:
        resolved = request_approval({**ACTION, "arguments": {"command": state["command"]}})
        if resolved.approved:
            effects.append(resolved.resolution.request_id)
        return {"outcome": resolved.resolution.outcome}

    request_id, done = await approve_in_turn(node_graph(act, saver), {"command": "ls"}, effects)
    await assert_ran_once_for_alice(effects, request_id)
    assert done["outcome"] == "approved"


async def test_approval_node_approves_in_a_worker_thread(ledger_url: str, saver: Any) -> None:
    effects: list[str] = []

    class Gated(TypedDict, total=False):
        action: dict[str, Any]
        approval: dict[str, Any]

    def run(state: Gated) -> dict[str, Any]:
        if state["approval"]["resolution"]["outcome"] == "approved":
            effects.append(state["approval"]["resolution"]["request_id"])
        return {}

    builder = StateGraph(Gated)
    builder.add_node("gate", approval_node("action"))
    builder.add_node("run", run)
    builder.add_edge(START, "gate")
    builder.add_edge("gate", "run")
    builder.add_edge("run", END)
    graph = builder.compile(checkpointer=saver)
    first = {"action": {**ACTION, "arguments": {"command": "ls"}}}
    request_id, done = await approve_in_turn(graph, first, effects)
    await assert_ran_once_for_alice(effects, request_id)
    assert done["approval"]["resolution"]["outcome"] == "approved"


def command_action(state: CommandState) -> dict[str, Any]:
    return {**ACTION, "arguments": {"command": state["command"]}}


async def test_requires_approval_async_body_runs_once_off_the_loop(
    ledger_url: str, saver: Any
) -> None:
    effects: list[str] = []

    @requires_approval(command_action)
    async def act(state: CommandState) -> dict[str, Any]:
        effects.append(approval_key())
        return {"outcome": "ran"}

    request_id, done = await approve_in_turn(node_graph(act, saver), {"command": "ls"}, effects)
    await assert_ran_once_for_alice(effects, request_id)
    assert done["outcome"] == "ran"


async def test_requires_approval_sync_body_runs_once_in_a_worker_thread(
    ledger_url: str, saver: Any
) -> None:
    effects: list[str] = []

    @requires_approval(command_action)
    def act(state: CommandState) -> dict[str, Any]:
        effects.append(approval_key())
        return {"outcome": "ran"}

    request_id, done = await approve_in_turn(node_graph(act, saver), {"command": "ls"}, effects)
    await assert_ran_once_for_alice(effects, request_id)
    assert done["outcome"] == "ran"


# -- tool calls: create_agent's middleware and the gated ToolNode ---------------------------


class ScriptedModel(FakeMessagesListChatModel):
    """Turn *n* of the conversation answers ``responses[n]`` (stable across re-runs)."""

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        turn = sum(isinstance(message, AIMessage) for message in messages)
        message = self.responses[min(turn, len(self.responses) - 1)]
        return ChatResult(generations=[ChatGeneration(message=message)])

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self


def calling_model() -> ScriptedModel:
    """One turn calling both tools (one gated, one not), then a final answer."""
    calls = [
        {"name": "send_email", "args": {"to": "bob@example.com"}, "id": "c1", "type": "tool_call"},
        {"name": "search", "args": {"query": "q"}, "id": "c2", "type": "tool_call"},
    ]
    return ScriptedModel(
        responses=[
            AIMessage(content="", tool_calls=calls, id="ai-0"),
            AIMessage(content="All done.", id="ai-1"),
        ]
    )


def async_tools(effects: list[str], searches: list[str]) -> list[BaseTool]:
    @tool
    async def send_email(to: str) -> str:
        """Send an email."""
        effects.append(approval_key())
        return f"sent to {to}"

    @tool
    async def search(query: str) -> str:
        """Search."""
        searches.append(query)
        return "found"

    return [send_email, search]


def sync_tools(effects: list[str], searches: list[str]) -> list[BaseTool]:
    @tool
    def send_email(to: str) -> str:
        """Send an email."""
        effects.append(approval_key())
        return f"sent to {to}"

    @tool
    def search(query: str) -> str:
        """Search."""
        searches.append(query)
        return "found"

    return [send_email, search]


def tool_results(values: dict[str, Any]) -> dict[str, str]:
    return {
        str(message.tool_call_id): str(message.content)
        for message in values["messages"]
        if isinstance(message, ToolMessage)
    }


async def test_middleware_async_tool_call_runs_once_off_the_loop(
    ledger_url: str, saver: Any
) -> None:
    effects: list[str] = []
    searches: list[str] = []
    agent = create_agent(
        calling_model(),
        tools=async_tools(effects, searches),
        middleware=[ApprovalMiddleware({"send_email": True})],
        checkpointer=saver,
    )
    first = {"messages": [("user", "go")]}
    request_id, done = await approve_in_turn(agent, first, effects)
    await assert_ran_once_for_alice(effects, request_id)
    assert searches == ["q"], "the ungated sibling ran once"
    assert tool_results(done)["c1"] == "sent to bob@example.com"


async def test_middleware_sync_tool_call_runs_once_in_a_worker_thread(
    ledger_url: str, saver: Any
) -> None:
    """The server never runs a graph synchronously, but a sync node may invoke an agent:
    LangGraph runs that node in a worker thread, where the middleware's sync
    ``wrap_tool_call`` gates the call."""
    effects: list[str] = []
    searches: list[str] = []
    agent = create_agent(
        calling_model(),
        tools=sync_tools(effects, searches),
        middleware=[ApprovalMiddleware({"send_email": True})],
    )

    def assistant(state: MessagesState) -> dict[str, Any]:
        return agent.invoke(state)  # type: ignore[no-any-return]

    builder = StateGraph(MessagesState)
    builder.add_node("assistant", assistant)
    builder.add_edge(START, "assistant")
    builder.add_edge("assistant", END)
    graph = builder.compile(checkpointer=saver)
    request_id, done = await approve_in_turn(graph, {"messages": [("user", "go")]}, effects)
    await assert_ran_once_for_alice(effects, request_id)
    assert searches == ["q"]
    assert tool_results(done)["c1"] == "sent to bob@example.com"


async def test_gated_tool_node_call_runs_once_off_the_loop(ledger_url: str, saver: Any) -> None:
    effects: list[str] = []
    searches: list[str] = []
    model = calling_model()

    async def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node(
        "tools",
        ApprovalToolNode(async_tools(effects, searches), interrupt_on={"send_email": True}),
    )
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route_tool_calls, ["tools", END])
    builder.add_edge("tools", "agent")
    graph = builder.compile(checkpointer=saver)
    request_id, done = await approve_in_turn(graph, {"messages": [("user", "go")]}, effects)
    await assert_ran_once_for_alice(effects, request_id)
    assert searches == ["q"]
    assert tool_results(done)["c1"] == "sent to bob@example.com"


async def test_subagent_tool_call_runs_once_off_the_loop(ledger_url: str, saver: Any) -> None:
    """A deep agent's subagent carries the middleware; its gated call pauses the parent's
    run (inside the ``task`` tool's subgraph) and resumes through it."""
    from deepagents import create_deep_agent

    effects: list[str] = []
    searches: list[str] = []
    delegate = {"subagent_type": "mailer", "description": "Email bob."}
    parent = ScriptedModel(
        responses=[
            AIMessage(
                content="",
                tool_calls=[{"name": "task", "args": delegate, "id": "t1", "type": "tool_call"}],
                id="parent-0",
            ),
            AIMessage(content="The mailer is done.", id="parent-1"),
        ]
    )
    agent = create_deep_agent(
        model=parent,
        subagents=[
            {
                "name": "mailer",
                "description": "Sends email.",
                "system_prompt": "You send email.",
                "model": calling_model(),
                "tools": async_tools(effects, searches),
                "middleware": [ApprovalMiddleware({"send_email": True})],
            }
        ],
        checkpointer=saver,
    )
    request_id, done = await approve_in_turn(agent, {"messages": [("user", "go")]}, effects)
    await assert_ran_once_for_alice(effects, request_id)
    assert searches == ["q"]
    assert done["messages"][-1].content == "The mailer is done."


async def test_concurrent_first_gated_calls_share_one_ledger(ledger_url: str, saver: Any) -> None:
    """Two runs reach their first gate at once on a fresh process: one ledger is opened,
    off the loop, and both requests land in it."""
    effects: list[str] = []

    async def act(state: CommandState) -> dict[str, Any]:
        resolved = await arequest_approval({**ACTION, "arguments": {"command": state["command"]}})
        effects.append(resolved.resolution.request_id)
        return {}

    graph = node_graph(act, saver)
    with server_detector():
        paused = await asyncio.gather(
            graph.ainvoke({"command": "ls"}, served_config()),
            graph.ainvoke({"command": "pwd"}, served_config()),
        )
    assert all(len(result["__interrupt__"]) == 1 for result in paused)
    assert len(await pending_ids()) == 2
    assert effects == []


async def test_denied_tool_call_runs_nothing_and_the_agent_carries_on(
    ledger_url: str, saver: Any
) -> None:
    effects: list[str] = []
    searches: list[str] = []
    agent = create_agent(
        calling_model(),
        tools=async_tools(effects, searches),
        middleware=[ApprovalMiddleware({"send_email": True})],
        checkpointer=saver,
    )
    config = served_config()
    with server_detector():
        paused = await agent.ainvoke({"messages": [("user", "go")]}, config)
        [interrupt] = paused["__interrupt__"]
        requested = ApprovalRequested.from_data(interrupt.value)
        denied = build_decision(requested, decision="deny", actor=MALLORY)
        done = await agent.ainvoke(Command(resume={interrupt.id: denied.to_json()}), config)
    assert effects == []
    assert tool_results(done)["c1"].startswith("User rejected the tool call for `send_email`")
    assert done["messages"][-1].content == "All done."
    assert await recorded_actor(requested.request.id) == RECORDED_ALICE


async def test_tampered_decision_is_refused_and_the_approval_stays_pending(
    ledger_url: str, saver: Any
) -> None:
    effects: list[str] = []

    async def act(state: CommandState) -> dict[str, Any]:
        resolved = await arequest_approval({**ACTION, "arguments": {"command": state["command"]}})
        if resolved.approved:
            effects.append(resolved.resolution.request_id)
        return {"outcome": resolved.resolution.outcome}

    graph = node_graph(act, saver)
    config = served_config()
    with server_detector():
        paused = await graph.ainvoke({"command": "ls"}, config)
        [interrupt] = paused["__interrupt__"]
        requested = ApprovalRequested.from_data(interrupt.value)
        decided = build_decision(requested, decision="approve", actor=MALLORY).to_json()
        forged = {**decided["decision"], "action_digest": "sha256:" + "0" * 64}
        with pytest.raises(ValueError, match="action_digest"):
            await graph.ainvoke(
                Command(resume={interrupt.id: {**decided, "decision": forged}}), config
            )
        state = await graph.aget_state(config)
    assert [pending.id for pending in state.interrupts] == [interrupt.id]
    assert await pending_ids() == [requested.request.id]
    assert effects == []


async def test_approval_of_an_action_changed_since_it_was_shown_is_stale_off_the_loop(
    ledger_url: str, saver: Any
) -> None:
    """The node computes its action from outside the graph state. A presenter sharing the
    ledger recorded alice's approval of what was shown; the action changed before the
    run resumed with that resolution, so the node gets ``stale`` and runs nothing."""
    effects: list[str] = []
    outside = {"command": "ls"}

    async def act(state: CommandState) -> dict[str, Any]:
        resolved = await arequest_approval({**ACTION, "arguments": dict(outside)})
        if resolved.approved:
            effects.append(resolved.resolution.request_id)
        return {"outcome": resolved.resolution.outcome}

    graph = node_graph(act, saver)
    config = served_config()
    with server_detector():
        paused = await graph.ainvoke({"command": "ls"}, config)
        [interrupt] = paused["__interrupt__"]
        requested = ApprovalRequested.from_data(interrupt.value)
        authority = await aauthority_from_env()
        decided = build_decision(requested, decision="approve", actor=MALLORY)
        notice = await authority.adecide(decided, actor=RECORDED_ALICE)
        assert notice.approved
        outside["command"] = "rm -rf /"
        done = await graph.ainvoke(Command(resume={interrupt.id: notice.to_json()}), config)
    assert done["outcome"] == "stale"
    assert effects == []


# -- answering from outside a run ---------------------------------------------------------


async def test_aresume_with_decisions_finds_the_environments_ledger_off_the_loop(
    ledger_url: str, saver: Any
) -> None:
    effects: list[str] = []

    async def act(state: CommandState) -> dict[str, Any]:
        resolved = await arequest_approval({**ACTION, "arguments": {"command": state["command"]}})
        if resolved.approved:
            effects.append(resolved.resolution.request_id)
        return {"outcome": resolved.resolution.outcome}

    graph = node_graph(act, saver)
    config: RunnableConfig = {"configurable": {"thread_id": str(uuid.uuid4())}}
    paused = await graph.ainvoke({"command": "ls"}, config)
    requested = ApprovalRequested.from_data(paused["__interrupt__"][0].value)
    close_env_authorities()  # a fresh process: nothing opened yet
    decided = build_decision(requested, decision="approve", scope="once", actor=MALLORY)
    with server_detector():
        [resolved] = await aresume_with_decisions(
            graph, config, decided, actor={"id": "alice", "type": "human"}
        )
    assert resolved.resolution.outcome == "approved"
    assert effects == [requested.request.id]

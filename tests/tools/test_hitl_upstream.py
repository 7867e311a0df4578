"""LangChain's HumanInTheLoopMiddleware tests, ported to ApprovalMiddleware.

A mechanical port of ``tests/unit_tests/agents/middleware/implementations/
test_human_in_the_loop.py`` from the langchain 1.5.2 sdist: the same test names,
cases and assertions, with ``ApprovalMiddleware`` in place of
``HumanInTheLoopMiddleware`` and the answers translated as
docs/migrating-from-hitl.md maps them:

- the ``interrupt_on`` entries are kept; each gets ``reviewer_note: True``, so a
  reject ``message`` reaches the model as it does with HITL;
- ``{"type": "approve"}`` is an ``approve`` decision, ``{"type": "reject",
  "message": m}`` a ``deny`` decision carrying the note ``m``, both passed to
  ``resume_with_decisions`` by request id;
- ``{"type": "edit", "edited_action": {"name", "args"}}`` is one
  ``edit_tool_call(..., args)`` (edit and approve in one reviewer action);
- ``{"type": "respond", "message": m}`` is sent as it is, as the resume value of the
  call's interrupt, by the authenticated reviewer (LangGraph Server's
  ``langgraph_auth_user``): the gate reads HITL's answers itself;
- a batched ``{"decisions": [...]}`` answers the gated calls in the order of the
  model's message; ``Command(resume={interrupt_id: decision})`` (``per_call``) is sent
  as it is, by the authenticated reviewer;
- a test that drove ``after_model`` with a patched ``interrupt`` runs the same
  message through a ``create_agent`` agent instead, and its assertions on the
  returned update are made on the agent's state.

A test that checks a documented difference is ``xfail(strict=True)`` with the
difference as its reason; docs/migrating-from-hitl.md lists every one.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import TYPE_CHECKING, Annotated, Any, cast

import pytest
from langchain.agents import create_agent
from langchain.agents.factory import _make_tools_to_model_edge
from langchain.agents.middleware import ToolErrorMiddleware, ToolRetryMiddleware
from langchain.agents.middleware.types import AgentMiddleware, AgentState, ToolCallRequest
from langchain_core.messages import AIMessage, HumanMessage, ToolCall, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt.tool_node import ToolNode, ToolRuntime
from langgraph.runtime import Runtime
from langgraph.types import Command
from pydantic import AfterValidator, ValidationError

from aais_langgraph import (
    ApprovalAuthority,
    InMemoryLedger,
    aresume_with_decisions,
    build_decision,
    resume_with_decisions,
)
from aais_langgraph.protocol.extensions import TOOL_CALL_ID_EXTENSION
from aais_langgraph.tools import (
    EDIT_NOTICE,
    ApprovalMiddleware,
    aedit_tool_call,
    edit_tool_call,
    with_note,
)

from .helpers import ScriptedChatModel

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

_EDIT_NOTICE = EDIT_NOTICE
_EXPECTED_NOTICE = (
    f'{_EDIT_NOTICE} Executed instead: write_file_tool with arguments {{"content": "edited"}}.'
)
_EXPECTED_NOTICE_WITH_CONTENT = f"{_EXPECTED_NOTICE}\n\nTool response:"

REVIEWER = {"id": "reviewer", "type": "human"}

# The documented differences (docs/migrating-from-hitl.md, "Documented differences").
NO_DESCRIPTION_PREFIX = (
    "description_prefix is gone: the default summary names the tool and its argument "
    "names, never their values"
)
REVIEWER_USER = {"identity": "reviewer", "display_name": "Reviewer"}
"""The reviewer as LangGraph Server's custom auth names them (``langgraph_auth_user``)."""
DEFAULT_DECISIONS = (
    "a config without allowed_decisions allows approve, edit, reject and respond, as True does"
)
AAIS_ANSWER_ERRORS = (
    "a decision the request did not offer is refused by AAIS validation (value-free, "
    "naming the field), not with HITL's message that echoes the decision"
)
NO_BATCH = (
    "no batched mode: each gated call is its own AAIS request, answered by request id, "
    "so there is no list of decisions to count or a HITLRequest to inspect"
)
WHEN_GETS_THE_REAL_REQUEST = (
    "when is asked with the real ToolCallRequest (tool and tool runtime set), as in "
    "HITL's per_call mode, not a request built for after_model"
)
VALUE_FREE_NOTICE = (
    "the edit notice names no argument values: no 'Executed instead: <tool> with "
    "arguments <json>' suffix"
)
NO_EDIT_STATE = (
    "an edit is a superseding AAIS request in the ledger, not the private "
    "hitl_edited_tool_calls state key HITL reads in wrap_tool_call or clears in after_model"
)
SAME_TOOL_EDITS = (
    "an edit keeps the tool: edit_tool_call takes new arguments for the same action, so "
    "an edit naming another tool has no mapping"
)
AAIS_ANSWER_SCHEMA = (
    "an interrupt's value is the approval.requested envelope with ToolApprovalRequest's "
    "fields beside it (its type stays approval.requested), and its response_schema "
    "describes an approval.decided envelope, not HITL's Decision union; a bad answer is "
    "refused with a catalogue code (AnswerShapeRefused), not a pydantic error at the "
    "field, and the tool checks edited arguments when it runs"
)
NO_INTERRUPT_MODE = (
    "only interrupt_mode='per_call', the default here: every gated call is its own interrupt, "
    "and another mode is refused without echoing it"
)


def documented(reason: str) -> pytest.MarkDecorator:
    return pytest.mark.xfail(strict=True, reason=reason)


# -- the mapping ---------------------------------------------------------------------------


def _migrated(interrupt_on: dict[str, Any]) -> dict[str, Any]:
    """A HITL ``interrupt_on`` as ours: each gated entry forwards reject messages."""
    return {
        name: entry
        if entry is False
        else {**({} if entry is True else entry), "reviewer_note": True}
        for name, entry in interrupt_on.items()
    }


def HumanInTheLoopMiddleware(
    interrupt_on: dict[str, Any], *, interrupt_mode: str | None = None, **options: Any
) -> ApprovalMiddleware:
    """``HumanInTheLoopMiddleware(...)`` migrated: the same entries, our authority."""
    del interrupt_mode  # one interrupt per gated call is the only mode
    authority = ApprovalAuthority(InMemoryLedger())
    return ApprovalMiddleware(_migrated(interrupt_on), authority=authority, **options)


InterruptOnConfig = dict
Action = dict


def _authority_of(agent: Any) -> ApprovalAuthority:
    """The authority of the agent's ApprovalMiddleware (set when the agent is built)."""
    return cast(ApprovalAuthority, agent._aais_authority)


def _hitl_value(value: dict[str, Any]) -> dict[str, Any]:
    """An ``approval.requested`` interrupt value read as HITL's ``ToolApprovalRequest``."""
    request = value["request"]
    return {
        "type": "tool_approval",
        "tool_call_id": request["extensions"][TOOL_CALL_ID_EXTENSION],
        "name": request["action"]["name"],
        "args": request["action"]["arguments"],
        "description": request["action"]["summary"],
    }


def as_reviewer(config: Any) -> Any:
    """``config`` as LangGraph Server builds it for the authenticated reviewer."""
    return {
        **config,
        "configurable": {**config["configurable"], "langgraph_auth_user": REVIEWER_USER},
    }


def _send(agent: Any, config: Any, request_id: str, decision: dict[str, Any]) -> None:
    """Send a HITL decision as it is, as the resume value of ``request_id``'s interrupt."""
    [interrupt_id] = [
        i.id for i in agent.get_state(config).interrupts if i.value["request"]["id"] == request_id
    ]
    agent.invoke(Command(resume={interrupt_id: decision}), as_reviewer(config))


async def _asend(agent: Any, config: Any, request_id: str, decision: dict[str, Any]) -> None:
    [interrupt_id] = [
        i.id
        for i in (await agent.aget_state(config)).interrupts
        if i.value["request"]["id"] == request_id
    ]
    await agent.ainvoke(Command(resume={interrupt_id: decision}), as_reviewer(config))


def _answer(agent: Any, config: Any, requested: dict[str, Any], decision: dict[str, Any]) -> None:
    """Give one HITL decision to the request ``requested``, as the mapping says."""
    authority = _authority_of(agent)
    request = requested["request"]
    if decision.get("type") == "respond":
        _send(agent, config, request["id"], decision)
        return
    if decision.get("type") == "edit":
        edited = decision["edited_action"]
        if edited["name"] != request["action"]["name"]:
            raise ValueError("an edit keeps the tool")
        edit_tool_call(
            agent,
            config,
            request["id"],
            edited["args"],
            actor=REVIEWER,
            authority=authority,
            action_digest=request["action_digest"],
        )
        return
    kind = {"approve": "approve", "reject": "deny"}.get(decision.get("type"), decision.get("type"))
    decided = build_decision(requested, decision=kind, actor=REVIEWER)  # type: ignore[arg-type]
    if decision.get("message"):
        decided = with_note(decided, decision["message"])
    resume_with_decisions(agent, config, decided, actor=REVIEWER, authority=authority)


async def _aanswer(
    agent: Any, config: Any, requested: dict[str, Any], decision: dict[str, Any]
) -> None:
    """Async twin of :func:`_answer`."""
    authority = _authority_of(agent)
    request = requested["request"]
    if decision.get("type") == "respond":
        await _asend(agent, config, request["id"], decision)
        return
    if decision.get("type") == "edit":
        edited = decision["edited_action"]
        await aedit_tool_call(
            agent,
            config,
            request["id"],
            edited["args"],
            actor=REVIEWER,
            authority=authority,
            action_digest=request["action_digest"],
        )
        return
    kind = {"approve": "approve", "reject": "deny"}.get(decision["type"], decision["type"])
    decided = build_decision(requested, decision=kind, actor=REVIEWER)  # type: ignore[arg-type]
    if decision.get("message"):
        decided = with_note(decided, decision["message"])
    await aresume_with_decisions(agent, config, decided, actor=REVIEWER, authority=authority)


def _resume(agent: Any, config: Any, resume: Any) -> dict[str, Any]:
    """``agent.invoke(Command(resume=resume), config)`` with the answers mapped."""
    interrupts = agent.get_state(config).interrupts
    if isinstance(resume, dict) and "decisions" in resume:
        decisions = list(resume["decisions"])
        if len(decisions) != len(interrupts):
            raise ValueError("one decision per gated call")
        for requested, decision in zip(_in_call_order(agent, config), decisions, strict=True):
            _answer(agent, config, requested, decision)
    else:
        # per_call: each decision as it is, keyed by its interrupt id (HITL's own answer).
        agent.invoke(Command(resume=dict(resume)), as_reviewer(config))
    return _result(agent, config)


async def _aresume(agent: Any, config: Any, resume: dict[str, Any]) -> dict[str, Any]:
    await agent.ainvoke(Command(resume=dict(resume)), as_reviewer(config))
    return _result(agent, config)


def _in_call_order(agent: Any, config: Any) -> list[dict[str, Any]]:
    """The pending requests in the order of the calls in the model's last message."""
    state = agent.get_state(config)
    by_call = {
        i.value["request"]["extensions"][TOOL_CALL_ID_EXTENSION]: i.value for i in state.interrupts
    }
    last = next(m for m in reversed(state.values["messages"]) if isinstance(m, AIMessage))
    return [by_call[c["id"]] for c in last.tool_calls if c["id"] in by_call]


def _result(agent: Any, config: Any) -> dict[str, Any]:
    """What ``invoke`` returns: the state values, with ``__interrupt__`` while paused."""
    state = agent.get_state(config)
    values = dict(state.values)
    if state.interrupts:
        values["__interrupt__"] = list(state.interrupts)
    return values


class FakeToolCallingModel(ScriptedChatModel):
    """The upstream fake: turn *n* makes ``tool_calls[n]`` (a langchain-core fake)."""

    def __init__(self, *, tool_calls: Sequence[Sequence[Any]]) -> None:
        responses = [
            AIMessage(content="", id=f"ai-{n}", tool_calls=[dict(c) for c in calls])
            for n, calls in enumerate(tool_calls)
        ]
        super().__init__(responses=responses)


def _recording_tools(
    calls: Sequence[dict[str, Any]], runs: list[tuple[str, dict[str, Any]]]
) -> list[BaseTool]:
    """One tool per name in ``calls`` that records its arguments and echoes them."""
    names: dict[str, set[str]] = {}
    for item in calls:
        names.setdefault(item["name"], set()).update(item["args"])

    def make(name: str, keys: set[str]) -> BaseTool:
        def run(**arguments: Any) -> str:
            runs.append((name, arguments))
            return f"{name} ran"

        schema = {"type": "object", "properties": {key: {} for key in sorted(keys)}}
        return StructuredTool.from_function(
            func=run, name=name, description=f"The {name} tool.", args_schema=schema
        )

    return [make(name, keys) for name, keys in names.items()]


class _Turn:
    """One model message through an agent: what ``after_model`` saw, and the answers.

    ``run(decisions)`` plays the message, answers the gated calls in order, and
    returns ``{"messages": [the AI message, the ToolMessages written instead of a
    result]}`` (the update ``after_model`` returned), plus the calls that ran.
    """

    def __init__(
        self, middleware: ApprovalMiddleware, ai_message: AIMessage, *, prompt: bool = True
    ) -> None:
        self.middleware = middleware
        self.ai_message = ai_message
        self.runs: list[tuple[str, dict[str, Any]]] = []
        tools = _recording_tools(ai_message.tool_calls, self.runs)
        model = FakeToolCallingModel(tool_calls=[ai_message.tool_calls, []])
        self.agent = create_agent(
            model, tools=tools, middleware=[middleware], checkpointer=InMemorySaver()
        )
        self.agent._aais_authority = middleware.gate.authority
        self.config: RunnableConfig = {"configurable": {"thread_id": "turn"}}
        messages = [HumanMessage("Hello")] if prompt else []
        self.first = self.agent.invoke({"messages": messages}, self.config)

    @property
    def interrupted(self) -> bool:
        return "__interrupt__" in self.first

    def requests(self) -> list[dict[str, Any]]:
        return [_hitl_value(value) for value in _in_call_order(self.agent, self.config)]

    def run(self, decisions: list[dict[str, Any]]) -> dict[str, Any] | None:
        if not self.interrupted:
            return None
        _resume(self.agent, self.config, {"decisions": decisions})
        messages = self.agent.get_state(self.config).values["messages"]
        ai = next(m for m in messages if isinstance(m, AIMessage) and m.tool_calls)
        written = [
            m
            for m in messages
            if isinstance(m, ToolMessage) and m.additional_kwargs.get("lc_source")
        ]
        return {"messages": [ai, *written]}

    def ran(self, name: str) -> list[dict[str, Any]]:
        return [arguments for tool_name, arguments in self.runs if tool_name == name]


def _turn(middleware: ApprovalMiddleware, ai_message: AIMessage, *, prompt: bool = True) -> _Turn:
    return _Turn(middleware, ai_message, prompt=prompt)


@documented(NO_DESCRIPTION_PREFIX)
def test_human_in_the_loop_middleware_initialization() -> None:
    """Test HumanInTheLoopMiddleware initialization."""
    middleware = HumanInTheLoopMiddleware(
        interrupt_on={"test_tool": {"allowed_decisions": ["approve", "edit", "reject"]}},
        description_prefix="Custom prefix",
    )

    assert middleware.interrupt_on == {
        "test_tool": {"allowed_decisions": ["approve", "edit", "reject"]}
    }
    assert middleware.description_prefix == "Custom prefix"  # type: ignore[attr-defined]


def test_human_in_the_loop_middleware_rejects_empty_allowed_decisions() -> None:
    """Test that an empty `allowed_decisions` list raises instead of silently disabling the gate."""
    with pytest.raises(ValueError, match="test_tool"):
        HumanInTheLoopMiddleware(interrupt_on={"test_tool": {"allowed_decisions": []}})


@documented(DEFAULT_DECISIONS)
def test_human_in_the_loop_middleware_rejects_missing_allowed_decisions() -> None:
    """Test that a config missing `allowed_decisions` (e.g. `when`-only) raises."""
    with pytest.raises(ValueError, match="test_tool"):
        HumanInTheLoopMiddleware(interrupt_on={"test_tool": {"when": lambda _req: True}})


def test_human_in_the_loop_middleware_rejects_typoed_key() -> None:
    """Test that a misspelled `allowed_decisions` key raises instead of being silently dropped."""
    with pytest.raises(ValueError, match="test_tool"):
        HumanInTheLoopMiddleware(interrupt_on={"test_tool": {"alowed_decisions": ["approve"]}})


def test_human_in_the_loop_middleware_no_interrupts_needed() -> None:
    """Test HumanInTheLoopMiddleware when no interrupts are needed."""

    def middleware() -> ApprovalMiddleware:
        return HumanInTheLoopMiddleware(
            interrupt_on={"test_tool": {"allowed_decisions": ["approve", "edit", "reject"]}}
        )

    # Test with no messages
    assert _turn(middleware(), AIMessage(content="Hi there"), prompt=False).run([]) is None

    # Test with message but no tool calls
    turn = _turn(middleware(), AIMessage(content="Hi there"))
    assert turn.run([]) is None

    # Test with tool calls that don't require interrupts
    ai_message = AIMessage(
        content="I'll help you",
        tool_calls=[{"name": "other_tool", "args": {"input": "test"}, "id": "1"}],
    )
    turn = _turn(middleware(), ai_message)
    assert turn.run([]) is None
    assert turn.ran("other_tool") == [{"input": "test"}]


def test_human_in_the_loop_middleware_single_tool_accept() -> None:
    """Test HumanInTheLoopMiddleware with single tool accept response."""
    middleware = HumanInTheLoopMiddleware(
        interrupt_on={"test_tool": {"allowed_decisions": ["approve", "edit", "reject"]}}
    )

    ai_message = AIMessage(
        content="I'll help you",
        tool_calls=[{"name": "test_tool", "args": {"input": "test"}, "id": "1"}],
    )
    turn = _turn(middleware, ai_message)

    result = turn.run([{"type": "approve"}])
    assert result is not None
    assert "messages" in result
    assert len(result["messages"]) == 1
    assert result["messages"][0].tool_calls == ai_message.tool_calls

    # The call ran, its result came back and the agent finished: no further interrupt.
    assert turn.ran("test_tool") == [{"input": "test"}]
    assert "__interrupt__" not in _result(turn.agent, turn.config)


def test_human_in_the_loop_middleware_single_tool_edit() -> None:
    """Test HumanInTheLoopMiddleware with single tool edit response."""
    middleware = HumanInTheLoopMiddleware(
        interrupt_on={"test_tool": {"allowed_decisions": ["approve", "edit", "reject"]}}
    )

    ai_message = AIMessage(
        content="I'll help you",
        tool_calls=[{"name": "test_tool", "args": {"input": "test"}, "id": "1"}],
    )
    turn = _turn(middleware, ai_message)

    result = turn.run(
        [{"type": "edit", "edited_action": Action(name="test_tool", args={"input": "edited"})}]
    )
    assert result is not None
    assert "messages" in result
    assert len(result["messages"]) == 1
    assert result["messages"][0].tool_calls[0]["args"] == {"input": "test"}
    assert result["messages"][0].tool_calls[0]["id"] == "1"  # ID should be preserved
    assert turn.ran("test_tool") == [{"input": "edited"}]


def test_human_in_the_loop_middleware_single_tool_rejection_reason() -> None:
    """Test a custom rejection reason retains its human-provided context."""
    middleware = HumanInTheLoopMiddleware(
        interrupt_on={"test_tool": {"allowed_decisions": ["approve", "edit", "reject"]}}
    )

    ai_message = AIMessage(
        content="I'll help you",
        tool_calls=[{"name": "test_tool", "args": {"input": "test"}, "id": "1"}],
    )
    turn = _turn(middleware, ai_message)

    result = turn.run([{"type": "reject", "message": "Custom response message"}])
    assert result is not None
    assert "messages" in result
    assert len(result["messages"]) == 2
    assert isinstance(result["messages"][0], AIMessage)
    assert isinstance(result["messages"][1], ToolMessage)
    assert result["messages"][1].content == (
        "User rejected the tool call for `test_tool` with reason: Custom response message"
    )
    assert result["messages"][1].name == "test_tool"
    assert result["messages"][1].tool_call_id == "1"


def test_human_in_the_loop_middleware_default_rejection_message() -> None:
    """Test reject decision default message discourages retries."""
    middleware = HumanInTheLoopMiddleware(
        interrupt_on={"test_tool": {"allowed_decisions": ["approve", "edit", "reject"]}}
    )

    ai_message = AIMessage(
        content="I'll help you",
        tool_calls=[{"name": "test_tool", "args": {"input": "test"}, "id": "1"}],
    )
    turn = _turn(middleware, ai_message)

    result = turn.run([{"type": "reject"}])
    assert result is not None
    assert len(result["messages"]) == 2
    tool_message = result["messages"][1]
    assert isinstance(tool_message, ToolMessage)
    assert tool_message.content == (
        "User rejected the tool call for `test_tool` with id 1. "
        "The tool was not executed. Do not retry this tool call unless the user "
        "explicitly requests it."
    )
    assert tool_message.status == "error"
    assert tool_message.name == "test_tool"
    assert tool_message.tool_call_id == "1"


def _assert_tool_messages_are_paired(messages: list[Any]) -> None:
    """Assert every `ToolMessage` answers a call declared by the preceding `AIMessage`.

    Model providers (e.g. OpenAI) reject a request where a `ToolMessage`'s
    `tool_call_id` has no matching entry in the immediately preceding `AIMessage`'s
    `tool_calls`, that pairing must hold for every model turn, not just the last.
    """
    pending_ids: set[str] = set()
    for message in messages:
        if isinstance(message, AIMessage):
            pending_ids = {tc["id"] for tc in message.tool_calls if tc["id"] is not None}
        elif isinstance(message, ToolMessage):
            assert message.tool_call_id in pending_ids, (
                f"ToolMessage {message.tool_call_id!r} has no matching tool call in the "
                "preceding AIMessage"
            )
            pending_ids.discard(message.tool_call_id)


def _agent_with(model: Any, tools: list[BaseTool], middleware: Sequence[AgentMiddleware]) -> Any:
    agent = create_agent(
        model=model, tools=tools, middleware=list(middleware), checkpointer=InMemorySaver()
    )
    agent._aais_authority = next(
        m.gate.authority for m in middleware if isinstance(m, ApprovalMiddleware)
    )
    return agent


def test_human_in_the_loop_middleware_rejected_call_not_executed_and_stays_paired() -> None:
    """A rejected tool call must never execute, and the message history must stay valid."""
    calls: list[str] = []

    @tool
    def risky_tool(value: str) -> str:
        """A tool that would be dangerous to run without approval."""
        calls.append(value)
        return f"Executed: {value}"

    model = FakeToolCallingModel(
        tool_calls=[
            [ToolCall(name="risky_tool", args={"value": "test"}, id="1")],
            [],
        ]
    )

    agent = _agent_with(
        model,
        [risky_tool],
        [
            HumanInTheLoopMiddleware(
                interrupt_on={"risky_tool": {"allowed_decisions": ["approve", "reject"]}}
            )
        ],
    )
    interrupted = agent.invoke(
        {"messages": [HumanMessage("Please run risky_tool")]},
        {"configurable": {"thread_id": "reject-not-executed"}},
    )
    assert "__interrupt__" in interrupted

    final = _resume(
        agent,
        {"configurable": {"thread_id": "reject-not-executed"}},
        {"decisions": [{"type": "reject", "message": "denied"}]},
    )

    # The graph must complete the next model turn rather than getting stuck or erroring.
    assert "__interrupt__" not in final
    # The tool itself must never run.
    assert calls == []
    # The message history must remain protocol-valid throughout, including the rejection turn.
    _assert_tool_messages_are_paired(final["messages"])


def test_human_in_the_loop_middleware_single_tool_respond() -> None:
    """Test HumanInTheLoopMiddleware with `respond` decision producing a success ToolMessage."""
    middleware = HumanInTheLoopMiddleware(
        interrupt_on={"ask_user": {"allowed_decisions": ["respond"]}}
    )

    ai_message = AIMessage(
        content="Let me ask the user.",
        tool_calls=[{"name": "ask_user", "args": {"question": "favorite color?"}, "id": "1"}],
    )
    result = _turn(middleware, ai_message).run([{"type": "respond", "message": "blue"}])
    assert result is not None
    assert len(result["messages"]) == 2
    tool_message = result["messages"][1]
    assert tool_message.content == "blue"
    assert tool_message.status == "success"


@documented(AAIS_ANSWER_ERRORS)
def test_human_in_the_loop_middleware_respond_disallowed() -> None:
    """Test that `respond` raises when not in `allowed_decisions`."""
    middleware = HumanInTheLoopMiddleware(
        interrupt_on={"test_tool": {"allowed_decisions": ["approve", "edit", "reject"]}}
    )

    ai_message = AIMessage(
        content="I'll help you",
        tool_calls=[{"name": "test_tool", "args": {"input": "test"}, "id": "1"}],
    )
    turn = _turn(middleware, ai_message)

    with pytest.raises(
        ValueError,
        match=re.escape(
            "Decision type 'respond' is not allowed for tool 'test_tool'. "
            "Expected one of ['approve', 'edit', 'reject'] based on the tool's "
            "configuration."
        ),
    ):
        turn.run([{"type": "respond", "message": "synthetic"}])


def test_human_in_the_loop_middleware_mixed_with_respond() -> None:
    """Test mixed decisions: one tool approved, one tool answered via `respond`."""
    middleware = HumanInTheLoopMiddleware(
        interrupt_on={
            "get_forecast": {"allowed_decisions": ["approve"]},
            "ask_user": {"allowed_decisions": ["respond"]},
        }
    )

    ai_message = AIMessage(
        content="Two things",
        tool_calls=[
            {"name": "get_forecast", "args": {"location": "SF"}, "id": "1"},
            {"name": "ask_user", "args": {"question": "favorite color?"}, "id": "2"},
        ],
    )
    result = _turn(middleware, ai_message).run(
        [{"type": "approve"}, {"type": "respond", "message": "blue"}]
    )
    assert result is not None
    assert len(result["messages"]) == 2
    tool_message = result["messages"][1]
    assert tool_message.content == "blue"
    assert tool_message.status == "success"


def test_human_in_the_loop_middleware_true_allows_respond() -> None:
    """Test that the `True` shortcut permits `respond` decisions."""
    middleware = HumanInTheLoopMiddleware(interrupt_on={"ask_user": True})

    ai_message = AIMessage(
        content="Asking",
        tool_calls=[{"name": "ask_user", "args": {"q": "?"}, "id": "1"}],
    )
    result = _turn(middleware, ai_message).run([{"type": "respond", "message": "answer"}])
    assert result is not None
    assert len(result["messages"]) == 2
    tool_message = result["messages"][1]
    assert isinstance(tool_message, ToolMessage)
    assert tool_message.content == "answer"
    assert tool_message.status == "success"


def test_human_in_the_loop_middleware_multiple_tools_mixed_responses() -> None:
    """Test HumanInTheLoopMiddleware with multiple tools and mixed response types."""
    middleware = HumanInTheLoopMiddleware(
        interrupt_on={
            "get_forecast": {"allowed_decisions": ["approve", "edit", "reject"]},
            "get_temperature": {"allowed_decisions": ["approve", "edit", "reject"]},
        }
    )

    ai_message = AIMessage(
        content="I'll help you with weather",
        tool_calls=[
            {"name": "get_forecast", "args": {"location": "San Francisco"}, "id": "1"},
            {"name": "get_temperature", "args": {"location": "San Francisco"}, "id": "2"},
        ],
    )
    result = _turn(middleware, ai_message).run(
        [
            {"type": "approve"},
            {"type": "reject", "message": "User rejected this tool call"},
        ]
    )
    assert result is not None
    assert "messages" in result
    assert len(result["messages"]) == 2
    updated_ai_message = result["messages"][0]
    assert len(updated_ai_message.tool_calls) == 2
    assert updated_ai_message.tool_calls[0]["name"] == "get_forecast"  # Accepted
    assert updated_ai_message.tool_calls[1]["name"] == "get_temperature"  # Rejected, kept

    tool_message = result["messages"][1]
    assert isinstance(tool_message, ToolMessage)
    assert tool_message.content == (
        "User rejected the tool call for `get_temperature` with reason: "
        "User rejected this tool call"
    )
    assert tool_message.name == "get_temperature"


def test_human_in_the_loop_middleware_multiple_tools_edit_responses() -> None:
    """Test HumanInTheLoopMiddleware with multiple tools and edit responses."""
    middleware = HumanInTheLoopMiddleware(
        interrupt_on={
            "get_forecast": {"allowed_decisions": ["approve", "edit", "reject"]},
            "get_temperature": {"allowed_decisions": ["approve", "edit", "reject"]},
        }
    )

    ai_message = AIMessage(
        content="I'll help you with weather",
        tool_calls=[
            {"name": "get_forecast", "args": {"location": "San Francisco"}, "id": "1"},
            {"name": "get_temperature", "args": {"location": "San Francisco"}, "id": "2"},
        ],
    )
    turn = _turn(middleware, ai_message)
    result = turn.run(
        [
            {
                "type": "edit",
                "edited_action": Action(name="get_forecast", args={"location": "New York"}),
            },
            {
                "type": "edit",
                "edited_action": Action(name="get_temperature", args={"location": "New York"}),
            },
        ]
    )
    assert result is not None
    assert "messages" in result
    assert len(result["messages"]) == 1

    updated_ai_message = result["messages"][0]
    assert updated_ai_message.tool_calls[0]["args"] == {"location": "San Francisco"}
    assert updated_ai_message.tool_calls[0]["id"] == "1"  # ID preserved
    assert updated_ai_message.tool_calls[1]["args"] == {"location": "San Francisco"}
    assert updated_ai_message.tool_calls[1]["id"] == "2"  # ID preserved
    assert turn.ran("get_forecast") == [{"location": "New York"}]


def test_human_in_the_loop_middleware_edit_with_modified_args() -> None:
    """Test HumanInTheLoopMiddleware with edit action that includes modified args."""
    middleware = HumanInTheLoopMiddleware(
        interrupt_on={"test_tool": {"allowed_decisions": ["approve", "edit", "reject"]}}
    )

    ai_message = AIMessage(
        content="I'll help you",
        tool_calls=[{"name": "test_tool", "args": {"input": "test"}, "id": "1"}],
    )
    turn = _turn(middleware, ai_message)
    result = turn.run(
        [{"type": "edit", "edited_action": Action(name="test_tool", args={"input": "modified"})}]
    )
    assert result is not None
    assert "messages" in result
    assert len(result["messages"]) == 1

    # The model's own call is preserved; the reviewer's is the one that ran.
    updated_ai_message = result["messages"][0]
    assert updated_ai_message.tool_calls[0]["args"] == {"input": "test"}
    assert updated_ai_message.tool_calls[0]["id"] == "1"  # ID preserved
    assert turn.ran("test_tool") == [{"input": "modified"}]


@documented(AAIS_ANSWER_ERRORS)
def test_human_in_the_loop_middleware_unknown_response_type() -> None:
    """Test HumanInTheLoopMiddleware with unknown response type."""
    middleware = HumanInTheLoopMiddleware(
        interrupt_on={"test_tool": {"allowed_decisions": ["approve", "edit", "reject"]}}
    )

    ai_message = AIMessage(
        content="I'll help you",
        tool_calls=[{"name": "test_tool", "args": {"input": "test"}, "id": "1"}],
    )
    turn = _turn(middleware, ai_message)
    with pytest.raises(
        ValueError,
        match=re.escape(
            "Unexpected human decision: {'type': 'unknown'}. "
            "Decision type 'unknown' is not allowed for tool 'test_tool'. "
            "Expected one of ['approve', 'edit', 'reject'] based on the tool's "
            "configuration."
        ),
    ):
        turn.run([{"type": "unknown"}])


@documented(AAIS_ANSWER_ERRORS)
def test_human_in_the_loop_middleware_disallowed_action() -> None:
    """Test HumanInTheLoopMiddleware with action not allowed by tool config."""
    # edit is not allowed by tool config
    middleware = HumanInTheLoopMiddleware(
        interrupt_on={"test_tool": {"allowed_decisions": ["approve", "reject"]}}
    )

    ai_message = AIMessage(
        content="I'll help you",
        tool_calls=[{"name": "test_tool", "args": {"input": "test"}, "id": "1"}],
    )
    turn = _turn(middleware, ai_message)
    with pytest.raises(
        ValueError,
        match=re.escape(
            "Unexpected human decision: {'type': 'edit', 'edited_action': "
            "{'name': 'test_tool', 'args': {'input': 'modified'}}}. "
            "Decision type 'edit' is not allowed for tool 'test_tool'. "
            "Expected one of ['approve', 'reject'] based on the tool's "
            "configuration."
        ),
    ):
        turn.run(
            [
                {
                    "type": "edit",
                    "edited_action": Action(name="test_tool", args={"input": "modified"}),
                }
            ]
        )


def test_human_in_the_loop_middleware_mixed_auto_approved_and_interrupt() -> None:
    """Test HumanInTheLoopMiddleware with mix of auto-approved and interrupt tools."""
    middleware = HumanInTheLoopMiddleware(
        interrupt_on={"interrupt_tool": {"allowed_decisions": ["approve", "edit", "reject"]}}
    )

    ai_message = AIMessage(
        content="I'll help you",
        tool_calls=[
            {"name": "auto_tool", "args": {"input": "auto"}, "id": "1"},
            {"name": "interrupt_tool", "args": {"input": "interrupt"}, "id": "2"},
        ],
    )
    result = _turn(middleware, ai_message).run([{"type": "approve"}])
    assert result is not None
    assert "messages" in result
    assert len(result["messages"]) == 1

    updated_ai_message = result["messages"][0]
    # Should have both tools: auto-approved first, then interrupt tool
    assert len(updated_ai_message.tool_calls) == 2
    assert updated_ai_message.tool_calls[0]["name"] == "auto_tool"
    assert updated_ai_message.tool_calls[1]["name"] == "interrupt_tool"


@documented(NO_DESCRIPTION_PREFIX)
def test_human_in_the_loop_middleware_interrupt_request_structure() -> None:
    """Test that interrupt requests are structured correctly."""
    middleware = HumanInTheLoopMiddleware(
        interrupt_on={"test_tool": {"allowed_decisions": ["approve", "edit", "reject"]}},
        description_prefix="Custom prefix",
    )

    ai_message = AIMessage(
        content="I'll help you",
        tool_calls=[{"name": "test_tool", "args": {"input": "test", "location": "SF"}, "id": "1"}],
    )
    turn = _turn(middleware, ai_message)
    [action_request] = turn.requests()
    assert action_request["name"] == "test_tool"
    assert action_request["args"] == {"input": "test", "location": "SF"}
    assert "Custom prefix" in action_request["description"]


def test_human_in_the_loop_middleware_boolean_configs() -> None:
    """Test HITL middleware with boolean tool configs."""
    ai_message = AIMessage(
        content="I'll help you",
        tool_calls=[{"name": "test_tool", "args": {"input": "test"}, "id": "1"}],
    )

    # Test accept
    result = _turn(HumanInTheLoopMiddleware(interrupt_on={"test_tool": True}), ai_message).run(
        [{"type": "approve"}]
    )
    assert result is not None
    assert "messages" in result
    assert len(result["messages"]) == 1
    assert result["messages"][0].tool_calls == ai_message.tool_calls

    # Test edit
    turn = _turn(HumanInTheLoopMiddleware(interrupt_on={"test_tool": True}), ai_message)
    result = turn.run(
        [{"type": "edit", "edited_action": Action(name="test_tool", args={"input": "edited"})}]
    )
    assert result is not None
    assert "messages" in result
    assert len(result["messages"]) == 1
    assert result["messages"][0].tool_calls[0]["args"] == {"input": "test"}
    assert turn.ran("test_tool") == [{"input": "edited"}]

    middleware = HumanInTheLoopMiddleware(interrupt_on={"test_tool": False})

    result = _turn(middleware, ai_message).run([])
    # No interruption should occur
    assert result is None


@documented(NO_BATCH)
def test_human_in_the_loop_middleware_sequence_mismatch() -> None:
    """Test that sequence mismatch in resume raises an error."""
    ai_message = AIMessage(
        content="I'll help you",
        tool_calls=[{"name": "test_tool", "args": {"input": "test"}, "id": "1"}],
    )
    turn = _turn(HumanInTheLoopMiddleware(interrupt_on={"test_tool": True}), ai_message)

    # Test with too few responses
    with pytest.raises(
        ValueError,
        match=re.escape(
            "Number of human decisions (0) does not match number of hanging tool calls (1)."
        ),
    ):
        turn.run([])


def test_human_in_the_loop_middleware_description_as_callable() -> None:
    """Test that description field accepts both string and callable."""

    def custom_description(tool_call: ToolCall, *_args: Any, **_kwargs: Any) -> str:
        """Generate a custom description."""
        return f"Custom: {tool_call['name']} with args {tool_call['args']}"

    middleware = HumanInTheLoopMiddleware(
        interrupt_on={
            "tool_with_callable": InterruptOnConfig(
                allowed_decisions=["approve"],
                description=custom_description,
            ),
            "tool_with_string": InterruptOnConfig(
                allowed_decisions=["approve"],
                description="Static description",
            ),
        }
    )

    ai_message = AIMessage(
        content="I'll help you",
        tool_calls=[
            {"name": "tool_with_callable", "args": {"x": 1}, "id": "1"},
            {"name": "tool_with_string", "args": {"y": 2}, "id": "2"},
        ],
    )
    action_requests = _turn(middleware, ai_message).requests()
    assert len(action_requests) == 2

    # Check callable description
    assert action_requests[0]["description"] == "Custom: tool_with_callable with args {'x': 1}"

    # Check string description
    assert action_requests[1]["description"] == "Static description"


def _names_and_ids(message: AIMessage) -> list[tuple[str, str | None]]:
    return [(c["name"], c["id"]) for c in message.tool_calls]


def test_human_in_the_loop_middleware_preserves_tool_call_order() -> None:
    """Test that middleware preserves the original order of tool calls."""
    middleware = HumanInTheLoopMiddleware(
        interrupt_on={
            "tool_b": {"allowed_decisions": ["approve", "edit", "reject"]},
            "tool_d": {"allowed_decisions": ["approve", "edit", "reject"]},
        }
    )

    # Order: auto (A) -> interrupt (B) -> auto (C) -> interrupt (D) -> auto (E)
    ai_message = AIMessage(
        content="Processing multiple tools",
        tool_calls=[
            {"name": "tool_a", "args": {"val": 1}, "id": "id_a"},
            {"name": "tool_b", "args": {"val": 2}, "id": "id_b"},
            {"name": "tool_c", "args": {"val": 3}, "id": "id_c"},
            {"name": "tool_d", "args": {"val": 4}, "id": "id_d"},
            {"name": "tool_e", "args": {"val": 5}, "id": "id_e"},
        ],
    )
    result = _turn(middleware, ai_message).run([{"type": "approve"}, {"type": "approve"}])
    assert result is not None
    assert "messages" in result

    updated_ai_message = result["messages"][0]
    assert len(updated_ai_message.tool_calls) == 5

    # Verify original order is preserved: A -> B -> C -> D -> E
    assert _names_and_ids(updated_ai_message) == [
        ("tool_a", "id_a"),
        ("tool_b", "id_b"),
        ("tool_c", "id_c"),
        ("tool_d", "id_d"),
        ("tool_e", "id_e"),
    ]


def test_human_in_the_loop_middleware_preserves_order_with_edits() -> None:
    """Test that order is preserved when interrupt tools are edited."""
    middleware = HumanInTheLoopMiddleware(
        interrupt_on={
            "tool_b": {"allowed_decisions": ["approve", "edit", "reject"]},
            "tool_d": {"allowed_decisions": ["approve", "edit", "reject"]},
        }
    )

    ai_message = AIMessage(
        content="Processing multiple tools",
        tool_calls=[
            {"name": "tool_a", "args": {"val": 1}, "id": "id_a"},
            {"name": "tool_b", "args": {"val": 2}, "id": "id_b"},
            {"name": "tool_c", "args": {"val": 3}, "id": "id_c"},
            {"name": "tool_d", "args": {"val": 4}, "id": "id_d"},
        ],
    )
    turn = _turn(middleware, ai_message)
    # Edit tool_b, approve tool_d
    result = turn.run(
        [
            {"type": "edit", "edited_action": Action(name="tool_b", args={"val": 200})},
            {"type": "approve"},
        ]
    )
    assert result is not None

    updated_ai_message = result["messages"][0]
    assert len(updated_ai_message.tool_calls) == 4

    # Verify order: A (auto) -> B (edited) -> C (auto) -> D (approved)
    assert updated_ai_message.tool_calls[0]["name"] == "tool_a"
    assert updated_ai_message.tool_calls[0]["args"] == {"val": 1}
    assert updated_ai_message.tool_calls[1]["name"] == "tool_b"
    assert updated_ai_message.tool_calls[1]["args"] == {"val": 2}  # model's own
    assert turn.ran("tool_b") == [{"val": 200}]  # reviewer's
    assert updated_ai_message.tool_calls[1]["id"] == "id_b"  # ID preserved
    assert updated_ai_message.tool_calls[2]["name"] == "tool_c"
    assert updated_ai_message.tool_calls[2]["args"] == {"val": 3}
    assert updated_ai_message.tool_calls[3]["name"] == "tool_d"
    assert updated_ai_message.tool_calls[3]["args"] == {"val": 4}


def test_human_in_the_loop_middleware_preserves_order_with_rejections() -> None:
    """Test that order is preserved when some interrupt tools are rejected."""
    middleware = HumanInTheLoopMiddleware(
        interrupt_on={
            "tool_b": {"allowed_decisions": ["approve", "edit", "reject"]},
            "tool_d": {"allowed_decisions": ["approve", "edit", "reject"]},
        }
    )

    ai_message = AIMessage(
        content="Processing multiple tools",
        tool_calls=[
            {"name": "tool_a", "args": {"val": 1}, "id": "id_a"},
            {"name": "tool_b", "args": {"val": 2}, "id": "id_b"},
            {"name": "tool_c", "args": {"val": 3}, "id": "id_c"},
            {"name": "tool_d", "args": {"val": 4}, "id": "id_d"},
            {"name": "tool_e", "args": {"val": 5}, "id": "id_e"},
        ],
    )
    # Reject tool_b, approve tool_d
    result = _turn(middleware, ai_message).run(
        [{"type": "reject", "message": "Rejected tool B"}, {"type": "approve"}]
    )
    assert result is not None
    assert len(result["messages"]) == 2  # AI message + tool message for rejection

    updated_ai_message = result["messages"][0]
    assert len(updated_ai_message.tool_calls) == 5

    # Verify order maintained: A (auto) -> B (rejected) -> C (auto) -> D (approved) -> E (auto)
    assert [c["name"] for c in updated_ai_message.tool_calls] == [
        "tool_a",
        "tool_b",
        "tool_c",
        "tool_d",
        "tool_e",
    ]

    # Check rejection tool message
    tool_message = result["messages"][1]
    assert isinstance(tool_message, ToolMessage)
    assert tool_message.content == (
        "User rejected the tool call for `tool_b` with reason: Rejected tool B"
    )
    assert tool_message.tool_call_id == "id_b"


# ---------------------------------------------------------------------------
# when predicate
# ---------------------------------------------------------------------------


def test_when_predicate_batch_skips_interrupt_when_false() -> None:
    """`when` returning False prevents the tool call from joining the batch interrupt."""
    middleware = HumanInTheLoopMiddleware(
        interrupt_on={
            "test_tool": InterruptOnConfig(
                allowed_decisions=["approve"],
                when=lambda req: req.tool_call["args"].get("risky", False),
            )
        }
    )
    ai_message = AIMessage(
        content="...",
        tool_calls=[{"name": "test_tool", "args": {"risky": False}, "id": "1"}],
    )
    turn = _turn(middleware, ai_message)
    assert not turn.interrupted
    assert turn.run([]) is None


def test_when_predicate_batch_fires_interrupt_when_true() -> None:
    """`when` returning True allows the tool call to trigger the batch interrupt."""
    middleware = HumanInTheLoopMiddleware(
        interrupt_on={
            "test_tool": InterruptOnConfig(
                allowed_decisions=["approve"],
                when=lambda req: req.tool_call["args"].get("risky", False),
            )
        }
    )
    ai_message = AIMessage(
        content="...",
        tool_calls=[{"name": "test_tool", "args": {"risky": True}, "id": "1"}],
    )
    result = _turn(middleware, ai_message).run([{"type": "approve"}])

    assert result is not None


@documented(WHEN_GETS_THE_REAL_REQUEST)
def test_when_predicate_receives_correct_args() -> None:
    """The when predicate receives a ToolCallRequest with correct values and a ToolRuntime."""
    captured: list[Any] = []

    def capture_when(req: ToolCallRequest) -> bool:
        captured.append(req)
        return True

    middleware = HumanInTheLoopMiddleware(
        interrupt_on={
            "test_tool": InterruptOnConfig(
                allowed_decisions=["approve"],
                when=capture_when,
            )
        }
    )
    ai_message = AIMessage(
        content="...",
        tool_calls=[{"name": "test_tool", "args": {"val": 42}, "id": "tc-1"}],
    )
    _turn(middleware, ai_message).run([{"type": "approve"}])

    assert len(captured) == 1
    req = captured[0]
    assert req.tool_call["name"] == "test_tool"
    assert req.tool_call["args"] == {"val": 42}
    assert req.tool is None
    assert isinstance(req.runtime, ToolRuntime)
    assert req.runtime.tool_call_id == "tc-1"
    assert req.runtime.tools == []


def test_human_in_the_loop_middleware_edit_annotates_tool_result() -> None:
    """An edited call runs the reviewer's args and its result is attributed to them."""
    executed: list[dict[str, Any]] = []

    @tool
    def write_file_tool(path: str, content: str) -> str:
        """Write content to a file."""
        executed.append({"path": path, "content": content})
        return f"File written to {path}"

    model = FakeToolCallingModel(
        tool_calls=[
            [
                ToolCall(
                    name="write_file_tool",
                    args={"path": "notes.txt", "content": "Hello, world!"},
                    id="1",
                )
            ],
            [],
        ]
    )
    agent = _agent_with(
        model,
        [write_file_tool],
        [
            HumanInTheLoopMiddleware(
                interrupt_on={"write_file_tool": {"allowed_decisions": ["approve", "edit"]}}
            )
        ],
    )
    config: RunnableConfig = {"configurable": {"thread_id": "edit-annotates-result"}}

    interrupted = agent.invoke(
        {"messages": [HumanMessage("Write notes.txt with 'Hello, world!'")]}, config
    )
    assert "__interrupt__" in interrupted

    final = _resume(
        agent,
        config,
        {
            "decisions": [
                {
                    "type": "edit",
                    "edited_action": {
                        "name": "write_file_tool",
                        "args": {"path": "notes.txt", "content": "reviewer value"},
                    },
                }
            ]
        },
    )

    assert executed == [{"path": "notes.txt", "content": "reviewer value"}]

    tool_messages = [m for m in final["messages"] if isinstance(m, ToolMessage)]
    assert len(tool_messages) == 1
    content = tool_messages[0].content
    assert isinstance(content, str)
    assert content.endswith("File written to notes.txt")
    assert _EDIT_NOTICE in content
    # The original, untrusted args must not be echoed back.
    assert "Hello, world!" not in content
    assert "__interrupt__" not in final
    _assert_tool_messages_are_paired(final["messages"])


def test_human_in_the_loop_middleware_approve_does_not_annotate() -> None:
    """An approved call was the model's own, so its result must not be annotated."""

    @tool
    def write_file_tool(path: str, content: str) -> str:
        """Write content to a file."""
        return f"File written to {path} ({len(content)} chars)"

    model = FakeToolCallingModel(
        tool_calls=[
            [ToolCall(name="write_file_tool", args={"path": "/p", "content": "c"}, id="1")],
            [],
        ]
    )
    agent = _agent_with(
        model,
        [write_file_tool],
        [
            HumanInTheLoopMiddleware(
                interrupt_on={"write_file_tool": {"allowed_decisions": ["approve", "edit"]}}
            )
        ],
    )
    config: RunnableConfig = {"configurable": {"thread_id": "approve-no-annotation"}}
    agent.invoke({"messages": [HumanMessage("write it")]}, config)
    final = _resume(agent, config, {"decisions": [{"type": "approve"}]})

    tool_messages = [m for m in final["messages"] if isinstance(m, ToolMessage)]
    assert tool_messages[0].content == "File written to /p (1 chars)"


def _edited_request(
    handler: Callable[[ToolCallRequest], Any], *, asynchronous: bool = False, **options: Any
) -> ToolMessage:
    """The result of a ``write_file_tool`` call a reviewer edited to ``{"content": "edited"}``,
    whose tool returns what ``handler`` returns (the upstream fixture, end to end)."""
    returned: list[Any] = []

    @tool
    def write_file_tool(content: str) -> str:
        """Write content to a file."""
        return "unused"

    class Returning(AgentMiddleware):
        def wrap_tool_call(self, request: ToolCallRequest, _: Any) -> Any:
            returned.append(handler(request))
            return returned[-1]

        async def awrap_tool_call(self, request: ToolCallRequest, _: Any) -> Any:
            result = handler(request)
            return await result if hasattr(result, "__await__") else result

    middleware = HumanInTheLoopMiddleware(
        interrupt_on={"write_file_tool": {"allowed_decisions": ["edit"]}}, **options
    )
    model = FakeToolCallingModel(
        tool_calls=[[ToolCall(name="write_file_tool", args={"content": "model"}, id="1")], []]
    )
    agent = _agent_with(model, [write_file_tool], [middleware, Returning()])
    config: RunnableConfig = {"configurable": {"thread_id": "edited"}}
    edit = {
        "type": "edit",
        "edited_action": Action(name="write_file_tool", args={"content": "edited"}),
    }
    if asynchronous:
        import asyncio

        async def run() -> dict[str, Any]:
            await agent.ainvoke({"messages": [HumanMessage("go")]}, config)
            [intr] = (await agent.aget_state(config)).interrupts
            return await _aresume(agent, config, {intr.id: edit})

        final = asyncio.run(run())
    else:
        agent.invoke({"messages": [HumanMessage("go")]}, config)
        final = _resume(agent, config, {"decisions": [edit]})
    return next(m for m in final["messages"] if isinstance(m, ToolMessage))


@pytest.mark.parametrize(
    ("tool_output", "expected_notice_block"),
    [
        (
            [{"type": "text", "text": "wrote it"}],
            {"type": "text", "text": _EXPECTED_NOTICE_WITH_CONTENT},
        ),
        (
            [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "u"}}],
            {"type": "text", "text": _EXPECTED_NOTICE_WITH_CONTENT},
        ),
        (["wrote it"], _EXPECTED_NOTICE_WITH_CONTENT),
        ([], {"type": "text", "text": _EXPECTED_NOTICE}),  # no label without content
    ],
    ids=["text-block", "mixed-blocks", "plain-strings", "empty"],
)
@documented(VALUE_FREE_NOTICE)
def test_human_in_the_loop_middleware_edit_annotates_list_content(
    tool_output: list[Any], expected_notice_block: Any
) -> None:
    """Block-content results are annotated, preserving existing blocks and their shape."""
    result = ToolMessage(content=tool_output, tool_call_id="1", name="write_file_tool")

    annotated = _edited_request(lambda _: result)

    assert isinstance(annotated, ToolMessage)
    assert annotated.content == [expected_notice_block, *tool_output]


@documented(VALUE_FREE_NOTICE)
def test_human_in_the_loop_middleware_edit_annotates_command_result() -> None:
    """A `Command` result has its own `ToolMessage` annotated, leaving others intact."""
    command: Command[Any] = Command(
        update={
            "messages": [ToolMessage(content="wrote it", tool_call_id="1", name="write_file_tool")]
        }
    )

    annotated = _edited_request(lambda _: command)

    assert annotated.content == f"{_EXPECTED_NOTICE_WITH_CONTENT}\nwrote it"


@documented(NO_EDIT_STATE)
def test_human_in_the_loop_middleware_edit_notice_is_not_duplicated() -> None:
    """The notice is idempotent; retry middleware may re-invoke the handler."""
    middleware = HumanInTheLoopMiddleware(
        interrupt_on={"write_file_tool": {"allowed_decisions": ["edit"]}}
    )
    request = cast(
        ToolCallRequest,
        SimpleNamespace(
            tool_call=ToolCall(name="write_file_tool", args={"content": "edited"}, id="1"),
            state={"hitl_edited_tool_calls": {"1": {"name": "write_file_tool", "args": {}}}},
        ),
    )
    once = middleware.wrap_tool_call(
        request, lambda _: ToolMessage(content="wrote it", tool_call_id="1")
    )
    assert isinstance(once, ToolMessage)
    twice = middleware.wrap_tool_call(request, lambda _: once)

    assert isinstance(twice, ToolMessage)
    assert twice.content == once.content
    assert twice.content.count(_EDIT_NOTICE) == 1


@documented(VALUE_FREE_NOTICE)
def test_human_in_the_loop_middleware_edit_annotates_async() -> None:
    """`awrap_tool_call` must behave identically to the sync hook."""

    async def handler(_: ToolCallRequest) -> ToolMessage:
        return ToolMessage(content="wrote it", tool_call_id="1", name="write_file_tool")

    result = _edited_request(handler, asynchronous=True)

    assert isinstance(result, ToolMessage)
    assert result.content == f"{_EXPECTED_NOTICE_WITH_CONTENT}\nwrote it"


def test_human_in_the_loop_middleware_edit_notice_is_customizable() -> None:
    """`edit_notice` replaces the default text."""
    result = _edited_request(
        lambda _: ToolMessage(content="wrote it", tool_call_id="1"),
        edit_notice="Operator overrode these args.",
    )

    assert isinstance(result, ToolMessage)
    assert isinstance(result.content, str)
    assert result.content.startswith("Operator overrode these args.")
    assert _EDIT_NOTICE not in result.content


@pytest.mark.parametrize(
    "tool_output",
    ["wrote it", [{"type": "text", "text": "wrote it"}]],
    ids=["string", "blocks"],
)
def test_human_in_the_loop_middleware_edit_notice_can_be_disabled(tool_output: Any) -> None:
    """`edit_notice=None` leaves results untouched for both content shapes."""
    result = _edited_request(
        lambda _: ToolMessage(content=tool_output, tool_call_id="1"), edit_notice=None
    )

    assert isinstance(result, ToolMessage)
    assert result.content == tool_output


@documented(VALUE_FREE_NOTICE)
def test_human_in_the_loop_middleware_edit_executes_reviewers_call() -> None:
    """The reviewer's args run while the model's own call stays in the message."""
    executed: list[dict[str, Any]] = []

    @tool
    def write_file_tool(path: str, content: str) -> str:
        """Write content to a file."""
        executed.append({"path": path, "content": content})
        return f"File written to {path}"

    model = FakeToolCallingModel(
        tool_calls=[
            [
                ToolCall(
                    name="write_file_tool", args={"path": "notes.txt", "content": "mine"}, id="1"
                )
            ],
            [],
        ]
    )
    agent = _agent_with(
        model,
        [write_file_tool],
        [
            HumanInTheLoopMiddleware(
                interrupt_on={"write_file_tool": {"allowed_decisions": ["approve", "edit"]}}
            )
        ],
    )
    config: RunnableConfig = {"configurable": {"thread_id": "executes-reviewer-call"}}
    agent.invoke({"messages": [HumanMessage("write it")]}, config)
    final = _resume(
        agent,
        config,
        {
            "decisions": [
                {
                    "type": "edit",
                    "edited_action": {
                        "name": "write_file_tool",
                        "args": {"path": "notes.txt", "content": "reviewers"},
                    },
                }
            ]
        },
    )

    assert executed == [{"path": "notes.txt", "content": "reviewers"}]
    ai_message = next(m for m in final["messages"] if isinstance(m, AIMessage) and m.tool_calls)
    assert ai_message.tool_calls[0]["args"] == {"path": "notes.txt", "content": "mine"}
    tool_message = next(m for m in final["messages"] if isinstance(m, ToolMessage))
    assert "reviewers" in tool_message.content
    _assert_tool_messages_are_paired(final["messages"])


def _send_and_draft() -> tuple[list[str], list[BaseTool]]:
    executed: list[str] = []

    @tool
    def send_email(to: str) -> str:
        """Send an email."""
        executed.append("send_email")
        return f"sent to {to}"

    @tool
    def draft_email(to: str) -> str:
        """Draft an email."""
        executed.append("draft_email")
        return f"drafted to {to}"

    return executed, [send_email, draft_email]


@documented(SAME_TOOL_EDITS)
def test_human_in_the_loop_middleware_edit_can_redirect_to_another_tool() -> None:
    """A reviewer may redirect the call to a different tool."""
    executed, tools = _send_and_draft()
    model = FakeToolCallingModel(
        tool_calls=[[ToolCall(name="send_email", args={"to": "a@b.c"}, id="1")], []]
    )
    agent = _agent_with(
        model,
        tools,
        [
            HumanInTheLoopMiddleware(
                interrupt_on={"send_email": {"allowed_decisions": ["approve", "edit"]}}
            )
        ],
    )
    config: RunnableConfig = {"configurable": {"thread_id": "edit-redirects-tool"}}
    agent.invoke({"messages": [HumanMessage("send it")]}, config)
    final = _resume(
        agent,
        config,
        {
            "decisions": [
                {
                    "type": "edit",
                    "edited_action": {"name": "draft_email", "args": {"to": "a@b.c"}},
                }
            ]
        },
    )

    assert executed == ["draft_email"]
    tool_message = next(m for m in final["messages"] if isinstance(m, ToolMessage))
    assert "drafted" in tool_message.content


@pytest.mark.parametrize(
    ("requested", "replacement", "expected_turns_after_tool"),
    [("direct_tool", "normal_tool", 1), ("normal_tool", "direct_tool", 0)],
    ids=["direct-to-normal", "normal-to-direct"],
)
@documented(SAME_TOOL_EDITS)
def test_human_in_the_loop_middleware_edit_routes_on_executed_tool(
    requested: str, replacement: str, expected_turns_after_tool: int
) -> None:
    """`return_direct` termination must follow the tool that ran, not the one requested."""

    @tool(return_direct=True)
    def direct_tool(x: str) -> str:
        """Return directly."""
        return f"direct {x}"

    @tool
    def normal_tool(x: str) -> str:
        """Do not return directly."""
        return f"normal {x}"

    model = FakeToolCallingModel(tool_calls=[[ToolCall(name=requested, args={"x": "1"}, id="1")]])
    agent = _agent_with(
        model,
        [direct_tool, normal_tool],
        [
            HumanInTheLoopMiddleware(
                interrupt_on={requested: {"allowed_decisions": ["approve", "edit"]}}
            )
        ],
    )
    config: RunnableConfig = {"configurable": {"thread_id": f"route-{requested}-{replacement}"}}
    agent.invoke({"messages": [HumanMessage("go")]}, config)
    final = _resume(
        agent,
        config,
        {
            "decisions": [
                {"type": "edit", "edited_action": {"name": replacement, "args": {"x": "1"}}}
            ]
        },
    )

    tool_idx = max(i for i, m in enumerate(final["messages"]) if isinstance(m, ToolMessage))
    model_turns = sum(isinstance(m, AIMessage) for m in final["messages"][tool_idx + 1 :])
    assert model_turns == expected_turns_after_tool


@documented(SAME_TOOL_EDITS)
def test_human_in_the_loop_middleware_edit_to_unknown_tool_raises() -> None:
    """A reviewer naming a tool the agent does not have fails loudly."""

    @tool
    def write_file_tool(content: str) -> str:
        """Write content."""
        return f"wrote {len(content)} chars"

    model = FakeToolCallingModel(
        tool_calls=[[ToolCall(name="write_file_tool", args={"content": "x"}, id="1")], []]
    )
    agent = _agent_with(
        model,
        [write_file_tool],
        [
            HumanInTheLoopMiddleware(
                interrupt_on={"write_file_tool": {"allowed_decisions": ["edit"]}}
            )
        ],
    )
    config: RunnableConfig = {"configurable": {"thread_id": "unknown-tool"}}
    agent.invoke({"messages": [HumanMessage("go")]}, config)
    edit = {"type": "edit", "edited_action": Action(name="nope", args={"content": "y"})}
    with pytest.raises(ValueError, match="not an available tool"):
        _resume(agent, config, {"decisions": [edit]})


@documented(NO_EDIT_STATE)
def test_a_turn_that_resolves_no_decisions_clears_the_previous_turns_edits() -> None:
    """A recorded edit does not outlive the turn that recorded it."""
    middleware = HumanInTheLoopMiddleware(interrupt_on={"write_file_tool": True})
    state = AgentState[Any](
        messages=[
            HumanMessage("go"),
            AIMessage(
                content="",
                tool_calls=[{"name": "read_file_tool", "args": {"path": "p"}, "id": "1"}],
            ),
        ],
    )
    state["hitl_edited_tool_calls"] = {  # type: ignore[typeddict-unknown-key]
        "1": Action(name="write_file_tool", args={"content": "reviewer"})
    }

    assert middleware.after_model(state, Runtime()) == {"hitl_edited_tool_calls": {}}


def test_a_turn_with_nothing_recorded_does_not_write_state() -> None:
    """The clear is only issued when there is something to clear."""
    middleware = HumanInTheLoopMiddleware(interrupt_on={"write_file_tool": True})
    state = AgentState[Any](
        messages=[
            HumanMessage("go"),
            AIMessage(
                content="",
                tool_calls=[{"name": "read_file_tool", "args": {"path": "p"}, "id": "1"}],
            ),
        ],
    )

    assert middleware.after_model(state, Runtime()) is None


def test_reused_tool_call_id_does_not_replay_a_previous_turns_edit() -> None:
    """End to end: a later call reusing an edited call's ID runs the model's own args."""
    executed: list[tuple[str, str]] = []

    @tool
    def write_file_tool(path: str, content: str) -> str:
        """Write content to a file."""
        executed.append(("write", content))
        return f"File written to {path}"

    @tool
    def read_file_tool(path: str) -> str:
        """Read a file."""
        executed.append(("read", path))
        return f"Contents of {path}"

    model = FakeToolCallingModel(
        tool_calls=[
            [ToolCall(name="write_file_tool", args={"path": "a.txt", "content": "model"}, id="1")],
            # The same ID on a tool that is not gated, so this turn reviews nothing.
            [ToolCall(name="read_file_tool", args={"path": "b.txt"}, id="1")],
            [],
        ]
    )
    agent = _agent_with(
        model,
        [write_file_tool, read_file_tool],
        [HumanInTheLoopMiddleware(interrupt_on={"write_file_tool": True})],
    )
    config: RunnableConfig = {"configurable": {"thread_id": "reused-tool-call-id"}}

    agent.invoke({"messages": [HumanMessage("write it, then read it")]}, config)
    final = _resume(
        agent,
        config,
        {
            "decisions": [
                {
                    "type": "edit",
                    "edited_action": {
                        "name": "write_file_tool",
                        "args": {"path": "a.txt", "content": "reviewer"},
                    },
                }
            ]
        },
    )

    assert executed == [("write", "reviewer"), ("read", "b.txt")]
    read_result = [m for m in final["messages"] if isinstance(m, ToolMessage)][-1]
    # The read was never edited, so its result carries no notice.
    assert read_result.content == "Contents of b.txt"


@documented(SAME_TOOL_EDITS)
def test_recorded_edit_survives_a_later_tightening_of_allowed_decisions() -> None:
    """A completed decision is honored as recorded, even under a stricter config."""
    executed, tools = _send_and_draft()
    model = FakeToolCallingModel(
        tool_calls=[[ToolCall(name="send_email", args={"to": "a@b.c"}, id="1")], []]
    )
    agent = _agent_with(
        model,
        tools,
        [
            HumanInTheLoopMiddleware(
                interrupt_on={"send_email": {"allowed_decisions": ["approve", "edit"]}}
            )
        ],
    )
    config: RunnableConfig = {"configurable": {"thread_id": "tightened"}}
    agent.invoke({"messages": [HumanMessage("go")]}, config)
    edit = {"type": "edit", "edited_action": Action(name="draft_email", args={"to": "a@b.c"})}
    final = _resume(agent, config, {"decisions": [edit]})

    # The reviewer's replacement runs; the declined original never does.
    assert executed == ["draft_email"]
    assert "draft_email" in next(m for m in final["messages"] if isinstance(m, ToolMessage)).content


@documented(NO_EDIT_STATE)
async def test_async_turn_that_resolves_no_decisions_clears_the_previous_turns_edits() -> None:
    """`aafter_model` drops the previous turn's edits too."""
    middleware = HumanInTheLoopMiddleware(interrupt_on={"write_file_tool": True})
    state = AgentState[Any](
        messages=[
            HumanMessage("go"),
            AIMessage(
                content="",
                tool_calls=[{"name": "read_file_tool", "args": {"path": "p"}, "id": "1"}],
            ),
        ],
    )
    state["hitl_edited_tool_calls"] = {  # type: ignore[typeddict-unknown-key]
        "1": Action(name="write_file_tool", args={"content": "reviewer"})
    }

    assert await middleware.aafter_model(state, Runtime()) == {"hitl_edited_tool_calls": {}}


def test_return_direct_routing_keeps_calls_with_unnamed_results() -> None:
    """A result without a usable name must still participate in the return-direct check."""

    @tool(return_direct=True)
    def direct_tool(x: str) -> str:
        """Return directly."""
        return f"direct {x}"

    @tool
    def normal_tool(x: str) -> str:
        """Do not return directly."""
        return f"normal {x}"

    node = ToolNode([direct_tool, normal_tool])
    edge = _make_tools_to_model_edge(
        tool_node=node,
        model_destination="MODEL",
        structured_output_tools={},
        end_destination="END",
    )
    ai_message = AIMessage(
        "",
        tool_calls=[
            {"name": "direct_tool", "args": {"x": "1"}, "id": "1", "type": "tool_call"},
            {"name": "normal_tool", "args": {"x": "2"}, "id": "2", "type": "tool_call"},
        ],
    )
    messages = [
        HumanMessage("go"),
        ai_message,
        ToolMessage(content="direct result", tool_call_id="1", name="direct_tool"),
        # A tool or middleware may omit `name`; the call must not drop out of the check.
        ToolMessage(content="normal result", tool_call_id="2"),
    ]

    assert edge({"messages": messages}) == "MODEL"


# --- Per-call mode (interrupt_mode="per_call") ---


def _response_schema(allowed: list[str], name: str) -> dict[str, Any]:
    """The response schema of an interrupt for a tool allowing ``allowed``."""
    agent = _agent(
        [_send_email([])],
        [ToolCall(name=name, args={"to": "alice"}, id="call_email")],
        {name: {"allowed_decisions": allowed}},
    )
    result = agent.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "t"}})
    return cast(dict[str, Any], result["__interrupt__"][0].response_schema)


@pytest.mark.parametrize("allowed", [["respond"], ["respond", "respond"]])
@documented(AAIS_ANSWER_SCHEMA)
def test_decision_schema_with_one_decision_is_a_plain_object(allowed: list[str]) -> None:
    schema = _response_schema(allowed, "send_email")
    assert schema["properties"]["type"]["const"] == "respond"
    assert schema["required"] == ["type", "message"]


@pytest.mark.parametrize(
    ("answer", "loc", "error_type"),
    [
        ({"type": "edit"}, ("edit", "edited_action"), "missing"),
        ({"type": "nope"}, (), "union_tag_invalid"),
        (
            {"type": "edit", "edited_action": {"name": "send_email", "args": {}}},
            ("edit", "edited_action", "args", "to"),
            "missing",
        ),
        (
            {"type": "edit", "edited_action": {"name": "delete_file", "args": {"to": "b"}}},
            ("edit", "edited_action", "name"),
            "literal_error",
        ),
    ],
)
@documented(AAIS_ANSWER_SCHEMA)
def test_decision_schema_rejects_a_bad_answer_with_one_error_at_the_problem(
    answer: dict[str, Any], loc: tuple[str, ...], error_type: str
) -> None:
    agent = _agent(
        [_send_email([])],
        [ToolCall(name="send_email", args={"to": "alice"}, id="call_email")],
        {"send_email": True},
    )
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    [intr] = agent.invoke({"messages": [HumanMessage("go")]}, config)["__interrupt__"]
    with pytest.raises(ValidationError) as exc_info:
        _resume(agent, config, {intr.id: answer})
    assert [(e["loc"], e["type"]) for e in exc_info.value.errors()] == [(loc, error_type)]


@pytest.mark.parametrize(
    "tool",
    [
        None,
        StructuredTool(
            name="send_email",
            description="d",
            func=lambda **_: "sent",
            args_schema={"type": "object", "properties": {"to": {"type": "string"}}},
        ),
    ],
    ids=["no_tool", "json_schema_tool"],
)
@documented(AAIS_ANSWER_SCHEMA)
def test_edit_args_without_a_pydantic_schema_are_shown_but_not_enforced(
    tool: BaseTool | None,
) -> None:
    tools = [tool] if tool is not None else [_send_email([])]
    agent = _agent(
        tools,
        [ToolCall(name="send_email", args={"to": "alice"}, id="call_email")],
        {"send_email": {"allowed_decisions": ["edit"]}},
    )
    result = agent.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "t"}})
    schema = result["__interrupt__"][0].response_schema
    assert schema["$defs"]["EditedAction"]["properties"]["args"]["type"] == "object"


@documented(NO_INTERRUPT_MODE)
def test_middleware_checks_interrupt_mode() -> None:
    middleware = HumanInTheLoopMiddleware(interrupt_on={"t": True})
    assert middleware.interrupt_mode == "batched"  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="must be 'batched' or 'per_call', got 'sometimes'"):
        HumanInTheLoopMiddleware(interrupt_on={"t": True}, interrupt_mode="sometimes")


def _send_email(ran: list[str]) -> BaseTool:
    @tool
    def send_email(to: str) -> str:
        """Send an email."""
        ran.append(to)
        return f"sent to {to}"

    return send_email


def _agent(
    tools: list[BaseTool],
    tool_calls: list[ToolCall],
    interrupt_on: dict[str, Any],
    *after: AgentMiddleware,
) -> Any:
    """An agent with per-call HITL whose model makes `tool_calls`, then finishes."""
    return _agent_with(
        FakeToolCallingModel(tool_calls=[tool_calls, []]),
        tools,
        [HumanInTheLoopMiddleware(interrupt_on, interrupt_mode="per_call"), *after],
    )


@documented(AAIS_ANSWER_SCHEMA)
def test_per_call_interrupt_shows_the_call_and_the_answers_it_accepts() -> None:
    agent = _agent(
        [_send_email([])],
        [ToolCall(name="send_email", args={"to": "alice"}, id="call_email")],
        {
            "send_email": {
                "allowed_decisions": ["approve", "edit", "reject"],
                "description": "Email",
                # Not used in per-call mode: the edit's args come from the tool itself.
                "args_schema": {"type": "object", "properties": {"recipient": {"type": "string"}}},
            }
        },
    )
    result = agent.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "t"}})
    [intr] = result["__interrupt__"]

    # `value`: the tool call waiting for review.
    assert intr.value == {
        "type": "tool_approval",
        "tool_call_id": "call_email",
        "name": "send_email",
        "args": {"to": "alice"},
        "description": "Email",
    }


_EACH_DECISION = [
    ({"type": "approve"}, ["alice"], "success", "sent to alice"),
    pytest.param(
        {"type": "edit", "edited_action": {"name": "send_email", "args": {"to": "bob"}}},
        ["bob"],
        "success",
        "sent to bob",
        marks=documented(VALUE_FREE_NOTICE),
    ),
    # The tool ignores an arg it doesn't declare, as it would from the model.
    pytest.param(
        {
            "type": "edit",
            "edited_action": {"name": "send_email", "args": {"to": "bob", "subject": "hi"}},
        },
        ["bob"],
        "success",
        "sent to bob",
        marks=documented(VALUE_FREE_NOTICE),
    ),
    (
        {"type": "reject", "message": "not now"},
        [],
        "error",
        "User rejected the tool call for `send_email` with reason: not now",
    ),
    ({"type": "respond", "message": "already sent"}, [], "success", "already sent"),
]


@pytest.mark.parametrize(
    ("answer", "ran_with", "status", "content"),
    _EACH_DECISION,
    ids=["approve", "edit", "edit-with-an-undeclared-arg", "reject", "respond"],
)
@pytest.mark.parametrize("interrupt_mode", ["batched", "per_call"])
def test_resume_with_each_decision(
    answer: dict[str, Any], ran_with: list[str], status: str, content: str, interrupt_mode: str
) -> None:
    ran: list[str] = []
    agent = _agent_with(
        FakeToolCallingModel(
            tool_calls=[[ToolCall(name="send_email", args={"to": "alice"}, id="call_email")], []]
        ),
        [_send_email(ran)],
        [HumanInTheLoopMiddleware({"send_email": True}, interrupt_mode=interrupt_mode)],
    )
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    [intr] = agent.invoke({"messages": [HumanMessage("go")]}, config)["__interrupt__"]

    resume = {"decisions": [answer]} if interrupt_mode == "batched" else {intr.id: answer}
    final = _resume(agent, config, resume)

    [message] = [m for m in final["messages"] if isinstance(m, ToolMessage)]
    assert message.additional_kwargs == (
        {"lc_source": "hitl_interrupt_decision", "lc_data": {"decision": answer["type"]}}
        if answer["type"] in ("reject", "respond")
        else {}
    )
    assert (ran, message.status) == (ran_with, status)
    assert str(message.content).endswith(content)
    # Only an edit tells the model that a reviewer replaced the call.
    assert ("Executed instead: send_email" in str(message.content)) == (answer["type"] == "edit")


@documented(AAIS_ANSWER_SCHEMA)
def test_per_call_edit_leaves_validation_and_injected_args_to_the_tool() -> None:
    @tool
    def send_email(
        to: Annotated[str, AfterValidator(lambda v: f"<{v}>")], runtime: ToolRuntime
    ) -> str:
        """Send an email."""
        return f"sent to {to} for {runtime.tool_call_id}"

    agent = _agent(
        [send_email],
        [ToolCall(name="send_email", args={"to": "alice"}, id="call_email")],
        {"send_email": True},
    )
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    [intr] = agent.invoke({"messages": [HumanMessage("go")]}, config)["__interrupt__"]
    # The reviewer edits only what the model sees; the tool validates the edit once and
    # gets `runtime` injected.
    assert list(intr.response_schema["$defs"]["send_email"]["properties"]) == ["to"]
    edit = {"type": "edit", "edited_action": {"name": "send_email", "args": {"to": "bob"}}}
    final = _resume(agent, config, {intr.id: edit})
    [message] = [m for m in final["messages"] if isinstance(m, ToolMessage)]
    assert str(message.content).endswith("sent to <bob> for call_email")


@documented(AAIS_ANSWER_SCHEMA)
def test_per_call_pauses_once_per_gated_call_and_applies_answers_by_id() -> None:
    ran: list[str] = []

    @tool
    def send_email(to: str, cc: str | None = None) -> str:
        """Send an email."""
        ran.append(f"send_email(to={to}, cc={cc})")
        return f"sent to {to}"

    @tool
    def delete_file(path: str) -> str:
        """Delete a file."""
        ran.append(f"delete_file({path})")
        return f"deleted {path}"

    @tool
    def read_file(path: str) -> str:
        """Read a file."""
        ran.append(f"read_file({path})")
        return f"contents of {path}"

    calls = [
        ToolCall(name="send_email", args={"to": "alice", "cc": "carol"}, id="call_email"),
        ToolCall(name="delete_file", args={"path": "x.txt"}, id="call_delete"),
        ToolCall(name="delete_file", args={"path": "tmp.txt"}, id="call_delete_tmp"),
        ToolCall(name="read_file", args={"path": "y.txt"}, id="call_read"),
    ]
    agent = _agent(
        [send_email, delete_file, read_file],
        calls,
        {
            "send_email": True,
            "delete_file": {
                "allowed_decisions": ["approve", "reject"],
                "when": lambda req: req.tool_call["args"]["path"] != "tmp.txt",
            },
        },
    )
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    paused = agent.invoke({"messages": [HumanMessage("go")]}, config)["__interrupt__"]
    by_tool = {_hitl_value(i.value)["name"]: i for i in paused}
    email, delete = by_tool["send_email"], by_tool["delete_file"]
    assert (len(paused), _hitl_value(delete.value)["args"]) == (2, {"path": "x.txt"})
    assert email.id != delete.id
    # A call that isn't gated, or that `when` lets through, runs without waiting.
    assert sorted(ran) == ["delete_file(tmp.txt)", "read_file(y.txt)"]

    # Each interrupt accepts only its own tool's decisions.
    assert delete.response_schema["oneOf"] == [
        {"$ref": "#/$defs/ApproveDecision"},
        {"$ref": "#/$defs/RejectDecision"},
    ]


@pytest.mark.parametrize(
    ("error", "after"),
    [
        (r"1 validation error for .*\nedit\.edited_action\n", []),
        # Listed before error-handling middleware, HITL's error still reaches the caller.
        (r"edit\.edited_action", [ToolRetryMiddleware(initial_delay=0)]),
        (r"edit\.edited_action", [ToolErrorMiddleware(on_error=lambda *_: "x")]),
    ],
    ids=["hitl_alone", "hitl_wraps_retry", "hitl_wraps_tool_error"],
)
@documented(AAIS_ANSWER_SCHEMA)
def test_per_call_rejects_a_bad_answer_without_saving_it(
    error: str, after: list[AgentMiddleware]
) -> None:
    ran: list[str] = []
    agent = _agent(
        [_send_email(ran)],
        [ToolCall(name="send_email", args={"to": "alice"}, id="call_email")],
        {"send_email": True},
        *after,
    )
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    [intr] = agent.invoke({"messages": [HumanMessage("go")]}, config)["__interrupt__"]

    with pytest.raises(ValidationError, match=error):
        _resume(agent, config, {intr.id: {"type": "edit"}})
    assert ran == []

    edit = {"type": "edit", "edited_action": {"name": "send_email", "args": {"to": "bob"}}}
    final = _resume(agent, config, {intr.id: edit})
    assert ran == ["bob"]
    assert "__interrupt__" not in final


def test_per_call_needs_a_tool_call_id() -> None:
    agent = _agent(
        [_send_email([])],
        [ToolCall(name="send_email", args={"to": "alice"}, id=None)],
        {"send_email": True},
    )
    with pytest.raises(ValueError, match="`send_email` has no ID"):
        agent.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "t"}})


def test_per_call_description_factory_gets_the_graph_runtime() -> None:
    seen: list[object] = []

    def describe(tool_call: ToolCall, state: AgentState[Any], runtime: Runtime[Any]) -> str:
        seen.append(runtime)
        return f"Email {tool_call['args']['to']}? ({len(state['messages'])} messages)"

    config = {"allowed_decisions": ["approve"], "description": describe}
    agent = _agent(
        [_send_email([])],
        [ToolCall(name="send_email", args={"to": "alice"}, id="call_email")],
        {"send_email": config},
    )
    result = agent.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "t"}})
    [intr] = result["__interrupt__"]

    assert _hitl_value(intr.value)["description"] == "Email alice? (2 messages)"
    assert seen
    assert all(isinstance(runtime, Runtime) for runtime in seen)  # as in batched mode


def test_per_call_same_tool_twice_routes_each_answer_to_its_own_call() -> None:
    ran: list[str] = []

    # An empty ID works too, as in batched mode.
    calls = [ToolCall(name="send_email", args={"to": "alice"}, id=i) for i in ("e1", "")]
    agent = _agent([_send_email(ran)], calls, {"send_email": True})
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    paused = agent.invoke({"messages": [HumanMessage("go")]}, config)["__interrupt__"]
    by_call = {_hitl_value(i.value)["tool_call_id"]: i.id for i in paused}
    assert set(by_call) == {"e1", ""}

    answers = {by_call["e1"]: {"type": "approve"}, by_call[""]: {"type": "reject"}}
    final = _resume(agent, config, answers)
    assert ran == ["alice"]
    messages = {m.tool_call_id: m for m in final["messages"] if isinstance(m, ToolMessage)}
    assert messages[""].status == "error"


@pytest.mark.skipif(sys.version_info < (3, 11), reason="Asyncio context vars require Python 3.11+")
@pytest.mark.parametrize(
    ("answer", "status", "content"),
    [
        (
            {"type": "edit", "edited_action": {"name": "send_email", "args": {"to": "bob"}}},
            "success",
            "sent to bob",
        ),
        ({"type": "reject"}, "error", "The tool was not executed."),
        ({"type": "respond", "message": "already sent"}, "success", "already sent"),
    ],
    ids=["edit", "reject", "respond"],
)
@documented(AAIS_ANSWER_SCHEMA)
async def test_per_call_works_with_ainvoke(
    answer: dict[str, Any], status: str, content: str
) -> None:
    agent = _agent(
        [_send_email([])],
        [ToolCall(name="send_email", args={"to": "alice"}, id="call_email")],
        {"send_email": True},
    )
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    [intr] = (await agent.ainvoke({"messages": [HumanMessage("go")]}, config))["__interrupt__"]

    with pytest.raises(ValidationError, match=r"edit\.edited_action"):
        await _aresume(agent, config, {intr.id: {"type": "edit"}})
    final = await _aresume(agent, config, {intr.id: answer})

    [message] = [m for m in final["messages"] if isinstance(m, ToolMessage)]
    assert message.status == status
    assert content in str(message.content)


def test_per_call_retried_tool_is_not_reviewed_again_when_hitl_wraps_retry() -> None:
    attempts: list[str] = []

    @tool
    def send_email(to: str) -> str:
        """Send an email."""
        attempts.append(to)
        if len(attempts) == 1:
            msg = "mail server unavailable"
            raise RuntimeError(msg)
        return f"sent to {to}"

    agent = _agent(
        [send_email],
        [ToolCall(name="send_email", args={"to": "alice"}, id="call_email")],
        {"send_email": True},
        ToolRetryMiddleware(initial_delay=0),
    )
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    [intr] = agent.invoke({"messages": [HumanMessage("go")]}, config)["__interrupt__"]
    final = _resume(agent, config, {intr.id: {"type": "approve"}})

    assert "__interrupt__" not in final  # the retry didn't ask the reviewer again
    assert attempts == ["alice", "alice"]
    [message] = [m for m in final["messages"] if isinstance(m, ToolMessage)]
    assert message.content == "sent to alice"

"""A deterministic deep agent for the subagent tests: two subagents, one gated, fake models.

``create_deep_agent`` (``deepagents``) with scripted fake chat models:

- the parent, in its first turn, delegates to both subagents with two ``task`` calls
  and calls its own ungated ``take_note`` beside them (three parallel tool tasks);
- ``mailer`` calls the gated ``send_email`` and the ungated ``look_up`` in one turn,
  then answers;
- ``researcher`` calls the ungated ``search`` and answers.

Every tool appends one line ``<tool> <argument>`` to an :class:`EffectLog` file
(flushed and synced), so a test in this process or another counts how often each
ran: the gated tool at most once, the ungated siblings exactly once, whatever
happens around the pause.

``gate="middleware"`` puts :class:`~aais_langgraph.tools.ApprovalMiddleware` in the
mailer's ``middleware``; ``gate="interrupt_on"`` passes
``create_deep_agent(interrupt_on={"send_email": True})`` instead (LangChain's
``HumanInTheLoopMiddleware`` for the parent and every subagent); ``gate="both"`` does both;
``gate="helper"`` builds it with :func:`~aais_langgraph.tools.approval_deep_agent` and
``interrupt_on={"send_email": True}`` (ApprovalMiddleware in the parent and every subagent).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from deepagents import create_deep_agent
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool, tool

from aais_langgraph import ApprovalAuthority
from aais_langgraph.tools import ApprovalMiddleware, approval_deep_agent

RECIPIENT = "bob@example.com"
EDITED = "carol@example.com"
"""The recipient a reviewer's edit sets."""
GATED = "send_email"
SIBLINGS = ("take_note", "look_up", "search")
"""The ungated tools: the parent's own, the gated tool's sibling in the mailer, the
researcher's."""
SEND_CALL_ID = "call_send_email"
LOOK_UP_CALL_ID = "call_look_up"


class ScriptedChatModel(FakeMessagesListChatModel):
    """Answers turn *n* of a conversation with ``responses[n]``, however often it is re-run
    (the turn is the number of AI messages already in the input). Its last answer repeats
    what its tools returned, so the parent reads what the subagent's model was told."""

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        turn = sum(isinstance(m, AIMessage) for m in messages)
        message = self.responses[min(turn, len(self.responses) - 1)]
        if not message.tool_calls:
            results = sorted(
                (m.tool_call_id, str(m.content)) for m in messages if isinstance(m, ToolMessage)
            )
            told = " | ".join(f"{call_id}: {content}" for call_id, content in results)
            message = message.model_copy(update={"content": f"{message.content} {told}"})
        return ChatResult(generations=[ChatGeneration(message=message)])

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:
        return self


def _script(name: str, *calls: dict[str, Any]) -> ScriptedChatModel:
    """A model that makes ``calls`` in its first turn and answers in its second."""
    return ScriptedChatModel(
        responses=[
            AIMessage(content="", tool_calls=list(calls), id=f"ai-{name}-0"),
            AIMessage(content=f"{name}: done.", id=f"ai-{name}-1"),
        ]
    )


class RoutedChatModel(FakeMessagesListChatModel):
    """Plays the script named by the conversation's first human message (the user's text
    for the parent, the ``task`` description for a subagent sharing the model)."""

    scripts: dict[str, list[AIMessage]]

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        first = next(str(m.content) for m in messages if isinstance(m, HumanMessage))
        script = self.scripts[first]
        turn = sum(isinstance(m, AIMessage) for m in messages)
        return ChatResult(generations=[ChatGeneration(message=script[min(turn, len(script) - 1)])])

    def bind_tools(self, tools: Any, **kwargs: Any) -> RoutedChatModel:
        return self


def tool_call(name: str, call_id: str, **args: Any) -> dict[str, Any]:
    """A tool call as a model emits it."""
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


def delegating_model(
    tool_name: str, subagent: str = "general-purpose", **args: Any
) -> RoutedChatModel:
    """The parent sends "Email Bob" to ``subagent`` (by default the general-purpose one,
    which shares its model) and answers; "Email Bob" calls ``tool_name`` (with ``args``,
    by default ``to=bob@example.com``) and answers."""
    return RoutedChatModel(
        responses=[AIMessage(content="unused")],
        scripts={
            "go": [
                AIMessage(
                    content="",
                    tool_calls=[
                        tool_call(
                            "task",
                            "call_task",
                            description="Email Bob",
                            subagent_type=subagent,
                        )
                    ],
                    id="ai-parent-0",
                ),
                AIMessage(content="parent: done.", id="ai-parent-1"),
            ],
            "Email Bob": [
                AIMessage(
                    content="",
                    tool_calls=[tool_call(tool_name, "call_send", **(args or {"to": RECIPIENT}))],
                    id="ai-gp-0",
                ),
                AIMessage(content="general-purpose: done.", id="ai-gp-1"),
            ],
        },
    )


class EffectLog:
    """One line per tool execution, appended and synced (readable from other processes)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def append(self, tool_name: str, argument: str) -> None:
        with open(self.path, "a", encoding="utf-8") as log:
            log.write(f"{tool_name} {argument}\n")
            log.flush()
            os.fsync(log.fileno())

    def lines(self) -> list[str]:
        if not self.path.exists():
            return []
        return self.path.read_text(encoding="utf-8").splitlines()

    def count(self, tool_name: str) -> int:
        return sum(1 for line in self.lines() if line.split(" ", 1)[0] == tool_name)

    def counts(self) -> dict[str, int]:
        return {name: self.count(name) for name in (GATED, *SIBLINGS)}


def tools(
    effects: EffectLog, *, in_action: Callable[[], None] | None = None
) -> dict[str, BaseTool]:
    """The four tools, each logging its runs to ``effects``; ``in_action`` runs inside the
    gated tool after its effect (a crash point)."""

    @tool
    def send_email(to: str) -> str:
        """Send an email."""
        effects.append("send_email", to)
        if in_action is not None:
            in_action()
        return f"sent to {to}"

    @tool
    def look_up(query: str) -> str:
        """Look a contact up."""
        effects.append("look_up", query)
        return "found"

    @tool
    def search(query: str) -> str:
        """Search the web."""
        effects.append("search", query)
        return "3 results"

    @tool
    def take_note(text: str) -> str:
        """Write a note."""
        effects.append("take_note", text)
        return "noted"

    return {t.name: t for t in (send_email, look_up, search, take_note)}


def build_deep_agent(
    effects: EffectLog,
    checkpointer: Any,
    *,
    authority: ApprovalAuthority | None = None,
    gate: Literal["middleware", "interrupt_on", "both", "helper"] = "middleware",
    in_action: Callable[[], None] | None = None,
) -> Any:
    """The deep agent: the parent, ``mailer`` (gated ``send_email``), ``researcher``.

    Args:
        effects: where every tool run is logged.
        checkpointer: the parent's checkpointer (the subagents use it, namespaced).
        authority: the approval authority (None: the run's, as the middleware finds it).
        gate: ``"middleware"`` (ApprovalMiddleware in the mailer), ``"interrupt_on"``,
            ``"both"``, or ``"helper"`` (``approval_deep_agent``).
        in_action: called inside the gated tool after its effect.
    """
    found = tools(effects, in_action=in_action)
    parent = _script(
        "parent",
        tool_call("task", "call_task_mailer", description="Email Bob", subagent_type="mailer"),
        tool_call(
            "task", "call_task_researcher", description="Research X", subagent_type="researcher"
        ),
        tool_call("take_note", "call_take_note", text="delegated"),
    )
    mailer = _script(
        "mailer",
        tool_call(GATED, SEND_CALL_ID, to=RECIPIENT),
        tool_call("look_up", LOOK_UP_CALL_ID, query="bob"),
    )
    researcher = _script("researcher", tool_call("search", "call_search", query="x"))
    mailer_spec: dict[str, Any] = {
        "name": "mailer",
        "description": "Sends email.",
        "system_prompt": "You send email.",
        "model": mailer,
        "tools": [found[GATED], found["look_up"]],
    }
    if gate in ("middleware", "both"):
        mailer_spec["middleware"] = [ApprovalMiddleware({GATED: True}, authority=authority)]
    subagents: list[Any] = [
        mailer_spec,
        {
            "name": "researcher",
            "description": "Researches.",
            "system_prompt": "You research.",
            "model": researcher,
            "tools": [found["search"]],
        },
    ]
    if gate == "helper":
        return approval_deep_agent(
            parent,
            [found["take_note"]],
            interrupt_on={GATED: True},
            authority=authority,
            subagents=subagents,
            checkpointer=checkpointer,
        )
    return create_deep_agent(
        model=parent,
        tools=[found["take_note"]],
        subagents=subagents,
        interrupt_on={GATED: True} if gate in ("interrupt_on", "both") else None,
        checkpointer=checkpointer,
    )

"""Benchmark: ApprovalMiddleware against HumanInTheLoopMiddleware(per_call), approve round trip.

Run with ``python benchmarks/bench_middleware.py`` (``--quick`` for a short run).

One round trip, on a fresh thread each time: ``create_agent`` with a scripted
fake chat model emits one gated tool call -> the call pauses on an interrupt ->
the presenter approves it -> the tool runs -> the model gives its final answer.

- ``hitl``: ``HumanInTheLoopMiddleware({"send_email": True}, interrupt_mode="per_call")``,
  answered with ``Command(resume={interrupt_id: {"type": "approve"}})``.
- ``aais``: ``ApprovalMiddleware({"send_email": True})``, answered with an
  ``approval.decided`` built from the interrupt value and ``resume_with_decisions``
  (run lease, ledger write, digest checks, time-of-use check).

Same model, tools and checkpointer for both; the batches are interleaved (hitl,
aais, hitl, ...) so noise hits both sides; the table shows the median batch and
the best batch (the least disturbed by other load on the machine).
Setups: InMemorySaver + InMemoryLedger; SqliteSaver + SqliteLedger (files, WAL,
ledger ``synchronous=FULL``); SqliteSaver + InMemoryLedger (isolates the
ledger's fsync cost). Aim: ratio <= 1.0x.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import count
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from aais_langgraph import (
    ApprovalAuthority,
    InMemoryLedger,
    SqliteLedger,
    build_decision,
    resume_with_decisions,
)
from aais_langgraph.tools import ApprovalMiddleware

ACTOR = {"id": "alice", "type": "human"}
EMAIL = {"name": "send_email", "args": {"to": "bob@example.com"}, "id": "call-1"}


class ScriptedChatModel(FakeMessagesListChatModel):
    """Turn n of a conversation gets responses[n]; bind_tools returns the model."""

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        turn = sum(isinstance(m, AIMessage) for m in messages)
        message = self.responses[min(turn, len(self.responses) - 1)]
        return ChatResult(generations=[ChatGeneration(message=message)])

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:
        return self


@tool
def send_email(to: str) -> str:
    """Send an email."""
    return f"sent to {to}"


def model() -> ScriptedChatModel:
    return ScriptedChatModel(
        responses=[
            AIMessage(content="", id="ai-0", tool_calls=[EMAIL]),
            AIMessage(content="Done.", id="ai-1"),
        ]
    )


def build(middleware: Any, checkpointer: Any) -> Any:
    return create_agent(
        model(), tools=[send_email], middleware=[middleware], checkpointer=checkpointer
    )


Trip = Callable[[str], None]


def hitl_trip(checkpointer: Any) -> Trip:
    agent = build(
        HumanInTheLoopMiddleware({"send_email": True}, interrupt_mode="per_call"), checkpointer
    )

    def trip(thread_id: str) -> None:
        config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
        result = agent.invoke({"messages": [("user", "email bob")]}, config)
        [paused] = result["__interrupt__"]
        done = agent.invoke(Command(resume={paused.id: {"type": "approve"}}), config)
        assert done["messages"][-1].content == "Done.", "hitl round trip did not finish"

    return trip


def aais_trip(checkpointer: Any, authority: ApprovalAuthority) -> Trip:
    agent = build(ApprovalMiddleware({"send_email": True}, authority=authority), checkpointer)

    def trip(thread_id: str) -> None:
        config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
        result = agent.invoke({"messages": [("user", "email bob")]}, config)
        [paused] = result["__interrupt__"]
        decided = build_decision(paused.value, decision="approve", actor=ACTOR)
        [resolved] = resume_with_decisions(agent, config, decided, actor=ACTOR, authority=authority)
        assert resolved.approved, "aais round trip was not approved"

    return trip


@contextmanager
def setups(directory: Path) -> Iterator[list[tuple[str, Any, ApprovalAuthority]]]:
    """(name, checkpointer, authority) per setup; files live in ``directory``."""
    checkpoints = sqlite3.connect(directory / "checkpoints.db", check_same_thread=False)
    mixed = sqlite3.connect(directory / "mixed.db", check_same_thread=False)
    ledger = SqliteLedger(directory / "ledger.db")
    ledger.setup()
    try:
        yield [
            ("memory saver + memory ledger", InMemorySaver(), ApprovalAuthority(InMemoryLedger())),
            ("sqlite saver + sqlite ledger", SqliteSaver(checkpoints), ApprovalAuthority(ledger)),
            ("sqlite saver + memory ledger", SqliteSaver(mixed), ApprovalAuthority()),
        ]
    finally:
        ledger.close()
        checkpoints.close()
        mixed.close()


def interleaved(trips: dict[str, Trip], batches: int, per_batch: int) -> dict[str, list[float]]:
    """Seconds per round trip of each batch, per contender, batches interleaved."""
    threads = count()
    samples: dict[str, list[float]] = {name: [] for name in trips}
    for name, trip in trips.items():  # warm up: imports, schema builds, first writes
        trip(f"warm-{name}-{next(threads)}")
    for _ in range(batches):
        for name, trip in trips.items():
            start = time.perf_counter()
            for _ in range(per_batch):
                trip(f"{name}-{next(threads)}")
            samples[name].append((time.perf_counter() - start) / per_batch)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=25)
    parser.add_argument("--per-batch", type=int, default=8)
    parser.add_argument("--quick", action="store_true", help="3 batches of 5")
    options = parser.parse_args()
    batches, per_batch = (3, 5) if options.quick else (options.batches, options.per_batch)

    header = (
        f"{'setup':<32}{'hitl ms':>10}{'aais ms':>10}{'aais/hitl':>11}"
        f"{'best hitl':>11}{'best aais':>11}{'ratio':>8}"
    )
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory() as directory, setups(Path(directory)) as cases:
        for name, checkpointer, authority in cases:
            samples = interleaved(
                {"hitl": hitl_trip(checkpointer), "aais": aais_trip(checkpointer, authority)},
                batches,
                per_batch,
            )
            hitl, aais = (statistics.median(samples[k]) for k in ("hitl", "aais"))
            best_hitl, best_aais = (min(samples[k]) for k in ("hitl", "aais"))
            print(
                f"{name:<32}{hitl * 1e3:>10.2f}{aais * 1e3:>10.2f}{aais / hitl:>10.2f}x"
                f"{best_hitl * 1e3:>11.2f}{best_aais * 1e3:>11.2f}{best_aais / best_hitl:>7.2f}x"
            )
    print(
        f"\nms per round trip: median and best of {batches} interleaved batches "
        f"of {per_batch} round trips each"
    )


if __name__ == "__main__":
    main()

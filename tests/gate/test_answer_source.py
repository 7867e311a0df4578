"""The run's answer source: whose raw ``approval.decided`` a gate records, and when it refuses.

- in process (no server keys in ``configurable``): the body's actor, as documented;
- LangGraph Server (its reserved ``langgraph_auth_user`` key): the authenticated
  user, whatever the body names; no user -> refused unless the deployment opts in;
- served by aais-agui (``aais_recorded_answers_only``): only recorded resolutions.

Refusals keep the interrupt pending and record nothing. The server keys are
passed the way LangGraph Server passes them (in ``configurable``); the real
server is exercised in tests/distributed/test_langgraph_server.py.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import pytest
from langgraph.errors import is_invalid_resume
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command

from aais_langgraph import ApprovalAuthority, RejectedResumeError, arequest_approval, build_decision
from aais_langgraph.authority import AskEveryTime
from aais_langgraph.gate.answer_sources import (
    ALLOW_UNAUTHENTICATED_VAR,
    RECORDED_ONLY_KEY,
    actor_from_langgraph_user,
)
from aais_langgraph.protocol import Decision, Request

from .support import (
    HUMAN,
    Backend,
    Effects,
    State,
    gated_graph,
    paused,
    requested_of,
    shell_action,
)

MALLORY = {"id": "mallory", "type": "human"}


@dataclass(frozen=True)
class ServerUser:
    """What LangGraph Server hands a graph: ``identity``, ``display_name``, ``is_authenticated``."""

    identity: str
    display_name: str = ""
    is_authenticated: bool = True


def on_server(thread_id: str, user: Any, **extra: Any) -> Any:
    """A run config as LangGraph Server builds it (reserved keys set by the server)."""
    return {
        "configurable": {
            "thread_id": thread_id,
            "langgraph_auth_user": user,
            "langgraph_auth_user_id": getattr(user, "identity", "") if user else "",
            "langgraph_request_id": "req-1",
            **extra,
        }
    }


def start(graph: Any, cfg: Any, command: str = "ls -la") -> Any:
    [pending] = paused(graph.invoke({"command": command}, cfg))
    return pending


def recorded_actor(authority: ApprovalAuthority, pending: Any) -> dict[str, Any]:
    request_id = requested_of(pending).request.id
    [decided] = [
        e
        for e in authority.ledger.events_after(0, limit=10_000)
        if e["type"] == "approval.decided" and e["decision"]["request_id"] == request_id
    ]
    return dict(decided["decision"]["actor"])


def assert_refused_and_pending(
    graph: Any, cfg: Any, pending: Any, answer: Any, authority: ApprovalAuthority, effects: Effects
) -> RejectedResumeError:
    with pytest.raises(RejectedResumeError) as caught:
        graph.invoke(Command(resume={pending.id: answer}), cfg)
    assert is_invalid_resume(caught.value)
    assert [i.id for i in graph.get_state(cfg).interrupts] == [pending.id]
    assert authority.get_resolution(requested_of(pending).request.id) is None
    assert effects.ran == []
    return caught.value


# -- in process ---------------------------------------------------------------------------


def test_in_process_the_body_actor_is_recorded(backend: Backend, effects: Effects) -> None:
    graph = gated_graph(backend, effects)
    cfg = {"configurable": {"thread_id": "t-local"}}
    pending = start(graph, cfg)
    decided = build_decision(requested_of(pending), decision="approve", actor=HUMAN)
    graph.invoke(Command(resume={pending.id: decided.to_json()}), cfg)
    assert effects.ran == ["ls -la"]
    assert recorded_actor(backend.authority, pending)["id"] == "user_alex"


# -- LangGraph Server ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "user",
    [ServerUser("alice", "Alice"), {"identity": "alice", "display_name": "Alice"}],
    ids=["object", "mapping"],
)
def test_on_the_server_the_authenticated_user_is_the_actor(
    backend: Backend, effects: Effects, user: Any
) -> None:
    graph = gated_graph(backend, effects)
    cfg = on_server("t-server", user)
    pending = start(graph, cfg)
    decided = build_decision(requested_of(pending), decision="approve", actor=MALLORY)
    graph.invoke(Command(resume={pending.id: decided.to_json()}), cfg)
    assert effects.ran == ["ls -la"]
    assert recorded_actor(backend.authority, pending) == {
        "id": "alice",
        "type": "human",
        "display_name": "Alice",
        "authenticated_by": "langgraph-server auth",
    }


class OnlyAliceApproves(AskEveryTime):
    def on_decision(self, request: Request, decision: Decision) -> str | None:
        return None if decision.actor.id == "alice" else "Only alice may approve."


def test_a_body_naming_alice_does_not_pass_alices_policy(
    backend: Backend, effects: Effects
) -> None:
    backend.authority.policy = OnlyAliceApproves()
    graph = gated_graph(backend, effects)
    cfg = on_server("t-impersonate", ServerUser("mallory"))
    pending = start(graph, cfg)
    alice = {"id": "alice", "type": "human"}
    decided = build_decision(requested_of(pending), decision="approve", actor=alice)
    error = assert_refused_and_pending(
        graph, cfg, pending, decided.to_json(), backend.authority, effects
    )
    assert "Only alice may approve" in str(error)

    as_alice = on_server("t-impersonate", ServerUser("alice"))
    graph.invoke(Command(resume={pending.id: decided.to_json()}), as_alice)
    assert effects.ran == ["ls -la"]


@pytest.mark.parametrize(
    "user", [None, ServerUser("", is_authenticated=True), ServerUser("x", is_authenticated=False)]
)
def test_an_unauthenticated_server_refuses_raw_decisions(
    backend: Backend, effects: Effects, user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ALLOW_UNAUTHENTICATED_VAR, raising=False)
    graph = gated_graph(backend, effects)
    cfg = on_server("t-anonymous", user)
    pending = start(graph, cfg)
    decided = build_decision(requested_of(pending), decision="approve", actor=HUMAN)
    error = assert_refused_and_pending(
        graph, cfg, pending, decided.to_json(), backend.authority, effects
    )
    assert ALLOW_UNAUTHENTICATED_VAR in str(error)


def test_a_notice_of_a_recorded_resolution_needs_no_actor(
    backend: Backend, effects: Effects, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ALLOW_UNAUTHENTICATED_VAR, raising=False)
    graph = gated_graph(backend, effects)
    cfg = on_server("t-notice", None)
    pending = start(graph, cfg)
    decided = build_decision(requested_of(pending), decision="approve", actor=HUMAN)
    notice = backend.authority.decide(decided, actor={"id": "alice", "type": "human"})
    graph.invoke(Command(resume={pending.id: notice.to_json()}), cfg)
    assert effects.ran == ["ls -la"]


def test_local_development_may_opt_in_loudly(
    backend: Backend,
    effects: Effects,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv(ALLOW_UNAUTHENTICATED_VAR, "1")
    graph = gated_graph(backend, effects)
    cfg = on_server("t-dev", None)
    pending = start(graph, cfg)
    decided = build_decision(requested_of(pending), decision="approve", actor=HUMAN)
    with caplog.at_level(logging.WARNING, logger="aais_langgraph.gate.answer_sources"):
        graph.invoke(Command(resume={pending.id: decided.to_json()}), cfg)
    assert effects.ran == ["ls -la"]
    assert recorded_actor(backend.authority, pending)["id"] == "user_alex"
    assert any(ALLOW_UNAUTHENTICATED_VAR in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("value", ["0", "yes", "true", ""])
def test_only_exactly_1_opts_in(
    backend: Backend, effects: Effects, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(ALLOW_UNAUTHENTICATED_VAR, value)
    graph = gated_graph(backend, effects)
    cfg = on_server("t-not-opted", None)
    pending = start(graph, cfg)
    decided = build_decision(requested_of(pending), decision="approve", actor=HUMAN)
    assert_refused_and_pending(graph, cfg, pending, decided.to_json(), backend.authority, effects)


def test_identities_that_are_not_aais_ids_get_one_digest_id_each() -> None:
    email = actor_from_langgraph_user(ServerUser("alice@example.com"))
    other = actor_from_langgraph_user(ServerUser("alice_example.com"))
    assert email is not None and other is not None
    assert email.id.startswith("sha256:") and email.display_name == "alice@example.com"
    assert other.id == "alice_example.com"
    assert actor_from_langgraph_user(ServerUser("alice@example.com")) == email
    bot = actor_from_langgraph_user({"identity": "ci-bot", "aais_actor_type": "policy"})
    assert bot is not None and bot.type == "policy"


# -- served by aais-agui ------------------------------------------------------------------


def test_a_served_graph_accepts_only_recorded_resolutions(
    backend: Backend, effects: Effects
) -> None:
    graph = gated_graph(backend, effects)
    cfg = {"configurable": {"thread_id": "t-served", RECORDED_ONLY_KEY: True}}
    pending = start(graph, cfg)
    decided = build_decision(requested_of(pending), decision="approve", actor=HUMAN)
    assert_refused_and_pending(graph, cfg, pending, decided.to_json(), backend.authority, effects)
    # Even with a LangGraph Server user present, the served mode wins.
    both = {
        "configurable": {
            **on_server("t-served", ServerUser("alice"))["configurable"],
            RECORDED_ONLY_KEY: True,
        }
    }
    assert_refused_and_pending(graph, both, pending, decided.to_json(), backend.authority, effects)

    notice = backend.authority.decide(decided, actor={"id": "alice", "type": "human"})
    graph.invoke(Command(resume={pending.id: notice.to_json()}), cfg)
    assert effects.ran == ["ls -la"]


# -- the async gate -----------------------------------------------------------------------


def async_graph(backend: Backend, effects: Effects) -> Any:
    async def act(state: State) -> dict[str, Any]:
        resolved = await arequest_approval(
            shell_action(state["command"]), authority=backend.authority
        )
        if resolved.approved:
            effects.run(state["command"])
        return {"outcome": resolved.resolution.outcome}

    builder = StateGraph(State)
    builder.add_node("act", act)
    builder.add_edge(START, "act")
    builder.add_edge("act", END)
    return builder.compile(checkpointer=backend.saver)


async def test_the_async_gate_records_the_server_user(
    memory_backend: Backend, effects: Effects
) -> None:
    graph = async_graph(memory_backend, effects)
    cfg = on_server("t-async", ServerUser("alice"))
    [pending] = paused(await graph.ainvoke({"command": "ls"}, cfg))
    decided = build_decision(requested_of(pending), decision="approve", actor=MALLORY)
    await graph.ainvoke(Command(resume={pending.id: decided.to_json()}), cfg)
    assert effects.ran == ["ls"]
    assert recorded_actor(memory_backend.authority, pending)["id"] == "alice"


async def test_the_async_gate_refuses_raw_decisions_when_served(
    memory_backend: Backend, effects: Effects
) -> None:
    graph = async_graph(memory_backend, effects)
    cfg = {"configurable": {"thread_id": "t-async-served", RECORDED_ONLY_KEY: True}}
    [pending] = paused(await graph.ainvoke({"command": "ls"}, cfg))
    decided = build_decision(requested_of(pending), decision="approve", actor=HUMAN)
    with pytest.raises(RejectedResumeError):
        await graph.ainvoke(Command(resume={pending.id: decided.to_json()}), cfg)
    assert [i.id for i in (await graph.aget_state(cfg)).interrupts] == [pending.id]
    assert memory_backend.authority.get_resolution(requested_of(pending).request.id) is None
    assert effects.ran == []


# -- configurable keys a LangGraph Server client could set --------------------------------


def test_a_server_client_cannot_shorten_the_execution_claim() -> None:
    from aais_langgraph.gate.run_context import CLAIM_TTL_KEY, claim_ttl

    # A claim that expired at once would let two concurrent resumes both run the action.
    hosted = on_server("t-ttl", ServerUser("mallory"), **{CLAIM_TTL_KEY: 0.001})
    assert claim_ttl(hosted) == 60.0
    assert claim_ttl({"configurable": {CLAIM_TTL_KEY: 5.0}}) == 5.0  # set by trusted code

"""The one answer planner: one decision for one request, and one read of the request per answer.

Every binding that answers one request (the HTTP decisions route, the WebSocket
binding, the CLI, the stdio presenter) records through
:meth:`AnswerPlanner.record_decision`; the thread paths parse, authorize and record
with the stored row read once and carried.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from aais_langgraph import ApprovalAuthority, ThreadDriver
from aais_langgraph.authority import (
    ForbiddenError,
    Permission,
    Principal,
    Resource,
    UnknownRequestError,
    Verb,
)
from aais_langgraph.ledger import LedgerIntegrityError
from aais_langgraph.protocol import RESOLVED_BY_EXTENSION, Actor, ApprovalRequested
from aais_langgraph.threads import AnswerPlanner, Cancellation, OpenAnswer, ParsedAnswer
from gate.support import HUMAN, Backend, Effects, config, decide, gated_graph, paused

THREAD = "t-planner"
ALEX = Principal(Actor.from_data(HUMAN))
MALLORY = Principal(Actor(id="mallory", type="human"))


class OnlyAlex:
    """Lets the named human decide, refuses everyone else."""

    def authorize(self, principal: Principal, verb: Verb, resource: Resource) -> Permission:
        return Permission(principal.id == ALEX.id, "only the on-call human decides")


@pytest.fixture
def reads(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The request ids the ledger was asked for, in order (the real backend answers)."""
    ledger = backend.authority.ledger
    asked: list[str] = []
    read = ledger.get_request

    def counted(request_id: str) -> Any:
        asked.append(request_id)
        return read(request_id)

    monkeypatch.setattr(ledger, "get_request", counted)
    yield asked


def paused_request(backend: Backend, effects: Effects) -> tuple[Any, ApprovalRequested]:
    graph = gated_graph(backend, effects)
    [pending] = paused(graph.invoke({"command": "ls -la"}, config(THREAD)))
    return graph, ApprovalRequested.from_data(pending.value)


def test_one_decision_is_recorded_as_the_bound_actor_reading_its_request_once(
    backend: Backend, effects: Effects, reads: list[str]
) -> None:
    _, requested = paused_request(backend, effects)
    decided = decide(requested)  # the body names Alex; the channel is bound to Mallory
    reads.clear()

    resolved = AnswerPlanner(backend.authority).record_decision(decided, MALLORY)

    assert resolved.approved
    assert reads == [requested.request.id]
    assert backend.authority.decided_by(resolved) == "mallory"
    assert effects.ran == []  # recording is not running: the thread's resume work does that


def test_the_async_twin_records_the_same(backend: Backend, effects: Effects) -> None:
    _, requested = paused_request(backend, effects)
    planner = AnswerPlanner(backend.authority)

    resolved = asyncio.run(planner.arecord_decision(decide(requested, "deny"), ALEX))

    assert resolved.resolution.outcome == "denied"
    assert backend.authority.get_resolution(requested.request.id) == resolved


def test_a_forbidden_decision_records_nothing_and_keeps_the_request_pending(
    backend: Backend, effects: Effects
) -> None:
    _, requested = paused_request(backend, effects)
    backend.authority.authorizer = OnlyAlex()
    planner = AnswerPlanner(backend.authority)

    with pytest.raises(ForbiddenError) as refused:
        planner.record_decision(decide(requested), MALLORY)

    assert "ls -la" not in str(refused.value)
    assert backend.authority.get_resolution(requested.request.id) is None
    assert planner.record_decision(decide(requested), ALEX).approved


def test_an_unknown_request_is_named_by_its_field(backend: Backend, effects: Effects) -> None:
    _, requested = paused_request(backend, effects)
    decided = decide(requested)
    unknown = decided.model_copy(
        update={"decision": decided.decision.model_copy(update={"request_id": "req_unknown"})}
    )

    with pytest.raises(UnknownRequestError) as refused:
        AnswerPlanner(backend.authority).record_decision(unknown, ALEX)

    assert refused.value.pointer == "/decision/request_id"
    assert backend.authority.get_resolution(requested.request.id) is None


def test_a_thread_answer_reads_its_request_once_from_parse_to_record(
    backend: Backend, effects: Effects, reads: list[str]
) -> None:
    graph, requested = paused_request(backend, effects)
    driver = ThreadDriver(graph, backend.authority)
    planner = driver.planner
    view = driver.view(THREAD)
    reads.clear()

    answers = planner.parse(THREAD, decide(requested))
    results, resume = planner.record(answers, view, ALEX)

    assert [item.stored.request_id for item in answers] == [requested.request.id]
    assert [resolved.approved for resolved in results] == [True]
    assert list(resume) == [view.interrupts[requested.request.id]]
    assert reads == [requested.request.id]


def test_an_all_or_nothing_answer_reads_its_request_once(
    backend: Backend, effects: Effects, reads: list[str]
) -> None:
    graph, requested = paused_request(backend, effects)
    interrupt_id = (
        ThreadDriver(graph, backend.authority).view(THREAD).interrupts[requested.request.id]
    )
    reads.clear()

    resume = AnswerPlanner(backend.authority).record_all(
        [OpenAnswer(interrupt_id, requested.request, decide(requested))], ALEX
    )

    assert resume[interrupt_id]["resolution"]["outcome"] == "approved"
    assert reads == [requested.request.id]


def test_a_carried_row_of_another_request_is_refused_before_anything_is_recorded(
    backend: Backend, effects: Effects
) -> None:
    _, requested = paused_request(backend, effects)
    authority = backend.authority
    stored = authority.get_stored_request(requested.request.id)
    assert stored is not None
    other = replace(stored, request_id="req_other")

    with pytest.raises(ValueError, match=r"^stored: "):
        AnswerPlanner(authority).record_decision(decide(requested), ALEX, stored=other)
    with pytest.raises(ValueError, match=r"^stored: "):
        authority.require(ALEX, "decide", requested.request.id, stored=other)

    assert authority.get_resolution(requested.request.id) is None


def test_a_carried_row_is_vouched_for_like_a_read_one(backend: Backend, effects: Effects) -> None:
    """A row the ledger's audit entry does not vouch for is refused, carried or read."""
    _, requested = paused_request(backend, effects)
    stored = backend.authority.get_stored_request(requested.request.id)
    assert stored is not None
    envelope = {**stored.envelope, "request": {**stored.envelope["request"], "summary": "forged"}}
    forged = replace(stored, envelope=envelope)
    fresh = ApprovalAuthority(backend.authority.ledger, clock=backend.clock)

    with pytest.raises(LedgerIntegrityError):
        AnswerPlanner(fresh).record_decision(decide(requested), ALEX, stored=forged)

    assert fresh.get_resolution(requested.request.id) is None


def test_parsed_answers_carry_the_row_they_were_checked_against(
    backend: Backend, effects: Effects
) -> None:
    graph, requested = paused_request(backend, effects)
    [parsed] = ThreadDriver(graph, backend.authority).planner.parse(THREAD, decide(requested))

    assert isinstance(parsed, ParsedAnswer)
    assert parsed.stored == backend.authority.get_stored_request(requested.request.id)
    with pytest.raises(ValueError):
        ThreadDriver(graph, backend.authority).planner.parse("another-thread", decide(requested))


def test_one_cancel_is_recorded_as_the_bound_actor_reading_its_request_once(
    backend: Backend, effects: Effects, reads: list[str]
) -> None:
    _, requested = paused_request(backend, effects)
    reads.clear()

    resolved = AnswerPlanner(backend.authority).record_cancel(
        Cancellation(requested.request.id, "not now"), MALLORY
    )

    assert resolved.resolution.outcome == "cancelled"
    assert resolved.resolution.message == "not now"
    assert (resolved.resolution.extensions or {})[RESOLVED_BY_EXTENSION]["id"] == "mallory"
    assert reads == [requested.request.id]


def test_a_forbidden_cancel_records_nothing(backend: Backend, effects: Effects) -> None:
    _, requested = paused_request(backend, effects)
    backend.authority.authorizer = OnlyAlex()
    planner = AnswerPlanner(backend.authority)

    with pytest.raises(ForbiddenError):
        asyncio.run(planner.arecord_cancel(Cancellation(requested.request.id), MALLORY))
    with pytest.raises(UnknownRequestError) as unknown:
        planner.record_cancel(Cancellation("req_unknown"), ALEX)

    assert unknown.value.pointer == "/request_id"
    assert backend.authority.get_resolution(requested.request.id) is None

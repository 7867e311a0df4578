"""Settling an unknown outcome in process asks the authorizer about whoever settles it.

An actor given to :func:`reconcile_execution` (an AAIS actor, its data or a principal)
is an authenticated caller, whatever its ``type``: a ``policy`` actor (a service, a
bot) is asked about like a person. Only a bare id is a trusted caller.
"""

from __future__ import annotations

from typing import Any

import pytest

from aais_langgraph import ApprovalAuthority
from aais_langgraph.authority import ForbiddenError, Permission, Principal
from aais_langgraph.authority.authorization import Resource, Verb
from aais_langgraph.gate import reconcile_execution, unknown_executions
from aais_langgraph.ledger import InMemoryLedger
from aais_langgraph.protocol import Actor
from hostile.report import refused

from .test_at_most_once import approve_and_crash, gated_graph


class OnlyDeciders:
    """Lets anyone decide; lets only the ``oncall`` group reconcile; keeps every question."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str, str]] = []

    def authorize(self, principal: Principal, verb: Verb, resource: Resource) -> Permission:
        self.asked.append((principal.id, principal.actor.type, verb))
        if verb != "reconcile" or "oncall" in principal.groups:
            return Permission(True, "allowed")
        return Permission(False, "only oncall reconciles")


ACTORS: dict[str, Any] = {
    "policy actor": Actor(id="cleanup-bot", type="policy"),
    "policy actor data": {"id": "cleanup-bot", "type": "policy"},
    "policy principal": Principal(Actor(id="cleanup-bot", type="policy")),
    "human actor": Actor(id="mallory", type="human"),
    "human actor data": {"id": "mallory", "type": "human"},
}


def unknown_outcome(thread_id: str) -> tuple[ApprovalAuthority, OnlyDeciders, str]:
    authorizer = OnlyDeciders()
    authority = ApprovalAuthority(InMemoryLedger(), authorizer=authorizer)
    graph = gated_graph(authority, [])
    requested = approve_and_crash(graph, authority, {"configurable": {"thread_id": thread_id}})
    return authority, authorizer, requested.request.id


@pytest.mark.parametrize("who", sorted(ACTORS))
def test_every_actor_type_is_asked_and_refused_leaves_the_outcome_unknown(who: str) -> None:
    authority, authorizer, request_id = unknown_outcome(f"t-{who.replace(' ', '-')}")
    tip = authority.ledger.audit_tip()
    settled = lambda: not unknown_executions(authority)  # noqa: E731

    with refused("library", ForbiddenError, opened=settled):
        reconcile_execution(authority, request_id, "done", actor=ACTORS[who])

    assert authorizer.asked[-1][2] == "reconcile"
    assert authority.ledger.audit_tip() == tip
    assert [item.request_id for item in unknown_executions(authority)] == [request_id]


def test_a_policy_actor_the_authorizer_allows_settles_it() -> None:
    authority, authorizer, request_id = unknown_outcome("t-allowed-bot")
    bot = Principal(Actor(id="oncall-bot", type="policy"), groups=frozenset({"oncall"}))

    settled = reconcile_execution(authority, request_id, "done", actor=bot)

    assert settled is not None and settled.state == "done"
    assert ("oncall-bot", "policy", "reconcile") in authorizer.asked
    assert unknown_executions(authority) == []

"""Cedar, separation of duties and quorum end to end through the served AG-UI agent.

Each rule is met only by the right people: a refused resume is ``RUN_ERROR``
``aais.forbidden``, the card is offered again, nothing is recorded or run; the
action runs once, after the rule is met.
"""

from __future__ import annotations

from typing import Any

import pytest
from ag_ui.core import EventType

from aais_agui.agent import AAISLangGraphAgent
from aais_langgraph import ApprovalAuthority
from aais_langgraph.authority import AccessPolicy, Principal
from aais_langgraph.authority.cedar import CedarAuthorizer
from aais_langgraph.protocol import Actor
from aais_langgraph.protocol.extensions import QUORUM_EXTENSION, REQUESTER_EXTENSION
from hostile.report import record

from .demo_graph import EffectLog
from .test_agent import answer, interrupts_of, paused, request_id, run, terminal


def person(name: str, *groups: str) -> Principal:
    return Principal(Actor(id=name, type="human"), frozenset(groups))


ALICE = person("alice", "sre")
BOB = person("bob", "dev")
CAROL = person("carol", "sre")
DAVE = person("dave", "sre")

CEDAR = """
permit (principal in Group::"sre", action == Action::"decide", resource)
when { resource.kind == "fs.delete" };
permit (principal, action == Action::"view", resource)
when { context.own };
permit (principal in Group::"sre", action == Action::"view", resource);
forbid (principal, action == Action::"decide", resource)
when { context.own && context.decision == "approve" };
permit (principal is User, action == Action::"start", resource);
permit (principal is User, action in [Action::"post", Action::"view"], resource is Thread)
when { context.own };
"""


async def refused(
    agent: AAISLangGraphAgent,
    thread_id: str,
    interrupt: Any,
    who: Principal,
    effects: EffectLog,
    *,
    sees_it: bool = True,
) -> None:
    """``who`` answers approve: forbidden, nothing recorded, nothing run; offered again to
    someone who may see the card (one who may not see the thread gets no byte of it)."""
    authority = agent.authority
    before = authority.ledger.audit_tip()
    events = await run(agent, thread_id, resume=[answer(interrupt)], actor=who)
    error = terminal(events)
    again = [e for e in events if e.type == EventType.RUN_FINISHED]
    offered = list(again[-1].outcome.interrupts) if again and again[-1].outcome else []
    leaked = authority.get_resolution(request_id(interrupt)) is not None or effects.list() != []
    record("served authorization", 1, failed_open=int(leaked))
    assert error.type == EventType.RUN_ERROR and error.code == "aais.forbidden", error
    assert [item.id for item in offered] == ([interrupt.id] if sees_it else [])
    assert authority.ledger.audit_tip() == before and not leaked


async def test_cedar_decides_who_approves_and_the_action_runs_once(
    make_agent: Any, authority: ApprovalAuthority, effects: EffectLog
) -> None:
    authority.authorizer = CedarAuthorizer(CEDAR)
    thread_id, [interrupt] = await paused(make_agent(), "delete /srv/cedar.txt")

    # bob is not in sre: he may neither decide nor see the thread
    await refused(make_agent(), thread_id, interrupt, BOB, effects, sees_it=False)
    policy = {"default_approvers": ["sre"], "approvers": [{"kinds": ["x"], "groups": ["dev"]}]}
    authority.authorizer = AccessPolicy.from_mapping({**policy, "viewer_groups": ["dev"]})
    await refused(make_agent(), thread_id, interrupt, BOB, effects)  # sees it, may not decide
    authority.authorizer = CedarAuthorizer(CEDAR)
    events = await run(make_agent(), thread_id, resume=[answer(interrupt)], actor=CAROL)

    assert terminal(events).type == EventType.RUN_FINISHED
    assert [kind for _, kind, _ in effects.list()] == ["delete_file"]


async def test_separation_of_duties_the_requester_may_not_approve(
    make_agent: Any, authority: ApprovalAuthority, effects: EffectLog
) -> None:
    policy = {"default_approvers": ["sre"], "separation_of_duties": {"from_risk": "low"}}
    authority.authorizer = AccessPolicy.from_mapping(policy)
    agent = make_agent().with_actor(ALICE)
    thread_id, [interrupt] = await paused(agent, "delete /srv/mine.txt")
    requested = interrupt.metadata["aais"]["request"]
    assert requested["extensions"][REQUESTER_EXTENSION] == {"id": "alice"}

    await refused(make_agent(), thread_id, interrupt, ALICE, effects)
    events = await run(make_agent(), thread_id, resume=[answer(interrupt)], actor=CAROL)

    assert terminal(events).type == EventType.RUN_FINISHED
    assert len(effects.list()) == 1


async def test_a_quorum_of_two_distinct_approvers_over_ag_ui(
    make_agent: Any, authority: ApprovalAuthority, effects: EffectLog
) -> None:
    rule = {"kinds": ["fs.delete"], "groups": ["sre"], "quorum": 2}
    authority.authorizer = AccessPolicy.from_mapping({"approvers": [rule]})
    thread_id, [first] = await paused(make_agent().with_actor(BOB), "delete /srv/two.txt")
    assert first.metadata["aais"]["request"]["extensions"][QUORUM_EXTENSION]["of"] == 2

    [second] = interrupts_of(
        await run(make_agent(), thread_id, resume=[answer(first)], actor=CAROL)
    )
    place = second.metadata["aais"]["request"]["extensions"][QUORUM_EXTENSION]
    assert (place["index"], place["approved_by"]) == (2, ["carol"])
    assert effects.list() == []  # one approval of two

    await refused(make_agent(), thread_id, second, CAROL, effects)  # she approved already
    events = await run(make_agent(), thread_id, resume=[answer(second)], actor=DAVE)

    assert terminal(events).type == EventType.RUN_FINISHED
    assert len(effects.list()) == 1


@pytest.mark.parametrize("who", [BOB, DAVE], ids=["stranger", "approver"])
async def test_another_users_thread_is_not_served_to_a_user_who_may_not_see_it(
    make_agent: Any, authority: ApprovalAuthority, who: Principal
) -> None:
    policy = {"default_approvers": ["sre"], "requesters": {"view_own": True}}
    authority.authorizer = AccessPolicy.from_mapping(policy)
    thread_id, _ = await paused(make_agent().with_actor(ALICE), "delete /srv/private.txt")

    events = await run(make_agent(), thread_id, actor=who)

    finished = terminal(events)
    if who is DAVE:  # an approver of its request may follow the thread
        assert finished.type == EventType.RUN_FINISHED
    else:
        assert finished.type == EventType.RUN_ERROR and finished.code == "aais.forbidden"
        text = "".join(event.model_dump_json() for event in events)
        assert "private.txt" not in text  # no byte of her thread
    record("served authorization", 1, failed_open=int(who is BOB and finished.type != "RUN_ERROR"))

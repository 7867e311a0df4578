"""Property: over generated policies and mixed threads, no viewer gets a byte of a request
they may not view, and a refused post to a thread changes nothing.

Each example writes a team policy (approver rules, viewers, requesters' rights and the
thread rules), starts a thread for one person, raises requests on it for several
requesters (each with an argument value of its own and a tool call), then shows the
thread to every generated person the way a run, a reconnect and a thread read do:
the interrupt outcome, a messages snapshot with the tool calls and their results, the
state and RAW events. The expectation is worked out apart from the code under test
(each request asked about with ``may_view``, each post with the policy's own rules).
"""

from __future__ import annotations

import json
from typing import Any

from ag_ui.core import (
    AssistantMessage,
    EventType,
    FunctionCall,
    MessagesSnapshotEvent,
    RawEvent,
    RunFinishedEvent,
    StateSnapshotEvent,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from ag_ui.core.events import RunFinishedInterruptOutcome
from hypothesis import given, settings
from hypothesis import strategies as st

from aais_agui.mapping import request_to_interrupt
from aais_agui.thread_views import ThreadEventFilter, visible_messages
from aais_langgraph.authority import AccessPolicy, ApprovalAuthority, ForbiddenError, Principal
from aais_langgraph.authority.limits import RequestLimits
from aais_langgraph.ledger import InMemoryLedger
from authority.support import START, FakeClock
from authority.test_access_policy import GROUPS, IDS, KINDS, RISKS, policies, principals, subset
from hostile.report import record

CATEGORY = "threads"


@st.composite
def thread_policies(draw: st.DrawFn) -> dict[str, Any]:
    document: dict[str, Any] = draw(policies())
    threads: dict[str, Any] = {}
    if draw(st.booleans()):
        threads["start_groups"] = draw(subset([*GROUPS, "*"]))
    if draw(st.booleans()):
        threads["post_groups"] = draw(subset(GROUPS))
    if draw(st.booleans()):
        threads["view_groups"] = draw(subset(GROUPS))
    if threads:
        document["threads"] = threads
    return document


def may_post(policy: AccessPolicy, principal: Principal, owner: str) -> bool:
    """The policy's post rule, read from the document apart from the code under test."""
    return (
        principal.administrator
        or principal.id in policy.administrators
        or not policy.administrator_groups.isdisjoint(principal.groups)
        or principal.id == owner
        or not policy.thread_post_groups.isdisjoint(principal.groups)
    )


@settings(max_examples=60, deadline=None)
@given(
    document=thread_policies(),
    owner=st.sampled_from(IDS),
    people=st.lists(principals, min_size=1, max_size=4),
    raised=st.lists(
        st.tuples(st.sampled_from(KINDS), st.sampled_from(RISKS), st.sampled_from(IDS)),
        min_size=1,
        max_size=4,
    ),
)
def test_property_no_viewer_gets_a_byte_of_a_request_they_may_not_view(
    document: dict[str, Any],
    owner: str,
    people: list[Principal],
    raised: list[tuple[str, str, str]],
) -> None:
    policy = AccessPolicy.from_mapping(document)
    authority = ApprovalAuthority(
        InMemoryLedger(),
        clock=FakeClock(START),
        authorizer=policy,
        limits=RequestLimits.unbounded(),
    )
    thread_id = "t-mixed"
    authority.ledger.post_to_thread(thread_id, owner, now=1.0, start=True)
    secrets: dict[str, str] = {}
    calls: dict[str, str] = {}
    interrupts = []
    for index, (kind, risk, requester) in enumerate(raised):
        secret = f"secret-value-{index}-{kind}"
        requested = authority.request(
            {
                "kind": kind,
                "name": f"op{index}",
                "summary": f"Operation {index}",
                "arguments": {"value": secret},
            },
            origin={"harness": "tests", "session_id": thread_id},
            risk={"level": risk, "reasons": ["generated"]},
            thread_id=thread_id,
            context={"requester": requester, "tool_call_id": f"call_{index}"},
        )
        request_id = requested.request.id
        secrets[request_id] = secret
        calls[request_id] = f"call_{index}"
        interrupts.append(request_to_interrupt(requested, interrupt_id=f"int_{index}"))
    messages = [
        UserMessage(id="m0", role="user", content="go"),
        AssistantMessage(
            id="m1",
            role="assistant",
            tool_calls=[
                ToolCall(
                    id=calls[rid],
                    type="function",
                    function=FunctionCall(name="op", arguments=json.dumps({"value": value})),
                )
                for rid, value in secrets.items()
            ],
        ),
        *(
            ToolMessage(id=f"r_{rid}", role="tool", tool_call_id=calls[rid], content=value)
            for rid, value in secrets.items()
        ),
    ]
    events = [
        MessagesSnapshotEvent(type=EventType.MESSAGES_SNAPSHOT, messages=messages),
        StateSnapshotEvent(
            type=EventType.STATE_SNAPSHOT, snapshot={"values": list(secrets.values())}
        ),
        RawEvent(type=EventType.RAW, event={"values": list(secrets.values())}),
        RunFinishedEvent(
            type=EventType.RUN_FINISHED,
            thread_id=thread_id,
            run_id="r",
            outcome=RunFinishedInterruptOutcome(type="interrupt", interrupts=interrupts),
        ),
    ]
    for principal in people:
        access = authority.thread_access(principal, thread_id)
        visible = {rid for rid in secrets if authority.may_view(principal, rid)}
        if not access.trusted:
            assert access.shown == visible, principal
        shown = ThreadEventFilter(access)
        text = "".join(
            out.model_dump_json() for out in (shown(event) for event in events) if out is not None
        )
        text += "".join(m.model_dump_json() for m in visible_messages(messages, access))
        leaked = [rid for rid, value in secrets.items() if rid not in visible and value in text]
        record(CATEGORY, 1, failed_open=int(bool(leaked)))
        assert leaked == [], (principal, document)

        tip, before = authority.ledger.audit_tip(), authority.ledger.thread_record(thread_id)
        try:
            authority.post_to_thread(principal, thread_id, exists=True)
            posted = True
        except ForbiddenError:
            posted = False
            unchanged = (
                authority.ledger.audit_tip() == tip
                and authority.ledger.thread_record(thread_id) == before
            )
            record(CATEGORY, 1, failed_open=int(not unchanged))
            assert unchanged
        assert posted is may_post(policy, principal, owner), (principal, document)

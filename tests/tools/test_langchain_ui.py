"""LangChain's approval UIs (Agent Chat UI, Agent Inbox, Studio) against ``ApprovalMiddleware``.

The interrupt checks and answer shapes below are facts read from the UIs' sources,
reimplemented here (never copied):

- Agent Chat UI draws its approval card when ``isAgentInboxInterruptSchema`` holds
  (https://github.com/langchain-ai/agent-chat-ui/blob/main/src/lib/agent-inbox-interrupt.ts):
  a non-empty ``action_requests`` list of ``{name: string, args: object}`` and a non-empty
  ``review_configs`` list of ``{action_name: string, allowed_decisions: array}``. It answers
  ``command.resume = {decisions: [decision]}`` (no interrupt id)
  (src/components/thread/agent-inbox/hooks/use-interrupted-actions.tsx).
- Agent Inbox reads HITL's value through ``normalizeInterrupt`` (``action_requests[0]``'s
  ``name``, ``arguments`` and ``description``; ``review_configs[0].allowed_decisions``), and
  an older ``HumanInterrupt`` (``action_request: {action, args}``, ``config.allow_*``)
  (https://github.com/langchain-ai/agent-inbox/blob/main/src/components/agent-inbox/contexts/utils.ts);
  it answers ``command.resume = [HumanResponse]`` with ``type`` ``accept | edit | response |
  ignore`` (src/components/agent-inbox/contexts/ThreadContext.tsx).
- HITL's ``per_call`` mode (langchain 1.5.2, ``human_in_the_loop.py``): a decision alone,
  keyed by interrupt id; ``respond`` makes the human's text the tool's result.

The run's authenticated user is LangGraph Server's ``configurable["langgraph_auth_user"]``,
set here as the server would set it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command
from typing_extensions import TypedDict

from aais_langgraph import ApprovalAuthority, InMemoryLedger, request_approval
from aais_langgraph.gate.langchain_ui import AnswerShapeRefused, approval_envelope
from aais_langgraph.protocol import ApprovalRequested
from aais_langgraph.protocol.extensions import RESOLVED_BY_EXTENSION
from aais_langgraph.tools import EDIT_EXTENSION, ApprovalMiddleware

from .helpers import Recorder, call, script, tool_messages, turn

ALICE_USER = {"identity": "alice", "display_name": "Alice"}


def as_user(thread_id: str = "t1", user: Mapping[str, Any] | None = ALICE_USER) -> dict[str, Any]:
    """A run config as LangGraph Server builds it for ``user`` (None: no custom auth)."""
    return {"configurable": {"thread_id": thread_id, "langgraph_auth_user": user}}


def is_agent_inbox_interrupt_schema(interrupt: Mapping[str, Any]) -> bool:
    """Agent Chat UI's ``isAgentInboxInterruptSchema``, as a fact (see the module)."""
    value = interrupt.get("value")
    if not isinstance(value, Mapping):
        return False
    requests, configs = value.get("action_requests"), value.get("review_configs")
    if not isinstance(requests, list) or not requests:
        return False
    if not isinstance(configs, list) or not configs:
        return False
    return all(
        isinstance(r, Mapping)
        and isinstance(r.get("name"), str)
        and isinstance(r.get("args"), dict)
        for r in requests
    ) and all(
        isinstance(c, Mapping)
        and isinstance(c.get("action_name"), str)
        and isinstance(c.get("allowed_decisions"), list)
        for c in configs
    )


def agent_inbox_view(value: Mapping[str, Any]) -> dict[str, Any]:
    """Agent Inbox's ``normalizeInterrupt`` of a HITL value, as a fact (see the module)."""
    request = value["action_requests"][0]
    decisions = value["review_configs"][0]["allowed_decisions"]
    return {
        "action_request": {"action": request["name"], "args": request.get("arguments", {})},
        "config": {
            "allow_accept": "approve" in decisions,
            "allow_edit": "edit" in decisions,
            "allow_respond": "reject" in decisions,
            "allow_ignore": False,
        },
        "description": request.get("description"),
    }


@pytest.fixture
def ledger_authority() -> ApprovalAuthority:
    return ApprovalAuthority(InMemoryLedger())


def email_agent(
    recorder: Recorder, authority: ApprovalAuthority, entry: Any = True, **options: Any
) -> Any:
    model = script(turn(call("send_email", "c1", to="bob@example.com")))
    middleware = ApprovalMiddleware({"send_email": entry}, authority=authority, **options)
    return create_agent(
        model, tools=recorder.tools(), middleware=[middleware], checkpointer=InMemorySaver()
    )


def paused(agent: Any, config: dict[str, Any]) -> Any:
    agent.invoke({"messages": [("user", "email bob")]}, config)
    [interrupt] = agent.get_state(config).interrupts
    return interrupt


def recorded(authority: ApprovalAuthority, request_id: str) -> Any:
    found = authority.get_resolution(request_id)
    assert found is not None
    return found


def request_id_of(interrupt: Any) -> str:
    return str(interrupt.value["request"]["id"])


# -- what the UIs are shown ---------------------------------------------------------------


def test_agent_chat_ui_recognises_the_card_with_the_calls_arguments(ledger_authority) -> None:
    agent = email_agent(Recorder(), ledger_authority)
    interrupt = paused(agent, as_user())
    assert is_agent_inbox_interrupt_schema({"value": interrupt.value, "id": interrupt.id})
    [shown] = interrupt.value["action_requests"]
    assert (shown["name"], shown["args"]) == ("send_email", {"to": "bob@example.com"})
    assert interrupt.value["review_configs"] == [
        {"action_name": "send_email", "allowed_decisions": ["approve", "edit", "reject", "respond"]}
    ]


def test_agent_inbox_reads_the_call_and_its_buttons(ledger_authority) -> None:
    agent = email_agent(Recorder(), ledger_authority, {"allowed_decisions": ["approve", "reject"]})
    value = paused(agent, as_user()).value
    view = agent_inbox_view(value)
    assert view["action_request"] == {"action": "send_email", "args": {"to": "bob@example.com"}}
    assert view["config"]["allow_accept"] and view["config"]["allow_respond"]
    assert not view["config"]["allow_edit"]
    assert value["action_request"] == view["action_request"]
    assert value["config"] == {
        "allow_accept": True,
        "allow_edit": False,
        "allow_respond": False,
        "allow_ignore": True,
    }


def test_the_per_call_tool_approval_fields_sit_beside_the_envelope(ledger_authority) -> None:
    value = paused(email_agent(Recorder(), ledger_authority), as_user()).value
    assert value["type"] == "approval.requested"  # the AAIS envelope stays the contract
    assert (value["tool_call_id"], value["name"], value["args"]) == (
        "c1",
        "send_email",
        {"to": "bob@example.com"},
    )
    assert value["description"] == value["request"]["action"]["summary"]
    assert ApprovalRequested.from_data(value).to_json() == approval_envelope(value)


# -- their answers, bound to the shown request and recorded as the authenticated user ------


@pytest.mark.parametrize(
    "resume",
    [
        {"decisions": [{"type": "approve"}]},
        [{"type": "accept", "args": None}],
        [
            {
                "type": "accept",
                "args": {"action": "send_email", "args": {"to": "bob@example.com"}},
            }
        ],
    ],
    ids=["agent-chat-ui", "agent-inbox", "agent-inbox-with-the-shown-action"],
)
def test_an_approval_runs_the_call_once_as_the_authenticated_user(
    ledger_authority, resume: Any
) -> None:
    recorder = Recorder()
    agent = email_agent(recorder, ledger_authority)
    config = as_user()
    interrupt = paused(agent, config)
    agent.invoke(Command(resume=resume), config)
    assert recorder.runs == [("send_email", {"to": "bob@example.com", "body": "hi"})]
    resolved = recorded(ledger_authority, request_id_of(interrupt))
    assert resolved.approved
    assert ledger_authority.decided_by(resolved) == "alice"


def test_a_per_call_decision_keyed_by_interrupt_id_is_taken(ledger_authority) -> None:
    recorder = Recorder()
    agent = email_agent(recorder, ledger_authority)
    config = as_user()
    interrupt = paused(agent, config)
    agent.invoke(Command(resume={interrupt.id: {"type": "approve"}}), config)
    assert recorder.count("send_email") == 1


def test_a_reject_message_reaches_the_model_and_nothing_runs(ledger_authority) -> None:
    recorder = Recorder()
    agent = email_agent(recorder, ledger_authority, {"reviewer_note": True})
    config = as_user()
    interrupt = paused(agent, config)
    agent.invoke(Command(resume={"decisions": [{"type": "reject", "message": "not bob"}]}), config)
    assert recorder.runs == []
    assert recorded(ledger_authority, request_id_of(interrupt)).resolution.outcome == "denied"
    message = tool_messages(agent, config)["c1"]
    assert message.status == "error" and str(message.content).endswith("with reason: not bob")


@pytest.mark.parametrize(
    "resume",
    [
        {"decisions": [{"type": "respond", "message": "already sent yesterday"}]},
        [{"type": "response", "args": "already sent yesterday"}],
    ],
    ids=["hitl-respond", "agent-inbox-response"],
)
def test_a_response_is_the_tools_result_and_the_tool_does_not_run(
    ledger_authority, resume: Any
) -> None:
    recorder = Recorder()
    agent = email_agent(recorder, ledger_authority)
    config = as_user()
    interrupt = paused(agent, config)
    agent.invoke(Command(resume=resume), config)
    assert recorder.runs == []
    assert recorded(ledger_authority, request_id_of(interrupt)).resolution.outcome == "denied"
    message: ToolMessage = tool_messages(agent, config)["c1"]
    assert (message.status, message.content) == ("success", "already sent yesterday")
    assert message.additional_kwargs["lc_data"] == {"decision": "respond"}


@pytest.mark.parametrize(
    "resume",
    [
        {
            "decisions": [
                {
                    "type": "edit",
                    "edited_action": {"name": "send_email", "args": {"to": "carol@example.com"}},
                }
            ]
        },
        [{"type": "edit", "args": {"action": "send_email", "args": {"to": "carol@example.com"}}}],
    ],
    ids=["agent-chat-ui", "agent-inbox"],
)
def test_an_edit_supersedes_the_request_and_runs_the_edited_call_once(
    ledger_authority, resume: Any
) -> None:
    recorder = Recorder()
    agent = email_agent(recorder, ledger_authority)
    config = as_user()
    interrupt = paused(agent, config)
    agent.invoke(Command(resume=resume), config)
    assert recorder.runs == [("send_email", {"to": "carol@example.com", "body": "hi"})]
    assert agent.get_state(config).interrupts == ()
    original = recorded(ledger_authority, request_id_of(interrupt))
    assert original.resolution.outcome == "cancelled"
    [successor] = [
        event["request"]["id"]
        for event in ledger_authority.ledger.events_after(0, limit=1000)
        if event["type"] == "approval.requested"
        and event["request"].get("extensions", {}).get(EDIT_EXTENSION, {}).get("supersedes")
        == request_id_of(interrupt)
    ]
    approval = recorded(ledger_authority, successor)
    assert approval.approved and ledger_authority.decided_by(approval) == "alice"


def test_ignore_cancels_the_request_as_the_user_and_nothing_runs(ledger_authority) -> None:
    recorder = Recorder()
    agent = email_agent(recorder, ledger_authority)
    config = as_user()
    interrupt = paused(agent, config)
    agent.invoke(Command(resume=[{"type": "ignore", "args": None}]), config)
    assert recorder.runs == []
    resolved = recorded(ledger_authority, request_id_of(interrupt))
    assert resolved.resolution.outcome == "cancelled"
    assert resolved.resolution.message == "Ignored by the reviewer in Agent Inbox."
    assert (resolved.resolution.extensions or {})[RESOLVED_BY_EXTENSION]["id"] == "alice"


# -- refusals: a catalogue code, nothing recorded, the approval still pending ----------------


def _refused(authority: ApprovalAuthority, agent: Any, config: Any, resume: Any) -> Any:
    interrupt = agent.get_state(config).interrupts[0]
    with pytest.raises(AnswerShapeRefused) as raised:
        agent.invoke(Command(resume=resume), config)
    assert [i.id for i in agent.get_state(config).interrupts] == [interrupt.id]
    assert authority.get_resolution(request_id_of(interrupt)) is None
    assert "bob@example.com" not in str(raised.value)
    return raised.value


@pytest.mark.parametrize("user", [None, {"identity": "", "is_authenticated": False}])
def test_an_answer_without_an_authenticated_user_is_refused(ledger_authority, user: Any) -> None:
    recorder = Recorder()
    agent = email_agent(recorder, ledger_authority)
    config = as_user(user=user)
    paused(agent, config)
    error = _refused(ledger_authority, agent, config, {"decisions": [{"type": "approve"}]})
    assert error.code == "aais.unauthenticated"
    assert recorder.runs == []


def test_an_answer_in_process_without_a_user_is_refused(ledger_authority) -> None:
    agent = email_agent(Recorder(), ledger_authority)
    config = {"configurable": {"thread_id": "t1"}}
    paused(agent, config)
    error = _refused(ledger_authority, agent, config, {"decisions": [{"type": "approve"}]})
    assert error.code == "aais.unauthenticated"


@pytest.mark.parametrize(
    "resume",
    [
        {"decisions": [{"type": "approve"}, {"type": "approve"}]},
        {
            "decisions": [
                {"type": "edit", "edited_action": {"name": "search", "args": {"query": "x"}}}
            ]
        },
        [{"type": "accept", "args": {"action": "send_email", "args": {"to": "eve@example.com"}}}],
    ],
    ids=["two-decisions", "edit-of-another-tool", "accept-of-another-action"],
)
def test_an_answer_meant_for_another_interrupt_is_refused(ledger_authority, resume: Any) -> None:
    recorder = Recorder()
    agent = email_agent(recorder, ledger_authority)
    config = as_user()
    paused(agent, config)
    assert _refused(ledger_authority, agent, config, resume).code == "aais.unknown_interrupt"
    assert recorder.runs == []


@pytest.mark.parametrize(
    "resume",
    [
        {"decisions": [{"type": "maybe"}]},
        {"decisions": "approve"},
        "approve",
        {"decisions": [{"type": "respond"}]},
        {"decisions": [{"type": "edit"}]},
        [{"type": "response", "args": 7}],
        {"anything": "typed in Studio"},
    ],
)
def test_a_malformed_answer_is_refused_naming_the_accepted_shapes(
    ledger_authority, resume: Any
) -> None:
    agent = email_agent(Recorder(), ledger_authority)
    config = as_user()
    paused(agent, config)
    error = _refused(ledger_authority, agent, config, resume)
    assert error.code == "aais.invalid_resume"
    assert "aais.invalid_resume: " in str(error)


def test_studio_is_told_the_accepted_shapes(ledger_authority) -> None:
    agent = email_agent(Recorder(), ledger_authority)
    config = as_user()
    paused(agent, config)
    error = _refused(ledger_authority, agent, config, {"typed": "in Studio"})
    assert "approval.decided" in str(error) and "Agent Inbox" in str(error)


def test_a_decision_not_offered_for_the_tool_is_refused(ledger_authority) -> None:
    agent = email_agent(Recorder(), ledger_authority, {"allowed_decisions": ["approve", "reject"]})
    config = as_user()
    paused(agent, config)
    resume = {"decisions": [{"type": "respond", "message": "done"}]}
    assert _refused(ledger_authority, agent, config, resume).code == "aais.invalid_resume"


def test_a_refused_answer_leaves_the_approval_answerable(ledger_authority) -> None:
    recorder = Recorder()
    agent = email_agent(recorder, ledger_authority)
    config = as_user()
    paused(agent, config)
    _refused(ledger_authority, agent, config, {"decisions": [{"type": "maybe"}]})
    agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config)
    assert recorder.count("send_email") == 1


async def test_the_async_gate_takes_the_same_answers(ledger_authority) -> None:
    recorder = Recorder()
    agent = email_agent(recorder, ledger_authority)
    config = as_user()
    await agent.ainvoke({"messages": [("user", "email bob")]}, config)
    with pytest.raises(AnswerShapeRefused):
        await agent.ainvoke(Command(resume={"decisions": [{"type": "maybe"}]}), config)
    edit = {"type": "edit", "edited_action": {"name": "send_email", "args": {"to": "c@x.org"}}}
    await agent.ainvoke(Command(resume={"decisions": [edit]}), config)
    assert recorder.runs == [("send_email", {"to": "c@x.org", "body": "hi"})]


# -- a bare gate opts in ---------------------------------------------------------------------


class _State(TypedDict, total=False):
    outcome: str


def _bare_gate(authority: ApprovalAuthority) -> Any:
    def act(state: _State) -> dict[str, Any]:
        resolved = request_approval(
            {
                "kind": "process.exec",
                "name": "shell.exec",
                "summary": "Run `ls`",
                "arguments": {"command": "ls"},
            },
            authority=authority,
            langchain_ui=True,
        )
        return {"outcome": resolved.resolution.outcome}

    builder = StateGraph(_State)
    builder.add_node("act", act)
    builder.add_edge(START, "act")
    builder.add_edge("act", END)
    return builder.compile(checkpointer=InMemorySaver())


def test_a_bare_gate_that_opts_in_shows_a_card_without_edit(ledger_authority) -> None:
    graph = _bare_gate(ledger_authority)
    config = as_user()
    graph.invoke({}, config)
    [interrupt] = graph.get_state(config).interrupts
    assert is_agent_inbox_interrupt_schema({"value": interrupt.value})
    assert interrupt.value["review_configs"][0]["allowed_decisions"] == [
        "approve",
        "reject",
        "respond",
    ]
    assert "tool_call_id" not in interrupt.value
    done = graph.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config)
    assert done["outcome"] == "approved"


def test_a_bare_gate_refuses_an_edit(ledger_authority) -> None:
    graph = _bare_gate(ledger_authority)
    config = as_user()
    graph.invoke({}, config)
    edit = {"type": "edit", "edited_action": {"name": "shell.exec", "args": {"command": "rm"}}}
    with pytest.raises(AnswerShapeRefused) as raised:
        graph.invoke(Command(resume={"decisions": [edit]}), config)
    assert raised.value.code == "aais.invalid_resume"
    assert graph.get_state(config).interrupts


# -- every rule of any answer -----------------------------------------------------------------


def test_separation_of_duties_holds_for_a_ui_answer() -> None:
    from aais_langgraph.authority import AccessPolicy, ForbiddenError

    policy = {"default_approvers": ["*"], "separation_of_duties": {"from_risk": "low"}}
    authority = ApprovalAuthority(InMemoryLedger(), authorizer=AccessPolicy.from_mapping(policy))
    recorder = Recorder()
    agent = email_agent(recorder, authority)
    config = as_user()  # alice's run: she is its requester
    interrupt = paused(agent, config)
    with pytest.raises(ForbiddenError, match="separation of duties"):
        agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config)
    assert recorder.runs == []
    assert authority.get_resolution(request_id_of(interrupt)) is None
    assert agent.get_state(config).interrupts

    as_bob = as_user(user={"identity": "bob"})
    agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), as_bob)
    assert recorder.count("send_email") == 1


def test_an_answer_after_expiry_records_the_expiry_and_runs_nothing(ledger_authority) -> None:
    from datetime import timedelta

    recorder = Recorder()
    agent = email_agent(recorder, ledger_authority, {"expires_in": timedelta(seconds=1)})
    config = as_user()
    interrupt = paused(agent, config)
    request_id = request_id_of(interrupt)
    later = ledger_authority.clock() + timedelta(seconds=5)
    ledger_authority.clock = lambda: later  # type: ignore[method-assign]
    agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config)
    assert recorder.runs == []
    assert recorded(ledger_authority, request_id).resolution.outcome == "expired"


def test_an_answer_without_an_interrupt_id_while_two_calls_wait_records_nothing(
    ledger_authority,
) -> None:
    recorder = Recorder()
    model = script(
        turn(call("send_email", "c1", to="a@example.com"), call("send_email", "c2", to="b@x.org"))
    )
    agent = create_agent(
        model,
        tools=recorder.tools(),
        middleware=[ApprovalMiddleware({"send_email": True}, authority=ledger_authority)],
        checkpointer=InMemorySaver(),
    )
    config = as_user()
    agent.invoke({"messages": [("user", "go")]}, config)
    assert len(agent.get_state(config).interrupts) == 2
    # LangGraph refuses a resume without an interrupt id when several interrupts wait.
    with pytest.raises(RuntimeError, match="interrupt id"):
        agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config)
    assert recorder.runs == [] and len(ledger_authority.ledger.list_pending()) == 2
    # Keyed by interrupt id (HITL's per_call answer), each call is answered on its own.
    first = agent.get_state(config).interrupts[0]
    agent.invoke(Command(resume={first.id: {"type": "approve"}}), config)
    assert recorder.count("send_email") == 1 and len(agent.get_state(config).interrupts) == 1


def test_on_langgraph_server_the_requester_is_the_authenticated_user_not_client_input() -> None:
    from aais_langgraph.authority import AccessPolicy, ForbiddenError
    from aais_langgraph.gate import REQUESTER_KEY
    from aais_langgraph.protocol.extensions import REQUESTER_EXTENSION

    policy = {"default_approvers": ["*"], "separation_of_duties": {"from_risk": "low"}}
    authority = ApprovalAuthority(InMemoryLedger(), authorizer=AccessPolicy.from_mapping(policy))
    recorder = Recorder()
    agent = email_agent(recorder, authority)
    config = as_user()  # alice's run...
    config["configurable"][REQUESTER_KEY] = "mallory"  # ...naming someone else in its config
    interrupt = paused(agent, config)
    assert interrupt.value["request"]["extensions"][REQUESTER_EXTENSION] == {"id": "alice"}
    with pytest.raises(ForbiddenError, match="separation of duties"):
        agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), as_user())
    assert recorder.runs == []


# -- what the UIs show is what the ledger holds ------------------------------------------------


def _tamper_shown_arguments(saver: InMemorySaver, thread_id: str, arguments: Any) -> None:
    """Rewrite the arguments LangChain's UIs read in a checkpoint's interrupt write (as
    someone with write access to the checkpointer could), leaving the envelope as it is."""
    for (thread, _ns, _checkpoint), writes in saver.writes.items():
        if thread != thread_id:
            continue
        for key, (task_id, channel, typed, path) in list(writes.items()):
            if channel != "__interrupt__":
                continue
            interrupts = saver.serde.loads_typed(typed)
            for interrupt in interrupts:
                interrupt.value["action_requests"][0]["args"] = arguments
            writes[key] = (task_id, channel, saver.serde.dumps_typed(interrupts), path)


def test_a_checkpoint_showing_the_uis_another_action_is_an_integrity_error(
    ledger_authority,
) -> None:
    from aais_langgraph.threads import reconcile_checkpoints

    saver = InMemorySaver()
    model = script(turn(call("send_email", "c1", to="bob@example.com")))
    middleware = ApprovalMiddleware({"send_email": True}, authority=ledger_authority)
    agent = create_agent(
        model, tools=Recorder().tools(), middleware=[middleware], checkpointer=saver
    )
    interrupt = paused(agent, as_user())
    assert reconcile_checkpoints(ledger_authority, saver) == []

    _tamper_shown_arguments(saver, "t1", {"to": "friend@example.com"})

    [problem] = reconcile_checkpoints(ledger_authority, saver)
    assert problem.request_id == request_id_of(interrupt)
    assert "differs" in problem.reason


def test_an_answer_sent_after_the_call_changed_runs_nothing(ledger_authority) -> None:
    from langchain_core.messages import AIMessage

    recorder = Recorder()
    agent = email_agent(recorder, ledger_authority)
    config = as_user()
    paused(agent, config)  # the card shows an email to bob
    state = agent.get_state(config)
    model_turn = [m for m in state.values["messages"] if isinstance(m, AIMessage)][-1]
    changed = {**model_turn.tool_calls[0], "args": {"to": "eve@example.com"}}
    agent.update_state(
        config, {"messages": [model_turn.model_copy(update={"tool_calls": [changed]})]}
    )
    assert agent.get_state(config).interrupts == ()  # nothing waits for an answer now

    # Agent Chat UI's answer to the card it showed carries nothing of what it showed.
    with pytest.raises(AnswerShapeRefused) as raised:
        agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config)
    assert raised.value.code == "aais.stale"
    assert recorder.runs == []
    with pytest.raises(AnswerShapeRefused):  # the same answer, handed back on a re-run
        agent.invoke(None, config)
    assert recorder.runs == []
    assert all(
        ledger_authority.get_resolution(r.request_id) is None
        for r in ledger_authority.ledger.list_pending()
    )

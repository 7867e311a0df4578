"""HumanInTheLoopMiddleware configs and answers that ApprovalMiddleware takes as they are.

Each test runs a create_agent agent on both checkpointers (or in memory where the
backend does not matter) and checks what HITL users rely on: every
``allowed_decisions`` config builds and means what it says, a call with an empty id
is gated like any other, denials carry HITL's message markers, the normalised
``interrupt_on`` is readable, and a reviewer's note reaches the model when the tool
opts in.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langgraph.checkpoint.memory import InMemorySaver

from aais_langgraph import (
    AAISValidationError,
    ApprovalAuthority,
    Cancellation,
    build_decision,
    resume_with_decisions,
)
from aais_langgraph.ledger import InMemoryLedger
from aais_langgraph.tools import (
    NOTE_EXTENSION,
    NOTE_MAX_LENGTH,
    STOP_LABEL,
    ApprovalMiddleware,
    note_of,
    with_note,
)

from .helpers import ALICE, Recorder, call, pending, script, thread, tool_messages, turn

HITL_MARKERS = {"lc_source": "hitl_interrupt_decision", "lc_data": {"decision": "reject"}}


def agent_for(
    recorder: Recorder, saver: Any, authority: ApprovalAuthority, entry: Any, *calls: Any
) -> Any:
    model = script(turn(*(calls or (call("send_email", "c1", to="bob@example.com"),))))
    agent = create_agent(
        model,
        tools=recorder.tools(),
        middleware=[ApprovalMiddleware({"send_email": entry}, authority=authority)],
        checkpointer=saver,
    )
    agent.invoke({"messages": [("user", "go")]}, thread())
    return agent


def offered(requested: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c["decision"], c["label"]) for c in requested["request"]["choices"]]


def decide(
    agent: Any, authority: ApprovalAuthority, requested: dict[str, Any], kind: str, **extra: Any
) -> Any:
    decided = build_decision(requested, decision=kind, actor=ALICE)  # type: ignore[arg-type]
    if "note" in extra:
        decided = with_note(decided, extra["note"])
    [resolved] = resume_with_decisions(agent, thread(), decided, actor=ALICE, authority=authority)
    return resolved


# -- allowed_decisions without "reject" ---------------------------------------------


@pytest.mark.parametrize(
    "allowed, choices",
    [
        (["approve"], [("approve", "Approve once"), ("cancel", STOP_LABEL)]),
        (["approve", "edit"], [("approve", "Approve once"), ("cancel", STOP_LABEL)]),
        (["edit"], [("cancel", STOP_LABEL)]),
        (["approve", "reject"], [("approve", "Approve once"), ("deny", "Deny")]),
    ],
)
def test_each_allowed_decisions_config_offers_what_it_names(
    recorder, authority, allowed, choices
) -> None:
    entry = {"allowed_decisions": allowed}
    agent = agent_for(recorder, InMemorySaver(), authority, entry)
    requested = pending(agent, thread())["c1"]
    assert offered(requested) == choices
    assert requested["request"]["extensions"]["aais-langgraph.org/editable"] is ("edit" in allowed)


def test_the_stop_choice_of_an_approve_only_tool_runs_nothing(recorder, saver, authority) -> None:
    agent = agent_for(recorder, saver, authority, {"allowed_decisions": ["approve"]})
    resolved = decide(agent, authority, pending(agent, thread())["c1"], "cancel")
    assert resolved.resolution.outcome == "cancelled"
    message = tool_messages(agent, thread())["c1"]
    assert recorder.runs == [] and message.status == "error"
    assert "cancelled" in message.content


def test_an_approve_only_tool_cannot_be_denied(recorder, authority) -> None:
    agent = agent_for(recorder, InMemorySaver(), authority, {"allowed_decisions": ["approve"]})
    requested = pending(agent, thread())["c1"]
    assert decide(agent, authority, requested, "deny").resolution.outcome == "invalid"
    assert list(pending(agent, thread())) == ["c1"]  # still answerable
    assert decide(agent, authority, requested, "approve").approved
    assert recorder.count("send_email") == 1


# -- a call the model sent with an empty id -------------------------------------------


def test_a_gated_call_with_an_empty_id_is_asked_about_and_keeps_its_siblings(
    recorder, saver, authority
) -> None:
    calls = (
        call("send_email", "", to="bob@example.com"),
        call("send_email", "c2", to="carol@example.com"),
        call("search", "c3", query="q"),
    )
    agent = agent_for(recorder, saver, authority, True, *calls)
    assert recorder.runs == [("search", {"query": "q"})]
    waiting = pending(agent, thread())
    assert set(waiting) == {"", "c2"}
    assert waiting[""]["request"]["action"]["arguments"] == {"to": "bob@example.com"}

    decide(agent, authority, waiting["c2"], "approve")
    assert set(pending(agent, thread())) == {""}  # the same request, after a resume
    assert pending(agent, thread())[""]["request"]["id"] == waiting[""]["request"]["id"]
    decide(agent, authority, waiting[""], "deny")

    assert recorder.count("send_email") == 1
    messages = tool_messages(agent, thread())
    assert messages[""].status == "error" and messages["c2"].content == "sent to carol@example.com"
    assert agent.get_state(thread()).values["messages"][-1].content == "All done."


def test_identical_calls_with_empty_ids_get_a_request_each(recorder, authority) -> None:
    same = call("send_email", "", to="bob@example.com")
    agent = agent_for(recorder, InMemorySaver(), authority, True, same, dict(same))
    [first, second] = agent.get_state(thread()).interrupts
    assert first.value["request"]["id"] != second.value["request"]["id"]
    for interrupt in (first, second):
        decide(agent, authority, interrupt.value, "approve")
    assert recorder.count("send_email") == 2


def test_a_gated_call_without_an_id_is_refused_naming_the_tool(recorder, authority) -> None:
    no_id = {"name": "send_email", "args": {"to": "bob@example.com"}, "id": None}
    with pytest.raises(ValueError, match="`send_email` has no ID"):
        agent_for(recorder, InMemorySaver(), authority, True, no_id)
    assert recorder.runs == []


# -- what a denial looks like to code that reads HITL's messages ------------------------


@pytest.mark.parametrize("kind", ["deny", "cancel"])
def test_refusals_carry_hitl_markers_and_the_resolution(recorder, saver, authority, kind) -> None:
    agent = agent_for(recorder, saver, authority, True)
    if kind == "cancel":
        request_id = pending(agent, thread())["c1"]["request"]["id"]
        resume_with_decisions(
            agent, thread(), Cancellation(request_id), actor=ALICE, authority=authority
        )
    else:
        decide(agent, authority, pending(agent, thread())["c1"], kind)
    message = tool_messages(agent, thread())["c1"]
    assert message.additional_kwargs == HITL_MARKERS
    assert message.artifact["aais"]["type"] == "approval.resolved"


def test_a_denial_reads_as_hitl_reject(recorder, authority) -> None:
    agent = agent_for(recorder, InMemorySaver(), authority, True)
    decide(agent, authority, pending(agent, thread())["c1"], "deny")
    assert tool_messages(agent, thread())["c1"].content == (
        "User rejected the tool call for `send_email` with id c1. The tool was not executed. "
        "Do not retry this tool call unless the user explicitly requests it."
    )


def test_an_approved_result_carries_no_markers(recorder, authority) -> None:
    agent = agent_for(recorder, InMemorySaver(), authority, True)
    decide(agent, authority, pending(agent, thread())["c1"], "approve")
    assert tool_messages(agent, thread())["c1"].additional_kwargs == {}


# -- interrupt_on -------------------------------------------------------------------------


def test_interrupt_on_reads_back_normalised_and_cannot_change_the_gate() -> None:
    middleware = ApprovalMiddleware(
        {
            "send_email": True,
            "search": False,
            "read_file": {"allowed_decisions": ["approve", "reject"], "risk": "high"},
        }
    )
    assert middleware.interrupt_on == {
        "send_email": {"allowed_decisions": ["approve", "edit", "reject", "respond"]},
        "read_file": {"allowed_decisions": ["approve", "reject"], "risk": "high"},
    }
    middleware.interrupt_on["search"] = {"allowed_decisions": ["approve"]}
    middleware.interrupt_on["send_email"]["allowed_decisions"].append("ignore")
    assert "search" not in middleware.interrupt_on
    assert not middleware.gate.gates("search")
    assert middleware.interrupt_on["send_email"]["allowed_decisions"] == [
        "approve",
        "edit",
        "reject",
        "respond",
    ]


def test_interrupt_mode_per_call_is_taken_as_it_is(recorder, authority) -> None:
    agent = create_agent(
        script(turn(call("send_email", "c1", to="bob@example.com"))),
        tools=recorder.tools(),
        middleware=[
            ApprovalMiddleware({"send_email": True}, interrupt_mode="per_call", authority=authority)
        ],
        checkpointer=InMemorySaver(),
    )
    agent.invoke({"messages": [("user", "go")]}, thread())
    assert list(pending(agent, thread())) == ["c1"] and recorder.runs == []
    assert ApprovalMiddleware({"send_email": True}).interrupt_mode == "per_call"


@pytest.mark.parametrize("mode", ["batched", "sometimes", None])
def test_an_interrupt_mode_other_than_per_call_is_refused_naming_the_field(mode: Any) -> None:
    with pytest.raises(ValueError, match=r"^interrupt_mode: only 'per_call'") as refused:
        ApprovalMiddleware({"send_email": True}, interrupt_mode=mode)
    assert "sometimes" not in str(refused.value)


# -- the reviewer's note -----------------------------------------------------------------

WITH_NOTE = {"allowed_decisions": ["approve", "reject"], "reviewer_note": True}


def test_a_note_on_a_denial_reaches_the_model_when_the_tool_opts_in(
    recorder, saver, authority
) -> None:
    agent = agent_for(recorder, saver, authority, WITH_NOTE)
    resolved = decide(
        agent, authority, pending(agent, thread())["c1"], "deny", note="Ask Bob first."
    )
    assert note_of(resolved) == "Ask Bob first."
    message = tool_messages(agent, thread())["c1"]
    assert message.content == (
        "User rejected the tool call for `send_email` with reason: Ask Bob first."
    )
    assert message.additional_kwargs == HITL_MARKERS
    assert recorder.runs == []


def test_a_note_is_not_shown_to_the_model_unless_the_tool_opts_in(recorder, authority) -> None:
    agent = agent_for(recorder, InMemorySaver(), authority, True)
    resolved = decide(agent, authority, pending(agent, thread())["c1"], "deny", note="secret plan")
    assert note_of(resolved) == "secret plan"  # recorded all the same
    assert "secret plan" not in tool_messages(agent, thread())["c1"].content


def test_a_note_is_recorded_and_audited_with_the_resolution(recorder, tmp_path) -> None:
    from aais_langgraph import SqliteLedger

    with SqliteLedger.from_path(tmp_path / "ledger.db") as ledger:
        ledger.setup()
        authority = ApprovalAuthority(ledger)
        agent = agent_for(recorder, InMemorySaver(), authority, WITH_NOTE)
        requested = pending(agent, thread())["c1"]
        decide(agent, authority, requested, "deny", note="Not this week.")
        recorded = authority.get_resolution(requested["request"]["id"])
        assert recorded is not None and note_of(recorded) == "Not this week."
        decided = [
            event
            for event in authority.events_after(0).events
            if event["type"] == "approval.decided"
        ]
        assert [d["decision"]["extensions"][NOTE_EXTENSION] for d in decided] == ["Not this week."]
        assert authority.verify_audit().ok


@pytest.mark.parametrize("note", ["", "x" * (NOTE_MAX_LENGTH + 1), 42])
def test_a_bad_note_is_refused_and_the_request_stays_answerable(recorder, authority, note) -> None:
    agent = agent_for(recorder, InMemorySaver(), authority, WITH_NOTE)
    requested = pending(agent, thread())["c1"]
    decided = build_decision(requested, decision="deny", actor=ALICE).to_json()
    decided["decision"]["extensions"] = {NOTE_EXTENSION: note}
    with pytest.raises(AAISValidationError) as raised:
        resume_with_decisions(agent, thread(), decided, actor=ALICE, authority=authority)
    assert raised.value.pointer == "/decision/extensions/aais-langgraph.org~1note"
    assert "xxxx" not in str(raised.value)
    assert authority.get_resolution(requested["request"]["id"]) is None
    assert decide(agent, authority, requested, "deny", note="Too long before.").resolution.outcome
    assert "Too long before." in tool_messages(agent, thread())["c1"].content


def test_a_note_is_refused_by_the_authority_outside_any_graph() -> None:
    from aais_langgraph.protocol import build_request

    authority = ApprovalAuthority(InMemoryLedger())
    requested = authority.add(
        build_request(
            {"kind": "tool.call", "name": "t", "summary": "s", "arguments": {}},
            origin={"harness": "tests", "session_id": "s1"},
        )
    )
    decided = with_note(build_decision(requested, decision="deny", actor=ALICE), "y" * 5000)
    with pytest.raises(AAISValidationError, match="1 to 1000 characters"):
        authority.decide(decided, actor=ALICE)
    assert authority.get_resolution(requested.request.id) is None


# -- the edit notice -----------------------------------------------------------------------


def test_the_edit_notice_is_added_once_in_the_shape_of_the_content() -> None:
    from langchain_core.messages import ToolMessage

    from aais_langgraph.tools import EDIT_NOTICE
    from aais_langgraph.tools.messages import with_edit_notice

    once = with_edit_notice(ToolMessage(content="wrote it", tool_call_id="1"), "1", EDIT_NOTICE)
    assert with_edit_notice(once, "1", EDIT_NOTICE) == once
    empty = with_edit_notice(ToolMessage(content=[], tool_call_id="1"), "1", EDIT_NOTICE)
    assert empty.content == [{"type": "text", "text": EDIT_NOTICE}]  # type: ignore[union-attr]
    plain = with_edit_notice(ToolMessage(content=["wrote it"], tool_call_id="1"), "1", "Edited.")
    assert plain.content == ["Edited.", "wrote it"]  # type: ignore[union-attr]


def test_a_call_with_an_empty_id_can_be_edited_and_approved(recorder, saver, authority) -> None:
    from aais_langgraph.tools import edit_tool_call

    agent = agent_for(recorder, saver, authority, True, call("send_email", "", to="x@example.com"))
    shown = pending(agent, thread())[""]["request"]
    successor = edit_tool_call(
        agent,
        thread(),
        shown["id"],
        {"to": "bob@example.com"},
        actor=ALICE,
        authority=authority,
        action_digest=shown["action_digest"],
    )
    assert successor.request.extensions["aais-langgraph.org/tool_call_id"] == ""
    assert recorder.runs == [("send_email", {"to": "bob@example.com", "body": "hi"})]
    assert tool_messages(agent, thread())[""].content.endswith("sent to bob@example.com")

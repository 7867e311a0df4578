"""Reading LangChain UI answers (``aais_langgraph.gate.langchain_ui``): any JSON value is
either one answer to the shown request or a refusal with a catalogue code that echoes no
value; the answer's AAIS decision is bound to the shown request and given by the
authenticated user only."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aais_langgraph import ApprovalAuthority, InMemoryLedger
from aais_langgraph.gate.langchain_ui import (
    AnswerShapeRefused,
    LangChainUI,
    UIAnswer,
    read_answer,
)
from aais_langgraph.gate.response import RefusalCarrier
from aais_langgraph.protocol import Actor, ApprovalDecided, Request, build_request
from aais_langgraph.protocol.refusals import REFUSALS

SECRET = "s3cr3t-value"
ALICE = Actor(id="alice", type="human")


def _request() -> Request:
    return build_request(
        {
            "kind": "tool.call",
            "name": "send_email",
            "summary": "Send an email",
            "arguments": {"to": "bob@example.com"},
        },
        origin={"harness": "test", "session_id": "s1"},
    ).request


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8) | st.just(SECRET),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                ["type", "decisions", "message", "args", "action", "edited_action", "name", SECRET]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)
KINDS = st.sampled_from(["approve", "reject", "respond", "edit", "accept", "response", "ignore"])
SHAPED = st.one_of(
    st.builds(
        lambda kind, rest: {"decisions": [{"type": kind, **rest}]},
        KINDS,
        st.dictionaries(st.sampled_from(["message", "edited_action"]), JSON, max_size=2),
    ),
    st.builds(lambda kind, args: [{"type": kind, "args": args}], KINDS, JSON),
    st.builds(
        lambda kind, rest: {"type": kind, **rest},
        KINDS,
        st.dictionaries(st.sampled_from(["message", "edited_action"]), JSON, max_size=2),
    ),
)


@settings(max_examples=300, deadline=None)
@given(value=st.one_of(JSON, SHAPED))
def test_any_value_is_one_answer_or_a_catalogued_refusal_that_echoes_nothing(value: Any) -> None:
    request = _request()
    try:
        answer = read_answer(value, request)
    except RefusalCarrier as carried:
        error = carried.error
        assert isinstance(error, AnswerShapeRefused)
        assert error.code in REFUSALS
        assert SECRET not in str(error) and "bob@example.com" not in str(error)
        return
    assert isinstance(answer, UIAnswer)
    assert answer.decision in ("approve", "edit", "reject", "respond", "ignore")


@settings(max_examples=100, deadline=None)
@given(
    kind=st.sampled_from(["approve", "reject", "respond"]), message=st.text(min_size=1, max_size=20)
)
def test_a_decision_is_bound_to_the_shown_request_and_given_by_the_user(
    kind: str, message: str
) -> None:
    request = _request()
    authority = ApprovalAuthority(InMemoryLedger())
    decision = {"type": kind, **({} if kind == "approve" else {"message": message})}
    decided = LangChainUI().read(request, {"decisions": [decision]}, ALICE, None, authority)
    assert isinstance(decided, ApprovalDecided)
    assert decided.decision.request_id == request.id
    assert decided.decision.action_digest == request.action_digest
    assert decided.decision.actor == ALICE
    assert decided.decision.decision == ("approve" if kind == "approve" else "deny")


@pytest.mark.parametrize("refusal", [None, "this run takes recorded answers only"])
def test_no_user_means_no_answer(refusal: str | None) -> None:
    authority = ApprovalAuthority(InMemoryLedger())
    with pytest.raises(RefusalCarrier) as raised:
        LangChainUI().read(
            _request(), {"decisions": [{"type": "approve"}]}, None, refusal, authority
        )
    error = raised.value.error
    assert isinstance(error, AnswerShapeRefused) and error.code == "aais.unauthenticated"

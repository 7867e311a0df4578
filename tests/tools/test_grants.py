"""A session approval of a tool call is a grant covering later calls inside its constraints."""

from __future__ import annotations

from langchain.agents import create_agent

from aais_langgraph.tools import ApprovalMiddleware

from .helpers import answer, call, pending, script, thread, turn

READ_SCOPE = {"argument_prefixes": {"path": "/srv/reports/"}}


def test_session_grant_auto_approves_inside_constraints_and_asks_outside(
    recorder, saver, authority
) -> None:
    model = script(
        turn(call("read_file", "c1", path="/srv/reports/q1.txt")),
        turn(call("read_file", "c2", path="/srv/reports/q2.txt")),
        turn(call("read_file", "c3", path="/etc/shadow")),
    )
    agent = create_agent(
        model,
        tools=recorder.tools(),
        middleware=[
            ApprovalMiddleware(
                {"read_file": {"session_scope": READ_SCOPE, "risk": "high"}}, authority=authority
            )
        ],
        checkpointer=saver,
    )
    agent.invoke({"messages": [("user", "go")]}, thread())
    first = pending(agent, thread())["c1"]
    offered = {(c["decision"], c["scope"]) for c in first["request"]["choices"]}
    assert offered == {("approve", "once"), ("approve", "session"), ("deny", "once")}
    assert first["request"]["risk"]["level"] == "high"

    answer(agent, thread(), authority, (first, "approve", "session"))

    # q2 ran on the grant without a request; /etc/shadow waits for a human.
    assert [args["path"] for _, args in recorder.runs] == [
        "/srv/reports/q1.txt",
        "/srv/reports/q2.txt",
    ]
    assert list(pending(agent, thread())) == ["c3"]
    [grant] = authority.list_grants(session_id="t1")
    by_grant = [
        entry.payload
        for entry in authority.ledger.audit_entries()
        if entry.kind == "resolved"
        and "aais-langgraph.org/grant" in (entry.payload.get("extensions") or {})
    ]
    assert len(by_grant) == 1
    assert by_grant[0]["outcome"] == "approved"
    assert by_grant[0]["extensions"]["aais-langgraph.org/grant"]["grant_id"] == grant.grant_id


def test_grant_does_not_cross_threads(recorder, saver, authority) -> None:
    model = script(turn(call("read_file", "c1", path="/srv/reports/q1.txt")))
    agent = create_agent(
        model,
        tools=recorder.tools(),
        middleware=[
            ApprovalMiddleware({"read_file": {"session_scope": READ_SCOPE}}, authority=authority)
        ],
        checkpointer=saver,
    )
    agent.invoke({"messages": [("user", "go")]}, thread("t1"))
    answer(
        agent, thread("t1"), authority, (pending(agent, thread("t1"))["c1"], "approve", "session")
    )
    agent.invoke({"messages": [("user", "go")]}, thread("t2"))
    assert list(pending(agent, thread("t2"))) == ["c1"]
    assert recorder.count("read_file") == 1

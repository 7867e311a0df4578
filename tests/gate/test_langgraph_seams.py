"""The one seam test: every private LangGraph detail the gate relies on, against the
installed LangGraph (``aais_langgraph.gate.seams``). Fails loudly when an upgrade moves one."""

from __future__ import annotations

import contextlib
import inspect
from typing import Any, TypedDict

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_config
from langgraph.errors import is_invalid_resume
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import Command, interrupt

from aais_langgraph.gate import seams


class State(TypedDict, total=False):
    seen: list[Any]


def test_the_configurable_keys_and_channel_are_langgraphs() -> None:
    from langgraph._internal._constants import (
        CONFIG_KEY_RESUME_MAP,
        CONFIG_KEY_SCRATCHPAD,
        INTERRUPT,
    )

    assert seams.RESUME_MAP_KEY == CONFIG_KEY_RESUME_MAP == "__pregel_resume_map"
    assert seams.SCRATCHPAD_KEY == CONFIG_KEY_SCRATCHPAD == "__pregel_scratchpad"
    assert seams.INTERRUPT_WRITES == INTERRUPT == "__interrupt__"


def test_interrupt_ids_saved_answers_and_the_resume_map_on_a_real_graph() -> None:
    """Two interrupts in one task: their ids are the slot ids; a resume by id shows
    up in the resume map; the first answer is in the scratchpad when the second is asked."""
    observed: list[dict[str, Any]] = []

    def node(state: State) -> State:
        configurable = get_config()["configurable"]
        observed.append(
            {
                "ns": configurable["checkpoint_ns"],
                "saved": list(seams.saved_answers(configurable)),
                "map": dict(seams.resume_map(configurable) or {}),
                "pad": seams.scratchpad(configurable) is not None,
            }
        )
        first = interrupt("first")
        second = interrupt("second")
        return {"seen": [first, second]}

    builder = StateGraph(State)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    graph = builder.compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t"}}
    graph.invoke({}, config)
    (first,) = graph.get_state(config).interrupts
    namespace = observed[-1]["ns"]
    assert first.id == seams.interrupt_id_for(namespace, 0)
    graph.invoke(Command(resume={first.id: "one"}), config)
    assert observed[-1]["map"] == {first.id: "one"}
    (second,) = graph.get_state(config).interrupts
    assert second.id == seams.interrupt_id_for(namespace, 1)
    graph.invoke(Command(resume={second.id: "two"}), config)
    assert observed[-1]["saved"] == ["one", "two"]
    assert observed[-1]["pad"] is True
    assert graph.get_state(config).values["seen"] == ["one", "two"]


def test_interrupt_will_pause_only_when_interrupt_pauses() -> None:
    """Before each interrupt() the flag is read: True only where that interrupt() then
    raises (a fresh task), False where it may return an answer (an answer by id, a plain
    resume value, a second interrupt after an answered one); reading it does not use up
    a plain value."""
    observed: list[tuple[str, bool, bool]] = []

    def ask(label: str) -> Any:
        waiting = seams.interrupt_will_pause(get_config()["configurable"])
        try:
            answer = interrupt(label)
        except BaseException:
            observed.append((label, waiting, True))
            raise
        observed.append((label, waiting, False))
        return answer

    def node(state: State) -> State:
        return {"seen": [ask("first"), ask("second")]}

    builder = StateGraph(State)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    graph = builder.compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t"}}

    graph.invoke({}, config)  # fresh: the first pauses
    (first,) = graph.get_state(config).interrupts
    graph.invoke(Command(resume={first.id: "one"}), config)  # by id: the second pauses
    graph.invoke(Command(resume="two"), config)  # a plain value answers the second

    assert observed == [
        ("first", True, True),
        ("first", False, False),
        ("second", False, True),  # an answer was saved: "may return", and it pauses
        ("first", False, False),
        ("second", False, False),
    ]
    assert graph.get_state(config).values["seen"] == ["one", "two"]
    assert seams.interrupt_will_pause({}) is False  # outside a task: no claim either way


def test_mark_invalid_resume_is_what_langgraph_checks() -> None:
    error = ValueError("bad answer")
    assert not is_invalid_resume(error)
    seams.mark_invalid_resume(error)
    assert is_invalid_resume(error)


def test_toolnode_takes_wrappers_and_has_the_parse_input_seam() -> None:
    """``ApprovalToolNode`` passes its gate as ``wrap_tool_call``/``awrap_tool_call`` and
    refines ``ToolNode._parse_input`` (langgraph-prebuilt 1.1.x)."""
    parameters = inspect.signature(ToolNode.__init__).parameters
    assert "wrap_tool_call" in parameters and "awrap_tool_call" in parameters
    assert callable(getattr(ToolNode, "_parse_input", None))
    assert list(inspect.signature(ToolNode._parse_input).parameters) == ["self", "input"]


def test_a_missing_seam_fails_at_import_naming_the_range(monkeypatch: Any) -> None:
    import importlib
    import sys

    import langgraph.errors

    monkeypatch.delattr(langgraph.errors, "_mark_invalid_resume")
    monkeypatch.delitem(sys.modules, "aais_langgraph.gate.seams")
    try:
        importlib.import_module("aais_langgraph.gate.seams")
    except ImportError as error:
        assert "langgraph >=1.2,<1.3" in str(error)
    else:  # pragma: no cover
        raise AssertionError("a missing seam imported silently")
    finally:
        monkeypatch.undo()
        sys.modules["aais_langgraph.gate.seams"] = seams


def test_the_latest_interrupt_writes_of_a_sqlite_saver_are_those_get_state_reports() -> None:
    """One query over ``SqliteSaver``'s tables finds exactly the interrupts ``get_state``
    reports: a paused thread's, none for one answered or edited past its interrupt."""
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    def node(state: State) -> State:
        return {"seen": [interrupt({"ask": len(state.get("seen") or [])})]}

    builder = StateGraph(State)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    saver = SqliteSaver(sqlite3.connect(":memory:", check_same_thread=False))
    graph = builder.compile(checkpointer=saver)
    configs: dict[str, Any] = {t: {"configurable": {"thread_id": t}} for t in ("a", "b", "c")}
    for config in configs.values():
        graph.invoke({}, config)
    graph.invoke(Command(resume="answered"), configs["b"])
    graph.update_state(configs["c"], {"seen": ["edited"]})

    found = [
        (thread_id, [(item.id, item.value) for item in value])
        for thread_id, value in seams.latest_interrupt_writes(saver) or ()
    ]

    reported = [
        (thread_id, [(item.id, item.value) for item in graph.get_state(config).interrupts])
        for thread_id, config in configs.items()
    ]
    assert found == [entry for entry in reported if entry[1]]
    assert [thread_id for thread_id, _ in found] == ["a"]
    assert seams.latest_interrupt_writes(InMemorySaver()) is None


_WRITES = ["start", "start elsewhere", "answer", "edit", "delete", "rewind", "unrelated", "vacuum"]
_OPS = st.lists(
    st.tuples(
        st.sampled_from(_WRITES),
        st.integers(0, 3),
        st.booleans(),
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=_OPS)
@example(ops=[("start", 0, True), ("start", 1, True), ("delete", 0, True)])  # gone below the last
@example(ops=[("start", 0, True), ("start", 1, True), ("rewind", 0, False), ("start", 2, True)])
@example(ops=[("start", 0, True), ("start", 1, True), ("answer", 0, True)])  # a write replaced
@example(ops=[("start", 0, True), ("start", 1, True), ("delete", 0, False), ("vacuum", 0, True)])
def test_the_interrupt_rows_read_after_writes_are_those_a_first_read_finds(
    ops: list[tuple[str, int, bool]],
) -> None:
    """After any writes, by this connection or another (pauses, answers, edits, deleted
    threads, a deleted newest checkpoint whose row id is given again, another table's
    write, a VACUUM that renumbers rows), with or without a read between them, what a
    saver reads again is what a saver that never read the file finds in its one query."""
    import sqlite3
    import tempfile
    from pathlib import Path

    from langgraph.checkpoint.sqlite import SqliteSaver

    def node(state: State) -> State:
        first = interrupt({"ask": 1})
        return {"seen": [first, interrupt({"ask": 2})]}  # the second replaces the first's write

    builder = StateGraph(State)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "checkpoints.db"
        with (
            contextlib.closing(sqlite3.connect(path, check_same_thread=False)) as mine,
            contextlib.closing(sqlite3.connect(path, check_same_thread=False)) as theirs,
        ):
            saver, elsewhere = SqliteSaver(mine), SqliteSaver(theirs)
            saver.setup()
            graph, other = (
                builder.compile(checkpointer=saver),
                builder.compile(checkpointer=elsewhere),
            )
            assert seams.latest_interrupt_rows(saver) == []
            for op, thread, read in ops:
                config: Any = {"configurable": {"thread_id": f"t{thread}"}}
                if op == "start":
                    graph.invoke({}, config)
                elif op == "start elsewhere":
                    other.invoke({}, config)
                elif op == "answer" and graph.get_state(config).interrupts:
                    graph.invoke(Command(resume=f"answer {thread}"), config)
                elif op == "edit" and graph.get_state(config).values:
                    graph.update_state(config, {"seen": ["edited"]})
                elif op == "delete":
                    elsewhere.delete_thread(f"t{thread}")
                elif op == "rewind":
                    with theirs:
                        newest = "SELECT max(rowid) FROM checkpoints"
                        theirs.execute(f"DELETE FROM checkpoints WHERE rowid = ({newest})")
                elif op == "unrelated":
                    with theirs:
                        theirs.execute("CREATE TABLE IF NOT EXISTS other (at INTEGER)")
                        theirs.execute("INSERT INTO other VALUES (1)")
                elif op == "vacuum":
                    theirs.execute("VACUUM")
                if not read:
                    continue
                with contextlib.closing(sqlite3.connect(path, check_same_thread=False)) as fresh:
                    expected = seams.latest_interrupt_rows(SqliteSaver(fresh))
                assert expected is not None
                assert sorted(seams.latest_interrupt_rows(saver) or ()) == sorted(expected), op


def test_the_adapter_langgraph_builds_takes_the_answer_types_own_validator() -> None:
    # interrupt() builds TypeAdapter(response_schema) on every call; pydantic takes a
    # ready core schema and validator from the object's __pydantic_*__ attributes.
    from pydantic import TypeAdapter

    from aais_langgraph import ApprovalAuthority, InMemoryLedger
    from aais_langgraph.gate.response import AnswerType, response_json_schema

    requested = ApprovalAuthority(InMemoryLedger()).request(
        {"kind": "process.exec", "name": "shell.exec", "summary": "Run ls", "arguments": {}},
        origin={"harness": "tests", "session_id": "s1"},
    )
    seen: list[Any] = []
    answer_type = AnswerType(requested.request, seen.append)
    adapter = TypeAdapter(answer_type)
    assert adapter.validator is answer_type.__pydantic_validator__
    assert adapter.json_schema() == response_json_schema(requested.request)


def test_a_thread_view_from_the_checkpoint_leaves_out_interrupts_already_answered() -> None:
    # Two tasks pause in one step; answering one lets it finish while the other still
    # waits. Its interrupt write stays in the checkpoint, but it is no longer open.
    from aais_langgraph.threads.views import ThreadView, read_view

    class Two(TypedDict, total=False):
        a: str
        b: str

    def ask(key: str) -> Any:
        def node(state: Two) -> dict[str, Any]:
            return {key: interrupt(f"question {key}")}

        return node

    builder = StateGraph(Two)
    builder.add_node("a", ask("a"))
    builder.add_node("b", ask("b"))
    builder.add_edge(START, "a")
    builder.add_edge(START, "b")
    graph = builder.compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "two"}}
    first = graph.invoke({}, config)["__interrupt__"]
    assert len(first) == 2
    answered, waiting = first
    graph.invoke(Command(resume={answered.id: "yes"}), config)

    view = read_view(graph, config)
    assert view.open == {waiting.id: waiting.value}
    assert view.open == ThreadView.of(graph.get_state(config)).open


def test_a_task_reads_finished_once_its_writes_are_stored_and_not_after_an_error() -> None:
    """The root task of a namespace, and whether it finished, as the checkpoint's pending
    writes say: paused at its interrupt it has not; answered and returned it has (in the
    checkpoint it ran in, also once the next one is saved); failed after it was answered,
    it has not."""
    namespaces: list[str] = []

    def node(state: State) -> State:
        namespaces.append(get_config()["configurable"]["checkpoint_ns"])
        answer = interrupt("question")
        if answer == "fail":
            raise RuntimeError("failed after the answer")
        return {"seen": [answer]}

    builder = StateGraph(State)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    graph = builder.compile(checkpointer=InMemorySaver())
    for thread, answer, finished in (("ok", "yes", True), ("bad", "fail", False)):
        config: Any = {"configurable": {"thread_id": thread}}
        graph.invoke({}, config)
        task = seams.task_of_namespace(namespaces[-1])
        assert task is not None and namespaces[-1] == f"node:{task}"
        saver = graph.checkpointer
        assert seams.task_finished(saver.list(config), task) is False
        (pending,) = graph.get_state(config).interrupts
        with contextlib.suppress(RuntimeError):
            graph.invoke(Command(resume={pending.id: answer}), config)
        assert seams.task_finished(saver.list(config), task) is finished
        assert seams.task_finished(saver.list(config), "another-task") is None
    assert seams.task_of_namespace("") is None
    assert seams.task_of_namespace("outer:t1|inner:t2") == "t1"

"""One process serving the deep agent (``deep_agent.py``), for the kill -9 tests.

Run as ``python -m tests.subagents.worker`` from the repository root with one JSON job
on stdin: ``db`` (a SQLite file holding the checkpoints and the ledger), ``effects``
(the effects log), ``markers`` (a folder), ``thread`` and ``mode``:

``start``   run the agent until it pauses on the mailer's ``send_email``
``resume``  answer it with ``kind`` (``approve`` or ``deny``): with the resume
            (``resume_with_decisions``), or with ``"channel": "record"`` recorded by
            the planner first and then resumed, as the asynchronous channels do
``edit``    ``edit_tool_call`` with ``{"to": EDITED}``, approved in the same action

``crash_at`` stops the process at one point, where it writes ``<markers>/<point>``
and waits to be killed:

``subagent_interrupt_saved``  the subagent's checkpoint holds its interrupt; the
                              parent's does not yet
``interrupt_saved``           the parent's checkpoint holds the interrupt

(At both, the worker first waits until the results of the tool calls that finished
beside the pause are stored: see :class:`Stored`.)
``after_decide``              (``channel`` record, or ``edit``) the answer is recorded;
                              the agent has not resumed
``before_record``             the resumed run's gate has the answer; its one write
                              (resolution, claim, resume work) has not happened
``after_record``              that write committed; the tool has not run
``in_action``                 ``send_email`` applied its effect and has not returned
``tool_writes_saved``         the subagent's checkpointer stored ``send_email``'s result
``checkpoint_saved``          the parent's final checkpoint is stored

The result is one JSON line on stdout.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage

from aais_langgraph import ThreadDriver, build_decision, resume_with_decisions
from aais_langgraph.protocol import ApprovalDecided
from aais_langgraph.tools import edit_tool_call
from tests.distributed.worker import HUMAN, INTERRUPT, Backend, open_backend, stop_here

from .deep_agent import EDITED, LOOK_UP_CALL_ID, SEND_CALL_ID, EffectLog, build_deep_agent

SIBLING_CALLS = (LOOK_UP_CALL_ID, "call_task_researcher", "call_take_note")
"""The tool calls that finish beside the pause: the mailer's ``look_up``, the parent's
``task`` for the researcher and its ``take_note``."""
SIBLINGS_WAIT = 30.0


def config(job: dict[str, Any]) -> dict[str, Any]:
    return {"configurable": {"thread_id": job["thread"]}}


def arm(job: dict[str, Any], backend: Backend) -> None:
    """Install the crash hooks on the checkpointer and the authority."""
    point = job.get("crash_at")
    saver, authority = backend.saver, backend.authority
    put_writes, put = saver.put_writes, saver.put
    stored = Stored()

    def writes_hook(config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        namespace = str(config["configurable"].get("checkpoint_ns", ""))
        interrupted = any(channel == INTERRUPT for channel, _ in writes)
        if namespace == "" and interrupted and point == "subagent_interrupt_saved":
            stored.wait_for_siblings()
            stop_here(job, point)
        put_writes(config, writes, task_id, task_path)
        stored.note(namespace, task_id, writes, interrupted)
        if namespace == "" and interrupted and point == "interrupt_saved":
            stored.wait_for_siblings()
            stop_here(job, point)
        if point == "tool_writes_saved" and namespace and _answers(writes, SEND_CALL_ID):
            stop_here(job, point)

    def put_hook(config: Any, checkpoint: Any, *args: Any, **kwargs: Any) -> Any:
        saved = put(config, checkpoint, *args, **kwargs)
        namespace = str(config["configurable"].get("checkpoint_ns", ""))
        if point == "checkpoint_saved" and namespace == "" and stored.parent_done:
            stop_here(job, point)
        return saved

    saver.put_writes = writes_hook
    saver.put = put_hook
    if point == "after_decide":
        decide = authority.decide

        def decide_then_stop(*args: Any, **kwargs: Any) -> Any:
            resolved = decide(*args, **kwargs)
            stop_here(job, point)
            return resolved

        authority.decide = decide_then_stop  # type: ignore[method-assign]
    if point in ("before_record", "after_record"):
        record, planner_decide = authority.decide_claiming, authority.decide
        deciding = threading.local()

        def decide_outside(*args: Any, **kwargs: Any) -> Any:
            deciding.active = True
            try:
                return planner_decide(*args, **kwargs)
            finally:
                deciding.active = False

        def record_and_stop(*args: Any, **kwargs: Any) -> Any:
            handed = kwargs.get("actor") is not None and not getattr(deciding, "active", False)
            if handed and point == "before_record":
                stop_here(job, point)
            recorded = record(*args, **kwargs)
            if handed and point == "after_record":
                stop_here(job, point)
            return recorded

        authority.decide = decide_outside  # type: ignore[method-assign]
        authority.decide_claiming = record_and_stop  # type: ignore[method-assign]


class Stored:
    """What the checkpointer stored so far in this run (the hooks note each write), so a
    crash point waits for the writes of the tool calls that finished beside the pause:
    LangGraph stores them in the background, and a kill before that re-runs them (an
    ungated tool is at least once; the gated one is what the approval keeps at most once)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.answered: set[str] = set()
        self.subagent_interrupt = False
        self.parent_done = False
        """The parent's final answer is stored (its next checkpoint ends the run)."""

    def note(self, namespace: str, task_id: str, writes: Any, interrupted: bool) -> None:
        with self.lock:
            if namespace and interrupted:
                self.subagent_interrupt = True
            self.answered.update(call for call in SIBLING_CALLS if _answers(writes, call))
            self.parent_done = self.parent_done or (namespace == "" and _parent_done(writes))

    def wait_for_siblings(self) -> None:
        deadline = time.monotonic() + SIBLINGS_WAIT
        while time.monotonic() < deadline:
            with self.lock:
                if self.subagent_interrupt and self.answered == set(SIBLING_CALLS):
                    return
            time.sleep(0.01)
        raise SystemExit("the sibling tool calls' writes were never stored")


def _messages(writes: Any) -> Iterator[Any]:
    for channel, value in writes:
        if channel == "messages":
            yield from value if isinstance(value, list) else [value]


def _parent_done(writes: Any) -> bool:
    return any(
        isinstance(message, AIMessage) and str(message.content).startswith("parent: done.")
        for message in _messages(writes)
    )


def _answers(writes: Any, call_id: str) -> bool:
    """Whether ``writes`` hold the result of tool call ``call_id``."""
    return any(
        isinstance(message, ToolMessage) and message.tool_call_id == call_id
        for message in _messages(writes)
    )


def build(job: dict[str, Any], backend: Backend) -> Any:
    def in_action() -> None:
        stop_here(job, "in_action")

    return build_deep_agent(
        EffectLog(job["effects"]), backend.saver, authority=backend.authority, in_action=in_action
    )


def act(job: dict[str, Any], agent: Any, backend: Backend) -> Any:
    mode = job["mode"]
    if mode == "start":
        agent.invoke({"messages": [("user", "Email Bob and research X")]}, config(job))
        return [{"interrupt_id": i.id, "value": i.value} for i in _interrupts(agent, job)]
    [interrupt] = _interrupts(agent, job)
    lease_ttl = float(job.get("lease_ttl", 60.0))
    if mode == "edit":
        request = interrupt.value["request"]
        successor = edit_tool_call(
            agent,
            config(job),
            request["id"],
            {"to": EDITED},
            actor=HUMAN,
            authority=backend.authority,
            action_digest=request["action_digest"],
            approve=True,
            lease_ttl=lease_ttl,
        )
        return {"successor": successor.request.id}
    decided = build_decision(interrupt.value, decision=job["kind"], scope="once", actor=HUMAN)
    if job.get("channel") == "record":
        driver = ThreadDriver(agent, backend.authority, lease_ttl=lease_ttl)
        planner = driver.planner
        answers = planner.parse(job["thread"], [ApprovalDecided.from_data(decided.to_json())])

        def plan(view: Any) -> tuple[dict[str, Any], list[Any]]:
            results, resume = planner.record(answers, view, HUMAN)
            return resume, results

        [resolved] = driver.drive(config(job), plan)
    else:
        [resolved] = resume_with_decisions(
            agent,
            config(job),
            [decided],
            actor=HUMAN,
            authority=backend.authority,
            lease_ttl=lease_ttl,
        )
    return {"outcome": resolved.resolution.outcome}


def _interrupts(agent: Any, job: dict[str, Any]) -> list[Any]:
    return list(agent.get_state(config(job)).interrupts)


def main() -> None:
    job = json.loads(sys.stdin.readline())
    Path(job["markers"]).mkdir(parents=True, exist_ok=True)
    with open_backend(job["db"], setup=True) as backend:
        arm(job, backend)
        agent = build(job, backend)
        try:
            result: Any = {"ok": act(job, agent, backend)}
        except Exception as error:  # reported to the test, which decides what is acceptable
            result = {"error": type(error).__name__, "message": str(error)[:500]}
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()

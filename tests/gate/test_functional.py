"""``request_approval`` inside the functional API (``@entrypoint`` and ``@task``)."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.func import entrypoint, task
from langgraph.types import Command
from pydantic import ValidationError

from aais_langgraph import request_approval, resume_with_decisions

from .support import (
    HUMAN,
    Backend,
    Effects,
    config,
    decide,
    paused,
    requested_of,
    shell_action,
    tampered,
)


def workflow(backend: Backend, effects: Effects) -> Any:
    @task
    def gated(command: str) -> str:
        resolved = request_approval(shell_action(command), authority=backend.authority)
        if not resolved.approved:
            return resolved.resolution.outcome
        return effects.run(command)

    @entrypoint(checkpointer=backend.saver)
    def run(command: str) -> dict[str, Any]:
        first = gated(command).result()
        # A gate directly in the entrypoint, after the task.
        second = request_approval(shell_action(command + " again"), authority=backend.authority)
        if second.approved:
            effects.run(command + " again")
        return {"task": first, "entrypoint": second.resolution.outcome}

    return run


def test_a_task_and_the_entrypoint_each_ask(backend: Backend, effects: Effects) -> None:
    run = workflow(backend, effects)
    [pending] = paused(run.invoke("ls", config("t-f")))
    requested = requested_of(pending)
    assert requested.request.action.arguments["command"] == "ls"
    assert (
        "|" in backend.authority.get_stored_request(requested.request.id).context["checkpoint_ns"]
    )

    with pytest.raises(ValidationError):
        run.invoke(Command(resume={pending.id: tampered(decide(requested))}), config("t-f"))
    [resolved] = resume_with_decisions(
        run, config("t-f"), decide(requested), actor=HUMAN, authority=backend.authority
    )
    assert resolved.approved
    assert effects.ran == ["ls"]

    [second] = run.get_state(config("t-f")).interrupts
    requested_second = requested_of(second)
    assert requested_second.request.action.arguments["command"] == "ls again"
    [denied] = resume_with_decisions(
        run,
        config("t-f"),
        decide(requested_second, "deny"),
        actor=HUMAN,
        authority=backend.authority,
    )

    assert denied.resolution.outcome == "denied"
    assert effects.ran == ["ls"]  # the task's result was saved: it did not run again
    assert run.get_state(config("t-f")).values == {"task": "ran ls", "entrypoint": "denied"}

"""Builders for authority tests: the conformance fixtures, actions, requests and decisions."""

from __future__ import annotations

import copy
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import aais

from aais_langgraph.authority import ApprovalAuthority
from aais_langgraph.protocol import ApprovalRequested, build_decision

CONFORMANCE = Path(__file__).resolve().parents[1] / "conformance"

START = datetime(2026, 8, 30, 18, 0, tzinfo=timezone.utc)
"""The moment the conformance request was created; the fake clock starts here."""

SECRET = "sk-live-4f9a1c7e2b8d4a6f9e3c1b7a5d2e8f40"
"""A secret-looking value that must never be echoed by an error or a resolution."""

HUMAN = {"id": "user_alex", "type": "human", "display_name": "Alex"}

SCOPED_CHOICES: list[dict[str, Any]] = [
    {"decision": "approve", "scope": "once", "label": "Allow once"},
    {
        "decision": "approve",
        "scope": "session",
        "label": "Allow matching checks for this session",
        "scope_constraints": {"command_prefix": "node --check "},
    },
    {"decision": "deny", "scope": "once", "label": "Deny"},
]


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now

    def set(self, moment: datetime) -> None:
        self.now = moment


def load_conformance(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CONFORMANCE / name).read_text(encoding="utf-8"))
    return data


def action(command: str = "node --check script.js", **extra: Any) -> dict[str, Any]:
    """A shell action like the conformance fixture's, with a chosen command."""
    arguments = {"command": command, **extra.pop("arguments", {})}
    return {
        "kind": "process.exec",
        "name": "shell.exec",
        "summary": "Run the JavaScript syntax check",
        "arguments": arguments,
        **extra,
    }


def origin(session_id: str = "s-1") -> dict[str, Any]:
    return {"harness": "tests", "session_id": session_id}


def new_request(
    authority: ApprovalAuthority,
    *,
    command: str = "node --check script.js",
    session_id: str = "s-1",
    choices: list[dict[str, Any]] | None = None,
    expires_in: float = 600.0,
    request_id: str | None = None,
    thread_id: str | None = None,
    **action_extra: Any,
) -> ApprovalRequested:
    """Raise and store a request through ``authority.request``."""
    return authority.request(
        action(command, **action_extra),
        origin=origin(session_id),
        choices=SCOPED_CHOICES if choices is None else choices,
        expires_in=timedelta(seconds=expires_in),
        request_id=request_id,
        thread_id=thread_id,
    )


def decision(
    requested: ApprovalRequested,
    kind: str = "approve",
    scope: str = "once",
    **changes: Any,
) -> dict[str, Any]:
    """An ``approval.decided`` envelope (plain JSON) answering ``requested``.

    ``changes`` overwrite members of ``decision`` (``action_digest=...`` forges it).
    """
    envelope = build_decision(
        requested, decision=kind, actor=HUMAN, scope=scope, decided_at=requested.request.created_at
    ).to_json()
    envelope["decision"].update(changes)
    return envelope


def mutated(document: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A deep copy of ``document`` with the dotted ``path`` set to ``value``."""
    copied = copy.deepcopy(document)
    *parents, last = path.split(".")
    target = copied
    for key in parents:
        target = target[key]
    target[last] = value
    return copied


def assert_spec_valid(envelope: dict[str, Any]) -> None:
    """The reference library accepts the envelope (invariant 10)."""
    aais.validate(envelope)

"""The public surface: the top levels hold what a user writes first; every other public
name stays importable from the module of its layer."""

from __future__ import annotations

import importlib

import pytest

import aais_agui
import aais_langgraph

IN_THEIR_LAYER = {
    "aais_langgraph.gate": [
        "AUTHORITY_KEY",
        "approval_key",
        "reconcile_execution",
        "unknown_executions",
    ],
    "aais_langgraph.threads": [
        "ThreadView",
        "stranded_threads",
        "waiting_resumes",
    ],
    "aais_langgraph.authority": ["AskEveryTime", "explain_constraints", "load_authority_key"],
    "aais_langgraph.protocol": [
        "Action",
        "Actor",
        "ApprovalDecided",
        "ApprovalResolved",
        "ApprovalSnapshot",
        "Choice",
        "Origin",
        "Risk",
        "action_digest",
        "build_request",
        "parse_envelope",
    ],
    "aais_agui.mapping": [
        "APPROVAL_REASON",
        "METADATA_KEY",
        "TOOL_CALL_EXTENSION",
        "TOOL_CALL_REASON",
        "decided_response_schema",
    ],
    "aais_agui.resume_plan": ["ResumeRejected", "plan_resume"],
    "aais_agui.background": ["BackgroundResumes", "aresume_recorded"],
    "aais_agui.http.sse": ["presenter_snapshot"],
    "aais_agui.scheduler": ["PeriodicJob", "Scheduler"],
    "aais_agui.watcher": ["DecisionWatcher"],
}


@pytest.mark.parametrize("package", [aais_langgraph, aais_agui], ids=lambda p: p.__name__)
def test_every_top_level_name_resolves(package: object) -> None:
    for name in package.__all__:  # type: ignore[attr-defined]
        assert getattr(package, name) is not None, name


@pytest.mark.parametrize("module_name", sorted(IN_THEIR_LAYER))
def test_names_off_the_top_level_live_in_their_module(module_name: str) -> None:
    module = importlib.import_module(module_name)
    for name in IN_THEIR_LAYER[module_name]:
        assert name in getattr(module, "__all__", [name]), name
        assert getattr(module, name) is not None
        assert name not in aais_langgraph.__all__ and name not in aais_agui.__all__


def test_what_drives_threads_lives_in_threads_not_in_the_gate() -> None:
    import aais_langgraph.gate as gate
    import aais_langgraph.threads as threads

    for name in ("pending_approvals", "Cancellation", "ThreadDriver", "resume_with_decisions"):
        assert name in threads.__all__, name
        assert not hasattr(gate, name), name


def test_the_first_hour_names_are_at_the_top_level() -> None:
    first_hour = {
        "ApprovalAuthority",
        "SqliteLedger",
        "InMemoryLedger",
        "request_approval",
        "arequest_approval",
        "approval_node",
        "requires_approval",
        "resume_with_decisions",
        "aresume_with_decisions",
        "pending_approvals",
        "build_decision",
        "Cancellation",
    }
    assert first_hour <= set(aais_langgraph.__all__)
    assert {"create_app", "bearer_token_authenticator"} <= set(aais_agui.__all__)

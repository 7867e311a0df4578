"""Without prometheus-client and opentelemetry the library works the same, and the server
without prometheus-client; only asking for metrics names the extra. Each runs in a fresh
interpreter whose import system refuses the packages."""

from __future__ import annotations

import subprocess
import sys
import textwrap

PRELUDE = """
import importlib.abc, sys

class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in REFUSED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Refuse())
"""


def run_without(refused: tuple[str, ...], body: str) -> subprocess.CompletedProcess[str]:
    script = f"REFUSED = {refused!r}\n" + PRELUDE + textwrap.dedent(body)
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )


def test_approvals_are_requested_decided_and_resumed_without_either_package() -> None:
    done = run_without(
        ("prometheus_client", "opentelemetry"),
        """
        import sys
        from langgraph.checkpoint.memory import InMemorySaver
        from langgraph.graph import START, StateGraph
        from typing_extensions import TypedDict

        from aais_langgraph import (
            ApprovalAuthority, build_decision, requires_approval, resume_with_decisions,
        )

        class State(TypedDict, total=False):
            done: bool

        action = {"kind": "k", "name": "n", "summary": "s", "arguments": {"path": "/x"}}
        node = requires_approval(lambda state: action)(lambda state: {"done": True})
        builder = StateGraph(State)
        builder.add_node("node", node)
        builder.add_edge(START, "node")
        graph = builder.compile(checkpointer=InMemorySaver())
        authority = ApprovalAuthority()
        config = {"configurable": {"thread_id": "t-1", "aais_authority": authority}}
        paused = graph.invoke({}, config)
        [interrupt] = paused["__interrupt__"]
        decided = build_decision(interrupt.value, decision="approve",
                                 actor={"id": "a", "type": "human"})
        [resolved] = resume_with_decisions(
            graph, config, decided, actor={"id": "a", "type": "human"}, authority=authority
        )
        assert resolved.approved
        assert graph.get_state(config).values["done"] is True
        loaded = {"prometheus_client", "opentelemetry"} & set(sys.modules)
        assert not loaded, loaded
        print("ok")
        """,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_the_server_runs_without_prometheus_and_metrics_name_their_extra() -> None:
    done = run_without(
        ("prometheus_client",),
        """
        import sys
        from fastapi.testclient import TestClient
        from langgraph.checkpoint.memory import InMemorySaver
        from langgraph.graph import START, StateGraph
        from typing_extensions import TypedDict

        from aais_agui import bearer_token_authenticator, create_app
        from aais_langgraph import ApprovalAuthority

        class State(TypedDict, total=False):
            done: bool

        builder = StateGraph(State)
        builder.add_node("node", lambda state: {"done": True})
        builder.add_edge(START, "node")
        authority = ApprovalAuthority()
        authenticate = bearer_token_authenticator({"t": {"id": "a", "type": "human"}})
        app = create_app(
            builder.compile(checkpointer=InMemorySaver()),
            authority=authority,
            authenticate=authenticate,
        )
        with TestClient(app) as client:
            headers = {"Authorization": "Bearer t"}
            assert client.get("/approvals/snapshot", headers=headers).status_code == 200
            assert client.get("/metrics", headers=headers).status_code == 404
        try:
            create_app(builder.compile(checkpointer=InMemorySaver()), authority=authority,
                       authenticate=authenticate, metrics=True)
        except ImportError as error:
            assert "aais-langgraph[metrics]" in str(error), str(error)
        else:
            raise AssertionError("metrics=True worked without prometheus-client")
        assert "prometheus_client" not in sys.modules
        print("ok")
        """,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"

"""What ``aais-agui serve`` and ``demo`` say: one line for a mistyped graph (and no files),
the checkpointer truthfully, the local-development warning once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver

from aais_agui.cli import compiled_graph, import_graph
from demo.support import running

GRAPHS = Path(__file__).resolve().parents[1] / "demo"  # tiny_graph.py


def serve(spec: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    db = cwd / "app.db"
    command = [sys.executable, "-m", "aais_agui.cli", "serve", spec, "--db", str(db)]
    return subprocess.run(
        [*command, "--local-dev-login", "--port", "0"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ("tiny_grpah:builder", "no module named 'tiny_grpah'"),
        ("tiny_graph:buildr", "'tiny_graph' has no attribute 'buildr'"),
        ("tiny_graph:builder.nodes.nope", "'tiny_graph.builder.nodes' has no attribute 'nope'"),
        ("broken_graph:graph", "importing 'broken_graph' failed: No module named"),
    ],
)
def test_a_mistyped_graph_is_one_line_and_leaves_no_files(
    spec: str, said: str, tmp_path: Path
) -> None:
    (tmp_path / "tiny_graph.py").write_text((GRAPHS / "tiny_graph.py").read_text())
    (tmp_path / "broken_graph.py").write_text("import a_dependency_not_installed\n")
    before = {path.name for path in tmp_path.iterdir()}
    done = serve(spec, tmp_path)
    assert done.returncode == 1
    assert said in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr and "extras" not in done.stderr
    assert {path.name for path in tmp_path.iterdir()} - before <= {"__pycache__"}


def factory(*, checkpointer: Any) -> Any:
    import tiny_graph

    return tiny_graph.builder.compile(checkpointer=checkpointer)


@pytest.fixture
def tiny(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.chdir(GRAPHS)
    monkeypatch.setattr(sys, "path", list(sys.path))  # import_graph adds the working directory
    return import_graph("tiny_graph:builder")


def test_a_factory_using_the_servers_checkpointer_is_not_said_to_have_its_own(
    tiny: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    saver = InMemorySaver()
    assert compiled_graph(factory, saver, "graphs:factory").checkpointer is saver
    assert capsys.readouterr().out == ""


def test_a_graph_with_its_own_checkpointer_says_where_its_checkpoints_stay(
    tiny: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    own = InMemorySaver()
    graph = compiled_graph(tiny.compile(checkpointer=own), InMemorySaver(), "graphs:graph")
    assert graph.checkpointer is own
    [line] = capsys.readouterr().out.splitlines()
    assert "own checkpointer (InMemorySaver)" in line and "--db holds only the ledger" in line


def test_a_graph_compiled_with_a_sync_saver_is_refused_in_one_line(
    tiny: Any, tmp_path: Path
) -> None:
    with SqliteSaver.from_conn_string(str(tmp_path / "c.db")) as saver:
        graph = tiny.compile(checkpointer=saver)
        with pytest.raises(SystemExit, match=r"SqliteSaver is synchronous.*AsyncSqliteSaver"):
            compiled_graph(graph, InMemorySaver(), "graphs:graph")


def test_the_demo_prints_its_local_development_warning_once(tmp_path: Path) -> None:
    args = ["demo", "--port", "0", "--db", str(tmp_path / "demo.db")]
    with running([*args, "--workspace", str(tmp_path / "ws")], cwd=tmp_path) as server:
        pass
    assert server.log().count("LOCAL DEVELOPMENT AUTHENTICATOR IN USE") == 1, server.log()


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (["--token-env", "AAIS_TEST_TOKEN_NEVER_SET"], "the variable is empty or unset"),
        (["--local-dev-login", "--access-policy", "missing.toml"], "missing.toml"),
        (["--local-dev-login", "--cedar-policies", "missing.cedar"], "missing.cedar"),
        (["--local-dev-login", "--access-policy", "hooks.toml"], "secret_env"),
    ],
)
def test_a_bad_option_is_one_line_and_leaves_no_files(
    options: list[str], said: str, tmp_path: Path
) -> None:
    (tmp_path / "tiny_graph.py").write_text((GRAPHS / "tiny_graph.py").read_text())
    (tmp_path / "hooks.toml").write_text(
        '[[webhooks]]\nname = "ops"\nurl = "http://127.0.0.1:9/hook"\n'
        'secret_env = "AAIS_TEST_TOKEN_NEVER_SET"\n'
    )
    before = {path.name for path in tmp_path.iterdir()}
    command = [sys.executable, "-m", "aais_agui.cli", "serve", "tiny_graph:builder", "--port", "0"]
    done = subprocess.run(
        [*command, "--db", str(tmp_path / "app.db"), *options],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={k: v for k, v in os.environ.items() if k != "AAIS_TEST_TOKEN_NEVER_SET"},
    )
    assert done.returncode == 1
    assert said in done.stderr or said in done.stdout, done
    assert "Traceback" not in done.stderr
    assert len((done.stdout + done.stderr).strip().splitlines()) == 1, done
    assert {path.name for path in tmp_path.iterdir()} - before <= {"__pycache__"}


GATED_BY_ITS_OWN_LEDGER = """
from typing import TypedDict

from langgraph.graph import END, START, StateGraph

from aais_langgraph import ApprovalAuthority, SqliteLedger, request_approval

authority = ApprovalAuthority(SqliteLedger("approvals.db"))


class State(TypedDict, total=False):
    result: str


def delete_report(state: State) -> State:
    action = {"kind": "fs.delete", "name": "rm", "summary": "Delete", "arguments": {"p": "/x"}}
    return {"result": request_approval(action, authority=authority).resolution.outcome}


builder = StateGraph(State)
builder.add_node("delete_report", delete_report)
builder.add_edge(START, "delete_report")
builder.add_edge("delete_report", END)
"""


def test_a_graph_whose_gates_use_another_ledger_is_refused_at_start_naming_both(
    tmp_path: Path,
) -> None:
    (tmp_path / "app.py").write_text(GATED_BY_ITS_OWN_LEDGER)
    command = [sys.executable, "-m", "aais_agui.cli", "serve", "app:builder", "--port", "0"]
    done = subprocess.run(
        [*command, "--db", "aais-agui.db", "--local-dev-login"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    refusal = done.stderr.strip().splitlines()[-1]
    assert refusal.startswith("aais-agui: app:builder: authority: a gate records")
    gates, served = tmp_path.resolve() / "approvals.db", tmp_path.resolve() / "aais-agui.db"
    assert f"in {gates}, but the server reads {served}" in refusal
    assert "Traceback" not in done.stderr and "serving" not in done.stdout

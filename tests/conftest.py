"""Session-wide fixtures shared by every test folder.

``postgres_cluster`` starts one throwaway PostgreSQL server (``initdb`` + ``pg_ctl``
in a temp dir, loopback only) the first time a test asks for it, and deletes it at
the end of the session. Without the server binaries it fails with instructions;
``AAIS_ALLOW_NO_POSTGRES=1`` turns that into a skip (never set in CI).

``pytest_terminal_summary`` prints the hostile-input table (``tests/hostile/report.py``)
whenever any suite recorded into it, whichever folders ran, and ``pytest_sessionfinish``
fails a run that passed when a row is not 0 (:func:`hostile.report.failing_rows`: what
this run recorded, so a partial run judges only what ran). ``AAIS_HOSTILE_REPORT``
names another file for the table's JSON than ``artifacts/hostile/report.json``.

Tests that start other programs or many processes (a PostgreSQL cluster, Chromium,
Node clients, kill -9 workers, ``langgraph dev``, fresh virtualenvs), and the files
that take longest otherwise, are marked ``slow`` (:data:`SLOW`): ``python -m pytest
-m "not slow"`` is the quick subset.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hostile.report import failing_rows, render, write_json
from support.pg_cluster import (
    ALLOW_NO_POSTGRES,
    NO_SERVER_HELP,
    PostgresCluster,
    find_bindir,
    fresh_schema_url,
)

# tests/aae_bridge needs the AAE SDK, which lives in its own environment (.venv-aae);
# tests/test_aae_bridge.py runs that folder there.
collect_ignore = [] if importlib.util.find_spec("aae") else ["aae_bridge"]

ROOT = Path(__file__).resolve().parent.parent

SLOW = (
    # what starts other programs or many processes
    "distributed/",
    "langgraph_ui/",
    "postgres/",
    "server_blocking/",
    "demo/test_browser",
    "copilotkit/",
    "mcp/",
    "test_aae_bridge.py",
    "test_newcomer.py",
    "test_notebooks.py",
    "test_wheel.py",
    "agui/test_node_client",
    "agui/test_client_js.py",
    "agui/test_frontend_tools_node.py",
    "agui/test_serving_page",
    "webhooks/test_crash.py",
    "slack_app/test_crash.py",
    "subagents/test_kill9.py",
    "subagents/test_served.py",
    "subagents/test_langgraph_server.py",
    # the files that take longest otherwise (servers per test, races, long properties)
    "agui/test_answer_schema.py",
    "agui/test_authorization_matrix.py",
    "agui/test_core_only_import.py",
    "agui/test_frontend_tools.py",
    "agui/test_inbox_page_requests.py",
    "agui/test_without_observability.py",
    "agui/transports/test_jwt_login.py",
    "agui/transports/test_sign_in.py",
    "agui/transports/test_stream_login.py",
    "agui/transports/test_websocket.py",
    "authority/test_race.py",
    "authority/test_state_machine.py",
    "authority/test_tamper.py",
    "cli/test_help.py",
    "cli/test_serve_messages.py",
    "cli/test_serve_metrics.py",
    "demo/test_cli.py",
    "demo/test_cli_integrity.py",
    "demo/test_cli_options.py",
    "demo/test_watcher.py",
    "gate/test_race.py",
    "gate/test_unknown_listing.py",
    "hostile/test_agui.py",
    "hostile/test_headers.py",
    "ledger/test_concurrency.py",
    "ledger/test_model.py",
    "ledger/test_retention.py",
    "ledger/test_sqlite.py",
    "presenter/test_hostile.py",
    "presenter/test_presenter.py",
    "presenter/test_served.py",
    "protocol/test_bad_inputs.py",
    "protocol/test_canonical_fast_path.py",
    "protocol/test_digest_differential.py",
    "threads/test_channel_matrix.py",
    "threads/test_restart.py",
    "threads/test_resume_work.py",
    "threads/test_view_selection.py",
    "webhooks/test_delivery.py",
    "webhooks/test_email.py",
    "webhooks/test_follow_ups.py",
    "webhooks/test_reaching_people_page.py",
    "webhooks/test_serve.py",
    "slack_app/test_interactions.py",
    "slack_app/test_sender.py",
    "slack_app/test_serve.py",
    "slack_app/test_quorum.py",
    "slack_app/test_payload_property.py",
    "subagents/test_deep_agent.py",
    "subagents/test_interrupt_on.py",
    "subagents/test_approval_deep_agent.py",
)
"""Test paths (under ``tests/``) marked ``slow``: what starts other programs or processes."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    tests = ROOT / "tests"
    for item in items:
        where = item.path.relative_to(tests).as_posix() if item.path.is_relative_to(tests) else ""
        if any(where.startswith(prefix) for prefix in SLOW):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[PostgresCluster]:
    """A server started for this test session and deleted afterwards (database ``aais``)."""
    bindir = find_bindir()
    if bindir is None:
        if ALLOW_NO_POSTGRES:
            pytest.skip(NO_SERVER_HELP)
        pytest.fail(NO_SERVER_HELP, pytrace=False)
    cluster = PostgresCluster(bindir)
    try:
        cluster.start()
        cluster.create_database("aais")
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def postgres_url(postgres_cluster: PostgresCluster) -> str:
    """A connection URL whose tables land in a schema of their own, empty at the start."""
    return fresh_schema_url(postgres_cluster)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # A run whose tests passed still fails on a hostile-input row that is not 0.
    if exitstatus == pytest.ExitCode.OK and failing_rows():
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any) -> None:
    lines = render()
    if len(lines) <= 3:  # header, rule and total: nothing recorded
        return
    terminalreporter.section("hostile inputs (failed open, 5xx and double runs must be 0)")
    for line in lines:
        terminalreporter.write_line(line)
    for row in failing_rows():
        terminalreporter.write_line(f"FAILED hostile-input row: {row}", red=True, bold=True)
    report = os.environ.get("AAIS_HOSTILE_REPORT")
    write_json(Path(report) if report else ROOT / "artifacts" / "hostile" / "report.json")

"""``aais-agui serve --metrics`` / ``--metrics-port``: a real server process, scraped over HTTP."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from aais_agui import run_agent_input
from aais_langgraph import build_decision
from demo.support import JSON_HEADERS, agui_run, interrupts_of, running, wait_for

GRAPHS = Path(__file__).resolve().parents[1] / "demo"  # tiny_graph.py
TOKEN = {"Authorization": "Bearer s3cret"}


def serve_args(tmp_path: Path, *extra: str) -> list[str]:
    args = ["serve", "tiny_graph:make_graph", "--port", "0", "--db", str(tmp_path / "app.db")]
    return [*args, "--token-env", "AAIS_TEST_TOKEN", *extra]


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def approve_one(client: httpx.Client, thread_id: str) -> None:
    [interrupt] = interrupts_of(agui_run(client, run_agent_input(thread_id, text="delete it")))
    requested = interrupt["metadata"]["aais"]
    decided = build_decision(requested, decision="approve", actor={"id": "x", "type": "human"})
    response = client.post(
        f"/approvals/{requested['request']['id']}/decisions",
        content=json.dumps(decided.to_json()),
        headers=JSON_HEADERS,
    )
    assert response.status_code == 200, response.text


def test_metrics_are_not_served_unless_asked_for(tmp_path: Path) -> None:
    with running(serve_args(tmp_path), cwd=GRAPHS, env={"AAIS_TEST_TOKEN": "s3cret"}) as server:
        assert httpx.get(f"{server.url}metrics", headers=TOKEN).status_code == 404


def test_serve_metrics_is_behind_the_apis_login(tmp_path: Path) -> None:
    args = serve_args(tmp_path, "--metrics")
    with (
        running(args, cwd=GRAPHS, env={"AAIS_TEST_TOKEN": "s3cret"}) as server,
        httpx.Client(base_url=server.url, timeout=30, headers=TOKEN) as client,
    ):
        assert httpx.get(f"{server.url}metrics").status_code == 401
        approve_one(client, "t-metrics")
        scraped = samples(client.get("/metrics").text)
    decided = frozenset({("outcome", "approved"), ("channel", "http")})
    assert scraped[("aais_decisions_total", decided)] == 1
    assert scraped[("aais_ledger_readable", frozenset())] == 1


def test_metrics_port_serves_them_on_their_own_listener(tmp_path: Path) -> None:
    args = serve_args(tmp_path, "--metrics-port", "0")
    with running(args, cwd=GRAPHS, env={"AAIS_TEST_TOKEN": "s3cret"}) as server:
        line = wait_for(
            lambda: next((x for x in server.output if "metrics " in x), None),
            what="the metrics line",
        )
        found = re.search(r"(http://\S+/metrics)", line)
        assert found is not None, line
        scraped = samples(httpx.get(found.group(1), timeout=30).text)
        assert httpx.get(f"{server.url}metrics", headers=TOKEN).status_code == 404
    assert ("aais_pending_approvals", frozenset({("risk", "high")})) in scraped


def test_multiprocess_mode_reads_the_counters_from_the_directory(tmp_path: Path) -> None:
    folder = tmp_path / "prometheus"
    folder.mkdir()
    env = {"AAIS_TEST_TOKEN": "s3cret", "PROMETHEUS_MULTIPROC_DIR": str(folder)}
    with (
        running(serve_args(tmp_path, "--metrics"), cwd=GRAPHS, env=env) as server,
        httpx.Client(base_url=server.url, timeout=30, headers=TOKEN) as client,
    ):
        approve_one(client, "t-multiprocess")
        scraped = samples(client.get("/metrics").text)
    decided = frozenset({("outcome", "approved"), ("channel", "http")})
    assert scraped[("aais_decisions_total", decided)] == 1
    assert any(path.suffix == ".db" for path in folder.iterdir())

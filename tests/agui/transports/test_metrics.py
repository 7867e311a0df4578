"""The Prometheus endpoint of ``create_app(metrics=True)``, scraped over real HTTP on loopback."""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph.checkpoint.memory import InMemorySaver
from prometheus_client.parser import text_string_to_metric_families

from aais_agui import bearer_token_authenticator, create_app, run_agent_input
from aais_langgraph import ApprovalAuthority, build_decision
from aais_langgraph.authority.resolutions import resolution_envelope
from aais_langgraph.ledger import RESUME, SqliteLedger
from aais_langgraph.ledger.executions import claim_change
from aais_langgraph.ledger.outbox import retried_change
from aais_langgraph.ledger.records import dump_json
from aais_langgraph.ledger.resume_work import RESUME_BACKOFF
from aais_langgraph.observability import ApprovalMetrics
from aais_langgraph.protocol import ApprovalRequested, utc_now

from ..conftest import ALICE
from ..demo_graph import EffectLog, build_demo_graph
from ..http_support import agui_run, serve

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
AHEAD = 1000.0
"""How far ahead of the ledger the clock of the ages test runs: every age it reads is at
least this."""


@dataclass
class Site:
    url: str
    db: Path
    authority: ApprovalAuthority
    effects: EffectLog


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    folder = tmp_path_factory.mktemp("metrics")
    ledger = SqliteLedger(folder / "ledger.db", synchronous="NORMAL")
    ledger.setup()
    authority = ApprovalAuthority(ledger)
    effects = EffectLog(folder / "effects.db")
    graph = build_demo_graph(effects, InMemorySaver())
    app = create_app(
        graph,
        authority=authority,
        authenticate=bearer_token_authenticator({"alice-token": ALICE}),
        metrics=True,
    )
    with serve(app) as url:
        yield Site(url, folder / "ledger.db", authority, effects)


@pytest.fixture
def client(site: Site) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=site.url, headers={"Authorization": "Bearer alice-token"}, timeout=30
    ) as client:
        yield client


def scrape(client: httpx.Client) -> Samples:
    """Every sample of one scrape, by name and labels."""
    response = client.get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def pause(client: httpx.Client, path: str) -> tuple[str, dict[str, Any]]:
    """A run paused on one approval to delete ``path``: its thread and interrupt."""
    thread_id = f"thread_{uuid.uuid4().hex}"
    events = agui_run(client, "/agent", run_agent_input(thread_id, text=f"delete {path}"))
    [interrupt] = events[-1]["outcome"]["interrupts"]
    return thread_id, interrupt


def approval(interrupt: dict[str, Any], kind: str = "approve") -> dict[str, Any]:
    return build_decision(interrupt["metadata"]["aais"], decision=kind, actor=ALICE).to_json()


def request_of(interrupt: dict[str, Any]) -> dict[str, Any]:
    return dict(interrupt["metadata"]["aais"]["request"])


def test_metrics_need_authentication(site: Site) -> None:
    assert httpx.get(f"{site.url}/metrics").status_code == 401
    wrong = httpx.get(f"{site.url}/metrics", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401


def test_metrics_are_off_by_default(tmp_path: Path) -> None:
    authority = ApprovalAuthority(SqliteLedger(tmp_path / "ledger.db"))
    graph = build_demo_graph(EffectLog(tmp_path / "effects.db"), InMemorySaver())
    app = create_app(
        graph, authority=authority, authenticate=bearer_token_authenticator({"t": ALICE})
    )
    with serve(app) as url:
        response = httpx.get(f"{url}/metrics", headers={"Authorization": "Bearer t"})
    assert response.status_code == 404


def test_a_paused_run_is_a_pending_approval_of_its_risk(client: httpx.Client) -> None:
    before = scrape(client)
    _, interrupt = pause(client, "/srv/pending-report.txt")
    risk = request_of(interrupt)["risk"]["level"]

    after = scrape(client)

    assert value(after, "aais_pending_approvals", risk=risk) == (
        value(before, "aais_pending_approvals", risk=risk) + 1
    )
    assert value(after, "aais_ledger_readable") == 1


def test_an_approval_over_http_counts_a_decision_and_its_wait(
    client: httpx.Client, site: Site
) -> None:
    _, interrupt = pause(client, "/srv/http-approved.txt")
    risk = request_of(interrupt)["risk"]["level"]
    before = scrape(client)

    response = client.post(
        f"/approvals/{request_of(interrupt)['id']}/decisions", json=approval(interrupt)
    )
    assert response.status_code == 200

    after = scrape(client)
    decided = {"outcome": "approved", "channel": "http"}
    assert value(after, "aais_decisions_total", **decided) == (
        value(before, "aais_decisions_total", **decided) + 1
    )
    waited = {"risk": risk, "outcome": "approved"}
    assert value(after, "aais_resolution_seconds_count", **waited) == (
        value(before, "aais_resolution_seconds_count", **waited) + 1
    )
    assert value(after, "aais_pending_approvals", risk=risk) == (
        value(before, "aais_pending_approvals", risk=risk) - 1
    )


def test_an_identical_replay_is_not_counted_again(client: httpx.Client) -> None:
    _, interrupt = pause(client, "/srv/replayed.txt")
    body = approval(interrupt, "deny")
    url = f"/approvals/{request_of(interrupt)['id']}/decisions"
    assert client.post(url, json=body).status_code == 200
    before = scrape(client)

    assert client.post(url, json=body).status_code == 200

    decided = {"outcome": "denied", "channel": "http"}
    assert value(scrape(client), "aais_decisions_total", **decided) == value(
        before, "aais_decisions_total", **decided
    )


def test_an_answer_over_agui_counts_under_its_channel(client: httpx.Client) -> None:
    thread_id, interrupt = pause(client, "/srv/agui-denied.txt")
    before = scrape(client)

    entry = {
        "interruptId": interrupt["id"],
        "status": "resolved",
        "metadata": {"aais": approval(interrupt, "deny")},
    }
    events = agui_run(client, "/agent", run_agent_input(thread_id, resume=[entry]))
    assert events[-1]["type"] == "RUN_FINISHED"

    decided = {"outcome": "denied", "channel": "agui"}
    assert value(scrape(client), "aais_decisions_total", **decided) == (
        value(before, "aais_decisions_total", **decided) + 1
    )


def test_resume_work_is_queued_in_progress_then_failing(client: httpx.Client, site: Site) -> None:
    thread_id, interrupt = pause(client, "/srv/resumed-later.txt")
    request_id = request_of(interrupt)["id"]
    before = scrape(client)
    # Recorded by in-process code: the thread waits for a resume nobody has made yet.
    site.authority.decide(approval(interrupt))
    queued = scrape(client)
    assert value(queued, "aais_resume_work", state="queued") == (
        value(before, "aais_resume_work", state="queued") + 1
    )
    decided = {"outcome": "approved", "channel": "runtime"}
    assert value(queued, "aais_decisions_total", **decided) == (
        value(before, "aais_decisions_total", **decided) + 1
    )

    ledger = site.authority.ledger
    now = time.time()
    assert ledger.acquire_lease(thread_id, "holder-under-test", ttl=600, now=now)
    held = scrape(client)
    assert value(held, "aais_resume_work", state="in_progress") == (
        value(queued, "aais_resume_work", state="in_progress") + 1
    )
    assert value(held, "aais_resume_work", state="queued") == (
        value(before, "aais_resume_work", state="queued")
    )

    ledger.update_work(
        RESUME, request_id, retried_change("the gate refused", now, backoff=RESUME_BACKOFF)
    )
    ledger.release_lease(thread_id, "holder-under-test")
    failing = scrape(client)
    assert value(failing, "aais_resume_work", state="failing") == (
        value(held, "aais_resume_work", state="failing") + 1
    )
    assert value(failing, "aais_resume_work", state="in_progress") == (
        value(queued, "aais_resume_work", state="in_progress")
    )


def test_ages_are_measured_from_the_oldest_waiting_item(client: httpx.Client, site: Site) -> None:
    _, interrupt = pause(client, "/srv/aged.txt")
    site.authority.decide(approval(interrupt))  # resume work nobody picks up (no watcher)
    _, _ = pause(client, "/srv/still-pending.txt")
    ahead = ApprovalMetrics(site.authority, clock=lambda: time.time() + AHEAD)

    body, content_type = ahead.exposition()

    assert content_type.startswith("text/plain")
    samples = {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
    }
    assert value(samples, "aais_pending_approval_oldest_age_seconds") >= AHEAD
    assert value(samples, "aais_resume_work_oldest_age_seconds") >= AHEAD
    assert value(scrape(client), "aais_pending_approval_oldest_age_seconds") < AHEAD


def test_an_execution_of_unknown_outcome_is_counted(client: httpx.Client, site: Site) -> None:
    thread_id, interrupt = pause(client, "/srv/unknown-outcome.txt")
    request_id = request_of(interrupt)["id"]
    site.authority.decide(approval(interrupt))
    before = scrape(client)
    # A claim from a run that died: nobody knows whether the action ran.
    now = time.time() - 10
    claim = claim_change(request_id, "dead-run", thread_id=thread_id, ttl=1, now=now, retry=False)
    site.authority.change_execution(request_id, claim)

    assert value(scrape(client), "aais_outcome_unknown_executions") == (
        value(before, "aais_outcome_unknown_executions") + 1
    )


def test_a_refused_forged_row_counts_an_integrity_error(client: httpx.Client, site: Site) -> None:
    thread_id, interrupt = pause(client, "/srv/forged.txt")
    requested = ApprovalRequested.from_data(interrupt["metadata"]["aais"])
    before = scrape(client)
    # An approval written behind the authority's back: no audit entry vouches for it.
    forged = resolution_envelope(
        requested.request, outcome="approved", message="Approved.", now=utc_now(), sequence=0
    )
    with sqlite3.connect(site.db) as raw:
        raw.execute(
            "INSERT INTO aais_resolutions (request_id, envelope, decision_fingerprint) "
            "VALUES (?, ?, NULL)",
            (requested.request.id, dump_json(forged.to_json())),
        )

    url = f"/approvals/{requested.request.id}/decisions"
    assert client.post(url, json=approval(interrupt)).status_code == 503

    table = {"table": "aais_resolutions"}
    assert value(scrape(client), "aais_integrity_errors_total", **table) > value(
        before, "aais_integrity_errors_total", **table
    )
    assert site.effects.list(thread_id) == []


def test_webhook_deliveries_are_read_from_the_ledger(client: httpx.Client) -> None:
    samples = scrape(client)
    states = {
        dict(labels)["state"] for name, labels in samples if name == "aais_webhook_deliveries"
    }
    assert states == {"pending", "sending", "retrying", "dead"}


def test_no_label_or_value_holds_an_argument(client: httpx.Client) -> None:
    secret_path = f"/srv/argument-{uuid.uuid4().hex}.txt"
    _, interrupt = pause(client, secret_path)
    client.post(f"/approvals/{request_of(interrupt)['id']}/decisions", json=approval(interrupt))

    text = client.get("/metrics").text

    assert secret_path not in text and "argument-" not in text

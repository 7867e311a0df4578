"""OpenTelemetry spans of request, decide, resume and delivery, read from the SDK's in-memory
exporter while ``create_app`` serves the demo graph on loopback."""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph.checkpoint.memory import InMemorySaver
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from aais_agui import bearer_token_authenticator, create_app, run_agent_input
from aais_langgraph import ApprovalAuthority, UnknownRequestError, build_decision
from aais_langgraph.cli import main
from aais_langgraph.ledger import SqliteLedger
from aais_langgraph.observability import ATTRIBUTES, ApprovalMetrics, delivery_span
from aais_langgraph.threads import resume_with_decisions

from ..conftest import ALICE
from ..demo_graph import EffectLog, build_demo_graph
from ..http_support import agui_run, serve

ARGUMENT = f"/srv/secret-{uuid.uuid4().hex}"
"""The action argument every run of this module uses: no span may carry it."""


@dataclass
class Site:
    url: str
    authority: ApprovalAuthority
    graph: Any
    folder: Path


@pytest.fixture(scope="module")
def exporter() -> Iterator[InMemorySpanExporter]:
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        trace.set_tracer_provider(TracerProvider())
        provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider)
    exporter = InMemorySpanExporter()
    processor = SimpleSpanProcessor(exporter)
    provider.add_span_processor(processor)
    yield exporter
    processor.shutdown()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    folder = tmp_path_factory.mktemp("traces")
    ledger = SqliteLedger(folder / "ledger.db", synchronous="NORMAL")
    ledger.setup()
    authority = ApprovalAuthority(ledger)
    graph = build_demo_graph(EffectLog(folder / "effects.db"), InMemorySaver())
    app = create_app(
        graph,
        authority=authority,
        authenticate=bearer_token_authenticator({"alice-token": ALICE}),
    )
    with serve(app) as url:
        yield Site(url, authority, graph, folder)


@pytest.fixture
def client(site: Site) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=site.url, headers={"Authorization": "Bearer alice-token"}, timeout=30
    ) as client:
        yield client


@pytest.fixture
def spans(exporter: InMemorySpanExporter) -> Iterator[InMemorySpanExporter]:
    exporter.clear()
    yield exporter
    everything = exporter.get_finished_spans()
    assert_no_argument(everything)


def assert_no_argument(finished: tuple[ReadableSpan, ...]) -> None:
    """No attribute, event or status of any span holds the action's argument, and every
    attribute of ours is a documented one."""
    for span in finished:
        texts = [str(value) for value in (span.attributes or {}).values()]
        texts += [
            str(value) for event in span.events for value in (event.attributes or {}).values()
        ]
        texts.append(span.status.description or "")
        assert not any(ARGUMENT in text or "secret-" in text for text in texts), span.name
        if span.name.startswith("aais."):
            assert set(span.attributes or {}) <= set(ATTRIBUTES), span.name


def named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [span for span in exporter.get_finished_spans() if span.name == name]


def pause(client: httpx.Client) -> tuple[str, dict[str, Any]]:
    thread_id = f"thread_{uuid.uuid4().hex}"
    events = agui_run(client, "/agent", run_agent_input(thread_id, text=f"delete {ARGUMENT}"))
    [interrupt] = events[-1]["outcome"]["interrupts"]
    return thread_id, interrupt


def decided(interrupt: dict[str, Any], kind: str = "approve") -> dict[str, Any]:
    return build_decision(interrupt["metadata"]["aais"], decision=kind, actor=ALICE).to_json()


def request_of(interrupt: dict[str, Any]) -> dict[str, Any]:
    return dict(interrupt["metadata"]["aais"]["request"])


def test_a_request_span_names_the_request_digest_and_risk(
    client: httpx.Client, spans: InMemorySpanExporter
) -> None:
    thread_id, interrupt = pause(client)
    request = request_of(interrupt)

    [span] = named(spans, "aais.request")

    assert span.attributes is not None
    assert span.attributes["aais.request_id"] == request["id"]
    assert span.attributes["aais.action_digest"] == request["action_digest"]
    assert span.attributes["aais.action_name"] == "delete_file"
    assert span.attributes["aais.risk"] == request["risk"]["level"]
    assert span.attributes["aais.thread_id"] == thread_id


def test_a_decision_over_http_is_a_decide_span_on_its_channel(
    client: httpx.Client, spans: InMemorySpanExporter
) -> None:
    _, interrupt = pause(client)
    request = request_of(interrupt)

    response = client.post(f"/approvals/{request['id']}/decisions", json=decided(interrupt))
    assert response.status_code == 200

    [span] = [s for s in named(spans, "aais.decide") if s.attributes["aais.channel"] == "http"]
    assert span.attributes == {
        "aais.request_id": request["id"],
        "aais.action_digest": request["action_digest"],
        "aais.outcome": "approved",
        "aais.channel": "http",
        "aais.decision_kind": "recorded",
        "aais.risk": request["risk"]["level"],
    }
    assert span.status.status_code is not StatusCode.ERROR


def test_a_decision_over_agui_is_a_decide_span_on_its_channel(
    client: httpx.Client, spans: InMemorySpanExporter
) -> None:
    thread_id, interrupt = pause(client)
    entry = {
        "interruptId": interrupt["id"],
        "status": "resolved",
        "metadata": {"aais": decided(interrupt, "deny")},
    }

    agui_run(client, "/agent", run_agent_input(thread_id, resume=[entry]))

    outcomes = {
        (s.attributes["aais.channel"], s.attributes["aais.outcome"])
        for s in named(spans, "aais.decide")
        if s.attributes and s.attributes.get("aais.request_id") == request_of(interrupt)["id"]
    }
    assert ("agui", "denied") in outcomes


def test_a_resume_span_holds_its_decision_and_names_the_thread(
    client: httpx.Client, site: Site, spans: InMemorySpanExporter
) -> None:
    thread_id, interrupt = pause(client)
    request = request_of(interrupt)
    config = {"configurable": {"thread_id": thread_id}}

    [resolved] = resume_with_decisions(
        site.graph, config, decided(interrupt), actor=ALICE, authority=site.authority
    )
    assert resolved.approved

    [resume] = [
        s for s in named(spans, "aais.resume") if s.attributes["aais.thread_id"] == thread_id
    ]
    assert resume.attributes is not None
    assert list(resume.attributes["aais.request_ids"]) == [request["id"]]
    assert list(resume.attributes["aais.action_digests"]) == [request["action_digest"]]
    assert list(resume.attributes["aais.outcomes"]) == ["approved"]
    assert resume.attributes["aais.channel"] == "runtime"
    [decide] = [
        s for s in named(spans, "aais.decide") if s.attributes["aais.request_id"] == request["id"]
    ]
    assert decide.parent is not None and decide.parent.span_id == resume.context.span_id
    assert decide.context.trace_id == resume.context.trace_id


def test_a_failed_decide_span_records_the_error_type_only(
    client: httpx.Client, site: Site, spans: InMemorySpanExporter
) -> None:
    _, interrupt = pause(client)
    body = decided(interrupt)
    body["decision"]["request_id"] = "req_never_stored"

    with pytest.raises(UnknownRequestError):
        site.authority.decide(body)

    [span] = named(spans, "aais.decide")
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes == {"error.type": "UnknownRequestError"}
    assert span.events == ()


def test_a_delivery_span_carries_its_result_and_counts_it(
    site: Site, spans: InMemorySpanExporter
) -> None:
    metrics = ApprovalMetrics(site.authority)

    with delivery_span(
        delivery_id="msg_1", event_type="approval.requested", attempt=2, request_id="req_1"
    ) as notes:
        notes.set("aais.delivery.result", "delivered")
        notes.set("aais.delivery.status_code", 204)

    [span] = named(spans, "aais.delivery")
    assert span.attributes == {
        "aais.delivery.id": "msg_1",
        "aais.delivery.event_type": "approval.requested",
        "aais.delivery.attempt": 2,
        "aais.request_id": "req_1",
        "aais.delivery.result": "delivered",
        "aais.delivery.status_code": 204,
    }
    counted = metrics.process_registry.get_sample_value(
        "aais_webhook_delivery_attempts_total", {"result": "delivered"}
    )
    assert counted == 1


def test_a_decision_from_the_cli_is_a_decide_span_on_the_cli_channel(
    tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    db = tmp_path / "cli.db"
    ledger = SqliteLedger(db)
    ledger.setup()
    requested = ApprovalAuthority(ledger).request(
        {
            "kind": "fs.delete",
            "name": "delete_file",
            "summary": "Delete a file",
            "arguments": {"path": ARGUMENT},
        },
        origin={"harness": "test", "session_id": "s-cli"},
    )
    ledger.close()

    out = io.StringIO()
    code = main(["--db", str(db), "approve", requested.request.id, "--yes"], stdout=out)
    assert code == 0, out.getvalue()

    [span] = named(spans, "aais.decide")
    assert span.attributes is not None
    assert span.attributes["aais.channel"] == "cli"
    assert span.attributes["aais.outcome"] == "approved"
    assert span.attributes["aais.request_id"] == requested.request.id

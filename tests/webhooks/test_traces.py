"""Each delivery attempt is an ``aais.delivery`` span naming its result, never the URL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from aais_langgraph.authority import ApprovalAuthority
from aais_langgraph.ledger import InMemoryLedger
from aais_langgraph.webhooks import SubscriptionPlan, WebhookSubscription, WebhookWorker

from .receivers import SECRET, Receiver


@pytest.fixture
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


def test_a_delivery_attempt_is_a_span_with_its_result(exporter: InMemorySpanExporter) -> None:
    with Receiver(fail_first=1) as receiver:
        sub = WebhookSubscription(
            name="ops", url=receiver.url, secret=SECRET, notices=frozenset({"approval.requested"})
        )
        ledger = InMemoryLedger(delivery_plan=SubscriptionPlan([sub]))
        authority = ApprovalAuthority(ledger)
        authority.request(
            {"kind": "tool_call", "name": "deploy", "summary": "Deploy", "arguments": {}},
            origin={"harness": "tests", "session_id": "s"},
            request_id="apr_1",
            thread_id="thr_1",
        )
        worker = WebhookWorker(authority, [sub], retry_base=0.0, timeout=1.0, claim_ttl=5.0)
        worker.deliver_due()
        worker.deliver_due()
        worker.close()
    attempts = [s for s in exporter.get_finished_spans() if s.name == "aais.delivery"]
    seen = [
        (
            s.attributes["aais.delivery.attempt"],
            s.attributes["aais.delivery.result"],
            s.attributes["aais.delivery.status_code"],
        )
        for s in attempts
        if s.attributes is not None
    ]
    assert seen == [(1, "failed", 500), (2, "delivered", 204)]
    for span in attempts:
        assert span.attributes is not None
        assert str(receiver.port) not in " ".join(str(v) for v in span.attributes.values())

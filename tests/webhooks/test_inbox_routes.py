"""The inbox lists waiting and dead deliveries of visible requests and retries dead ones."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient

from aais_agui.http.deliveries import deliveries_router
from aais_agui.http.security import Authenticated, Security
from aais_langgraph.authority import AccessPolicy, ApprovalAuthority
from aais_langgraph.ledger import DELIVERY, InMemoryLedger
from aais_langgraph.protocol import Actor
from aais_langgraph.webhooks import SubscriptionPlan, WebhookSubscription, WebhookWorker

from .receivers import SECRET, free_port

JSON = {"content-type": "application/json"}


def inbox(authority: ApprovalAuthority) -> TestClient:
    async def authenticate(request: Any) -> Authenticated:
        user = request.headers.get("x-user", "alice")
        groups = frozenset({"sre"}) if user == "alice" else frozenset()
        return Authenticated(Actor(id=user, type="human"), groups=groups)

    app = FastAPI()
    app.include_router(deliveries_router(authority, Security(authenticate=authenticate)))
    return TestClient(app, base_url="http://127.0.0.1")


def dead_delivery() -> tuple[ApprovalAuthority, WebhookWorker, str]:
    sub = WebhookSubscription(
        name="ops",
        url=f"http://127.0.0.1:{free_port()}/hook",
        secret=SECRET,
        notices=frozenset({"approval.requested"}),
        as_groups=frozenset({"sre"}),
        max_attempts=1,
    )
    ledger = InMemoryLedger(delivery_plan=SubscriptionPlan([sub]))
    policy = AccessPolicy.from_mapping({"default_approvers": ["sre"]})
    authority = ApprovalAuthority(ledger, authorizer=policy)
    authority.request(
        {"kind": "tool_call", "name": "deploy", "summary": "Deploy", "arguments": {}},
        origin={"harness": "tests", "session_id": "s"},
        request_id="apr_1",
        thread_id="thr_1",
    )
    worker = WebhookWorker(authority, [sub], timeout=0.5, claim_ttl=5.0)
    [dead] = worker.deliver_due()
    assert dead.state == "dead"
    return authority, worker, dead.work_id


def test_the_inbox_lists_a_dead_delivery_and_hands_it_back() -> None:
    authority, worker, delivery_id = dead_delivery()
    with inbox(authority) as client:
        [listed] = client.get("/inbox/webhooks").json()["deliveries"]
        assert (listed["delivery_id"], listed["state"]) == (delivery_id, "dead")
        assert "url" not in listed

        answer = client.post(f"/inbox/webhooks/{delivery_id}/retry", headers=JSON)
        assert answer.json() == {"delivery_id": delivery_id, "state": "pending"}
        again = client.post(f"/inbox/webhooks/{delivery_id}/retry", headers=JSON)
        assert again.status_code == 404
    worker.close()


def test_a_viewer_who_may_not_see_the_request_is_not_shown_its_deliveries() -> None:
    authority, worker, delivery_id = dead_delivery()
    with inbox(authority) as client:
        assert client.get("/inbox/webhooks", headers={"x-user": "mallory"}).json() == {
            "deliveries": []
        }
        refused = client.post(
            f"/inbox/webhooks/{delivery_id}/retry", headers={**JSON, "x-user": "mallory"}
        )
        assert refused.status_code == 404
    stored = authority.ledger.get_work(DELIVERY, delivery_id)
    assert stored is not None and stored.state == "dead"
    worker.close()

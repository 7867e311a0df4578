"""The AAIS HTTP/SSE profile and the AG-UI endpoint, over real HTTP on loopback."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aais
import httpx
import pytest
from langgraph.checkpoint.memory import InMemorySaver

from aais_agui import create_app, run_agent_input
from aais_langgraph import ApprovalAuthority, build_decision
from aais_langgraph.authority import DEFAULT_STREAM
from aais_langgraph.ledger import SqliteLedger

from ..demo_graph import EffectLog, build_demo_graph
from ..http_support import agui_run, serve, sse_messages
from ..served_site import MAX_BODY, Site, served_site

MALLORY = {"id": "mallory", "type": "human"}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    with served_site(tmp_path_factory.mktemp("http")) as served:
        yield served


@pytest.fixture
def client(site: Site) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=site.url, headers={"Authorization": "Bearer alice-token"}, timeout=30
    ) as client:
        yield client


def pause(client: httpx.Client, text: str | None = None) -> tuple[str, dict[str, Any]]:
    """Start a run that pauses on one approval; returns its thread and interrupt."""
    thread_id = f"thread_{uuid.uuid4().hex}"
    events = agui_run(
        client, "/agent", run_agent_input(thread_id, text=text or f"delete /srv/{thread_id}")
    )
    finished = events[-1]
    assert finished["type"] == "RUN_FINISHED", finished
    [interrupt] = finished["outcome"]["interrupts"]
    return thread_id, interrupt


def decision(interrupt: dict[str, Any], kind: str = "approve", **kwargs: Any) -> dict[str, Any]:
    return build_decision(
        interrupt["metadata"]["aais"], decision=kind, actor=MALLORY, **kwargs
    ).to_json()


def request_id(interrupt: dict[str, Any]) -> str:
    return str(interrupt["metadata"]["aais"]["request"]["id"])


def post_decision(
    client: httpx.Client, interrupt: dict[str, Any], body: Any, **kwargs: Any
) -> httpx.Response:
    return client.post(f"/approvals/{request_id(interrupt)}/decisions", json=body, **kwargs)


def wait_for_result(site: Site, thread_id: str, timeout: float = 10.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = site.graph.get_state({"configurable": {"thread_id": thread_id}})
        if state.values.get("result"):
            return str(state.values["result"])
        time.sleep(0.05)
    raise AssertionError("the thread was not resumed in the background")


# -- snapshot -------------------------------------------------------------------------


def test_snapshot_lists_what_is_waiting(client: httpx.Client) -> None:
    _, interrupt = pause(client)
    response = client.get("/approvals/snapshot")
    assert response.status_code == 200
    snapshot = aais.validate(response.json())
    assert snapshot["type"] == "approval.snapshot"
    assert snapshot["stream"] == DEFAULT_STREAM  # SPEC §3: durable bindings MUST provide it
    assert request_id(interrupt) in {request["id"] for request in snapshot["snapshot"]["pending"]}


def test_snapshot_hides_a_request_whose_run_moved_on(client: httpx.Client, site: Site) -> None:
    thread_id, interrupt = pause(client)
    site.graph.update_state({"configurable": {"thread_id": thread_id}}, {"path": "/srv/edited"})
    pending = client.get("/approvals/snapshot").json()["snapshot"]["pending"]
    assert request_id(interrupt) not in {request["id"] for request in pending}


def test_snapshot_needs_authentication(site: Site) -> None:
    response = httpx.get(f"{site.url}/approvals/snapshot")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "aais.unauthenticated"


# -- decisions ------------------------------------------------------------------------


def test_approval_resolves_and_resumes_the_thread(client: httpx.Client, site: Site) -> None:
    thread_id, interrupt = pause(client)
    response = post_decision(client, interrupt, decision(interrupt))
    assert response.status_code == 200
    resolved = aais.validate(response.json())
    assert resolved["type"] == "approval.resolved"
    assert resolved["resolution"]["outcome"] == "approved"
    assert wait_for_result(site, thread_id) == "deleted"
    assert site.effects.list(thread_id) == [(thread_id, "delete_file", f"/srv/{thread_id}")]
    pending = client.get("/approvals/snapshot").json()["snapshot"]["pending"]
    assert request_id(interrupt) not in {request["id"] for request in pending}


def test_denial_resolves_and_runs_nothing(client: httpx.Client, site: Site) -> None:
    thread_id, interrupt = pause(client)
    response = post_decision(client, interrupt, decision(interrupt, "deny"))
    assert response.status_code == 200
    assert response.json()["resolution"]["outcome"] == "denied"
    assert wait_for_result(site, thread_id) == "denied"
    assert site.effects.list(thread_id) == []


def test_stale_digest_is_refused_and_the_request_stays_pending(
    client: httpx.Client, site: Site
) -> None:
    thread_id, interrupt = pause(client)
    body = decision(interrupt)
    body["decision"]["action_digest"] = "sha256:" + "f" * 64
    response = post_decision(client, interrupt, body)
    assert response.status_code == 409
    assert response.json()["resolution"]["outcome"] == "stale"
    assert site.authority.get_resolution(request_id(interrupt)) is None
    assert site.effects.list(thread_id) == []


def test_a_different_second_decision_is_a_conflict(client: httpx.Client) -> None:
    _, interrupt = pause(client)
    assert post_decision(client, interrupt, decision(interrupt)).status_code == 200
    response = post_decision(client, interrupt, decision(interrupt, "deny"))
    assert response.status_code == 409
    assert response.json()["resolution"]["outcome"] == "conflict"


def test_an_identical_replay_returns_the_same_resolution(client: httpx.Client) -> None:
    _, interrupt = pause(client)
    body = decision(interrupt)
    first = post_decision(client, interrupt, body)
    again = post_decision(client, interrupt, body)
    assert again.status_code == 200
    assert again.json()["resolution"]["id"] == first.json()["resolution"]["id"]


def test_an_unauthenticated_decision_is_refused(site: Site, client: httpx.Client) -> None:
    _, interrupt = pause(client)
    response = httpx.post(
        f"{site.url}/approvals/{request_id(interrupt)}/decisions", json=decision(interrupt)
    )
    assert response.status_code == 401
    assert site.authority.get_resolution(request_id(interrupt)) is None


def test_a_body_actor_is_never_trusted(client: httpx.Client, site: Site) -> None:
    _, interrupt = pause(client)
    assert decision(interrupt)["decision"]["actor"]["id"] == "mallory"
    post_decision(client, interrupt, decision(interrupt))
    decided = [
        event
        for event in site.authority.ledger.events_after(0, limit=100_000)
        if event["type"] == "approval.decided"
        and event["decision"]["request_id"] == request_id(interrupt)
    ]
    assert [event["decision"]["actor"]["id"] for event in decided] == ["alice"]


def test_an_oversized_body_is_refused(client: httpx.Client) -> None:
    _, interrupt = pause(client)
    body = decision(interrupt)
    body["extensions"] = {"example.org/padding": "x" * MAX_BODY}
    assert post_decision(client, interrupt, body).status_code == 413

    def chunks() -> Iterator[bytes]:
        for _ in range(MAX_BODY // 1000 + 2):
            yield b" " * 1000

    response = client.post(
        f"/approvals/{request_id(interrupt)}/decisions",
        content=chunks(),
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 413


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "https://evil.example"},
        {"Origin": "null"},
        {"Sec-Fetch-Site": "cross-site"},
    ],
)
def test_a_foreign_origin_is_refused(
    client: httpx.Client, site: Site, headers: dict[str, str]
) -> None:
    thread_id, interrupt = pause(client)
    response = post_decision(client, interrupt, decision(interrupt), headers=headers)
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "aais.foreign_origin"
    assert site.authority.get_resolution(request_id(interrupt)) is None
    body = run_agent_input(thread_id, text="delete /srv/other")
    assert client.post("/agent", json=body, headers=headers).status_code == 403


@pytest.mark.parametrize("origin", ["same", "https://inbox.example"])
def test_same_and_allowed_origins_may_decide(client: httpx.Client, site: Site, origin: str) -> None:
    _, interrupt = pause(client)
    headers = {"Origin": site.url if origin == "same" else origin}
    assert post_decision(client, interrupt, decision(interrupt), headers=headers).status_code == 200


def test_a_form_post_is_refused(client: httpx.Client) -> None:
    _, interrupt = pause(client)
    response = client.post(
        f"/approvals/{request_id(interrupt)}/decisions",
        content=b"{}",
        headers={"Content-Type": "text/plain"},
    )
    assert response.status_code == 415


def test_cookie_sessions_need_the_csrf_token(site: Site, client: httpx.Client) -> None:
    _, interrupt = pause(client)
    with httpx.Client(base_url=site.url, cookies={"session": "bob-session"}) as browser:
        assert post_decision(browser, interrupt, decision(interrupt)).status_code == 403
        token = browser.get("/approvals/csrf").json()["csrf_token"]
        response = post_decision(
            browser, interrupt, decision(interrupt), headers={"X-AAIS-CSRF": token}
        )
        assert response.status_code == 200
        wrong = post_decision(browser, interrupt, decision(interrupt), headers={"X-AAIS-CSRF": "x"})
        assert wrong.status_code == 403


def test_decision_for_another_request_than_the_path_is_refused(client: httpx.Client) -> None:
    _, first = pause(client)
    _, second = pause(client)
    assert post_decision(client, first, decision(second)).status_code == 422


def test_unknown_request_is_404(client: httpx.Client) -> None:
    _, interrupt = pause(client)
    body = decision(interrupt)
    body["decision"]["request_id"] = "apr_unknown"
    response = client.post("/approvals/apr_unknown/decisions", json=body)
    assert response.status_code == 404


def test_a_malformed_envelope_is_422_without_echoing_values(client: httpx.Client) -> None:
    _, interrupt = pause(client)
    body = decision(interrupt)
    body["decision"]["scope"] = "top-secret-scope"
    response = post_decision(client, interrupt, body)
    assert response.status_code == 422
    assert "top-secret-scope" not in response.text


# -- AG-UI endpoint -------------------------------------------------------------------


def test_agui_runs_need_authentication(site: Site) -> None:
    response = httpx.post(f"{site.url}/agent", json=run_agent_input("t-unauth", text="hello"))
    assert response.status_code == 401


def test_agui_capabilities_declare_interrupts(client: httpx.Client) -> None:
    capabilities = client.get("/agent/capabilities").json()
    assert capabilities["humanInTheLoop"]["interrupts"] is True
    assert capabilities["humanInTheLoop"]["approveWithEdits"] is False


def test_agui_resume_uses_the_authenticated_actor(client: httpx.Client, site: Site) -> None:
    thread_id, interrupt = pause(client)
    entry = {
        "interruptId": interrupt["id"],
        "status": "resolved",
        "payload": {"aais": decision(interrupt)},
    }
    bob = {"Authorization": "Bearer bob-token"}
    events = agui_run(client, "/agent", run_agent_input(thread_id, resume=[entry]), headers=bob)
    assert events[-1]["type"] == "RUN_FINISHED" and "outcome" not in events[-1]
    recorded = site.authority.ledger.events_after(0, limit=100_000)
    actors = [
        e["decision"]["actor"]["id"]
        for e in recorded
        if e["type"] == "approval.decided" and e["decision"]["request_id"] == request_id(interrupt)
    ]
    assert actors == ["bob"]


# -- SSE ------------------------------------------------------------------------------


def read_events(
    site: Site, count: int, headers: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    with (
        httpx.Client(base_url=site.url, timeout=30) as stream_client,
        stream_client.stream(
            "GET",
            "/approvals/events",
            headers={"Authorization": "Bearer alice-token", **(headers or {})},
        ) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        for message in sse_messages(response.iter_lines()):
            found.append(message)
            if len(found) == count:
                break
    return found


def test_events_start_with_a_snapshot_then_follow_in_sequence(
    client: httpx.Client, site: Site
) -> None:
    import threading

    results: list[list[dict[str, Any]]] = []
    reader = threading.Thread(target=lambda: results.append(read_events(site, 4)))
    reader.start()
    time.sleep(0.3)
    _, interrupt = pause(client)
    post_decision(client, interrupt, decision(interrupt))
    reader.join(20)
    [messages] = results
    snapshot, *events = messages
    assert snapshot["data"]["type"] == "approval.snapshot"
    assert int(snapshot["id"]) == snapshot["data"]["snapshot"]["as_of_sequence"]
    assert [m["data"]["type"] for m in events] == [
        "approval.requested",
        "approval.decided",
        "approval.resolved",
    ]
    ids = [int(m["id"]) for m in messages]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    for message in events:
        assert int(message["id"]) == message["data"]["sequence"]
        aais.validate(message["data"])


def test_last_event_id_resumes_after_that_sequence(client: httpx.Client, site: Site) -> None:
    _, interrupt = pause(client)
    post_decision(client, interrupt, decision(interrupt))
    last = site.authority.ledger.last_sequence()
    resumed = read_events(site, 3, headers={"Last-Event-ID": str(last - 3)})
    assert [int(m["id"]) for m in resumed] == [last - 2, last - 1, last]
    assert [m["data"]["type"] for m in resumed] == [
        "approval.requested",
        "approval.decided",
        "approval.resolved",
    ]


def test_a_compaction_gap_is_signalled_then_a_snapshot_follows(
    site: Site, client: httpx.Client
) -> None:
    pause(client)
    site.authority.ledger.compact_events(site.authority.ledger.last_sequence())
    gap, snapshot = read_events(site, 2, headers={"Last-Event-ID": "1"})
    assert gap["event"] == "aais.gap" and gap["data"]["gap"] is True
    assert snapshot["data"]["type"] == "approval.snapshot"


def test_a_bad_last_event_id_is_400(client: httpx.Client) -> None:
    assert client.get("/approvals/events", headers={"Last-Event-ID": "ten"}).status_code == 400


def test_agui_input_is_validated(client: httpx.Client) -> None:
    response = client.post("/agent", json={"threadId": "t", "messages": "not a list"})
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "agui.invalid_input"


def test_agui_bodies_are_limited(client: httpx.Client) -> None:
    body = run_agent_input("t-big", text="x" * (MAX_BODY + 1))
    assert client.post("/agent", json=body).status_code == 413


def test_agui_resume_with_a_tampered_digest_is_a_run_error(
    client: httpx.Client, site: Site
) -> None:
    thread_id, interrupt = pause(client)
    body = decision(interrupt)
    body["decision"]["action_digest"] = "sha256:" + "0" * 64
    entry = {"interruptId": interrupt["id"], "status": "resolved", "metadata": {"aais": body}}
    events = agui_run(client, "/agent", run_agent_input(thread_id, resume=[entry]))
    # The refused run, then a run that offers the still-open interrupt again.
    assert [e["type"] for e in events] == [
        "RUN_STARTED",
        "RUN_ERROR",
        "RUN_STARTED",
        "RUN_FINISHED",
    ]
    assert events[1]["code"] == "aais.digest_mismatch"
    assert [i["id"] for i in events[-1]["outcome"]["interrupts"]] == [interrupt["id"]]
    assert site.authority.get_resolution(request_id(interrupt)) is None
    assert site.effects.list(thread_id) == []


# -- bounds on client input -------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "query"),
    [
        ({"Last-Event-ID": "²".encode("latin-1")}, ""),
        ({"Last-Event-ID": "1³¹".encode("latin-1")}, ""),
        ({}, "?after=%C2%B2"),
        ({}, "?after=%D9%A1"),
        ({"Last-Event-ID": "\uff11".encode()}, ""),
        ({"Last-Event-ID": "1" * 17}, ""),
        ({"Last-Event-ID": "9007199254740992"}, ""),
        ({"Last-Event-ID": "-1"}, ""),
    ],
)
def test_a_last_event_id_that_is_not_ascii_digits_is_400(
    client: httpx.Client, headers: dict[str, Any], query: str
) -> None:
    response = client.get(f"/approvals/events{query}", headers=headers)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "aais.bad_last_event_id"


@pytest.mark.parametrize(
    ("field", "pointer"),
    [
        ("threadId", "/threadId"),
        ("runId", "/runId"),
        ("parentRunId", "/parentRunId"),
        ("message", "/messages/0/id"),
        ("resume", "/resume/0/interruptId"),
    ],
)
def test_an_oversized_client_id_is_refused_naming_the_field(
    client: httpx.Client, field: str, pointer: str
) -> None:
    huge = "t" * 20_000  # the site limits bodies to 64 kB; the default 1 MB took 200k
    body = run_agent_input(f"thread_{uuid.uuid4().hex}", text="hello")
    if field == "message":
        body["messages"][0]["id"] = huge
    elif field == "resume":
        body["resume"] = [{"interruptId": huge, "status": "resolved", "payload": {}}]
    else:
        body[field] = huge
    response = client.post("/agent", json=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "agui.id_too_long"
    assert error["message"].startswith(pointer + ":")
    assert huge not in response.text


def test_an_id_of_the_limit_is_accepted(client: httpx.Client) -> None:
    thread_id = "t" * 200
    events = agui_run(client, "/agent", run_agent_input(thread_id, text="hello"))
    assert events[-1]["type"] == "RUN_FINISHED"


@pytest.mark.parametrize(
    "path",
    [
        "/approvals/{}/decisions",
        "/inbox/explanations/{}",
        "/inbox/threads/{}",
    ],
)
def test_an_oversized_id_in_a_path_is_refused(client: httpx.Client, path: str) -> None:
    url = path.format("r" * 201)
    response = client.post(url, json={}) if "decisions" in url else client.get(url)
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "aais.id_too_long"


@pytest.mark.parametrize("path", ["/docs", "/redoc", "/openapi.json", "/docs/oauth2-redirect"])
def test_api_docs_are_off_by_default(site: Site, path: str) -> None:
    assert httpx.get(f"{site.url}{path}").status_code == 404


def test_api_docs_opt_in_serves_only_the_schema_under_the_inbox_csp(tmp_path: Path) -> None:
    ledger = SqliteLedger(tmp_path / "ledger.db")
    ledger.setup()
    app = create_app(
        build_demo_graph(EffectLog(tmp_path / "effects.db"), InMemorySaver()),
        authority=ApprovalAuthority(ledger),
        authenticate=lambda _: None,
        api_docs=True,
    )
    with serve(app) as url:
        schema = httpx.get(f"{url}/openapi.json")
        assert schema.status_code == 200
        assert "/agent" in schema.json()["paths"]
        assert schema.headers["content-security-policy"].startswith("default-src 'none'")
        assert httpx.get(f"{url}/docs").status_code == 404
        assert httpx.get(f"{url}/redoc").status_code == 404


def test_every_run_started_declares_the_agui_protocol_version(client: httpx.Client) -> None:
    """AG-UI 1.0 versioning: the producer MUST declare it on the event that opens a run,
    including the refused run and the re-offer run that follows it."""
    thread_id, interrupt = pause(client)
    forged = decision(interrupt)
    forged["decision"]["action_digest"] = "sha256:" + "0" * 64
    refused_entry = {"interruptId": interrupt["id"], "status": "resolved", "payload": forged}
    body = {**run_agent_input(thread_id), "resume": [refused_entry]}
    events = agui_run(client, "/agent", body)
    assert [e["type"] for e in events].count("RUN_ERROR") == 1
    paused_again = agui_run(client, "/agent", run_agent_input(thread_id))
    started = [e for e in events + paused_again if e["type"] == "RUN_STARTED"]
    assert len(started) == 3
    assert {e.get("protocolVersion") for e in started} == {"1.0"}

"""The served process: one ApprovalService owns the driver, the periodic jobs and the lifespan."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from langgraph.checkpoint.memory import InMemorySaver

from aais_agui import ApprovalService, ServiceSettings, bearer_token_authenticator, create_app
from aais_agui.scheduler import PeriodicJob, Scheduler
from aais_langgraph import ApprovalAuthority, InMemoryLedger, build_decision
from aais_langgraph.ledger import RetentionPolicy

from .demo_graph import EffectLog, build_demo_graph

ROOT = Path(__file__).resolve().parents[2]
AUTHENTICATE = bearer_token_authenticator({"t0ken": {"id": "alice", "type": "human"}})
ACTION = {"kind": "process.exec", "name": "shell.exec", "summary": "ls", "arguments": {"n": 1}}
ALICE = {"id": "alice", "type": "human"}


def served_graph(tmp_path: Path) -> Any:
    return build_demo_graph(EffectLog(tmp_path / "effects.db"), InMemorySaver())


def test_the_driver_is_built_in_one_place_of_aais_agui() -> None:
    sites = [
        path.relative_to(ROOT).as_posix()
        for path in sorted((ROOT / "aais_agui").rglob("*.py"))
        for _ in re.finditer(r"\bThreadDriver\(", path.read_text())
    ]
    assert sites == ["aais_agui/service.py"]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("lease_ttl", 0),
        ("lease_wait", -1),
        ("resume_due_every", 0),
        ("orphans_every", float("nan")),
        ("inbox_every", 0),
        ("stream_poll", True),
        ("websocket_max_age", -5.0),
        ("max_body_bytes", 0),
        ("witnesses", "tips.jsonl"),
        ("allowed_origins", [""]),
        ("retention", 30),
    ],
)
def test_a_bad_setting_is_refused_by_its_name(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=f"^{field}:") as refused:
        ServiceSettings(**{field: value})
    assert repr(value) not in str(refused.value).replace(field, "")


def test_jobs_are_switched_off_by_none() -> None:
    settings = ServiceSettings(resume_due_every=None, orphans_every=None, websocket_max_age=None)
    assert settings.resume_due_every is None and settings.orphans_every is None
    assert ServiceSettings(allowed_origins=["https://b", "https://a"]).allowed_origins == {
        "https://a",
        "https://b",
    }


def test_the_agent_routers_resumes_and_watcher_share_the_one_driver(tmp_path: Path) -> None:
    settings = ServiceSettings(lease_wait=0.25, lease_ttl=9.0)
    app = create_app(
        served_graph(tmp_path),
        authority=ApprovalAuthority(InMemoryLedger()),
        authenticate=AUTHENTICATE,
        settings=settings,
    )
    service: ApprovalService = app.state.aais_service
    agent = app.state.aais_agent
    driver = service.driver
    assert (driver.lease_wait, driver.lease_ttl, driver.served) == (0.25, 9.0, True)
    assert agent.driver is driver and agent.clone().driver is driver
    assert agent.with_actor(ALICE).service is service
    assert service.resumes.driver is driver and service.watcher.driver is driver


def test_an_agent_built_directly_builds_its_service_once(tmp_path: Path) -> None:
    from aais_agui import AAISLangGraphAgent

    authority = ApprovalAuthority(InMemoryLedger())
    agent = AAISLangGraphAgent(
        name="direct",
        graph=served_graph(tmp_path),
        authority=authority,
        settings=ServiceSettings(lease_wait=0.5),
    )
    twin = agent.clone()
    assert twin.service is agent.service and twin.driver is agent.driver
    assert agent.driver.lease_wait == 0.5 and agent.service.authority is authority


def test_a_service_given_to_create_app_keeps_its_own_settings(tmp_path: Path) -> None:
    service = ApprovalService(served_graph(tmp_path), ApprovalAuthority(InMemoryLedger()))
    with pytest.raises(TypeError, match=r"^settings:"):
        create_app(service, authenticate=AUTHENTICATE, settings=ServiceSettings())
    with pytest.raises(TypeError, match=r"^authority:"):
        create_app(served_graph(tmp_path), authenticate=AUTHENTICATE)


def test_create_app_runs_the_watcher_and_inbox_jobs_by_default_and_none_when_switched_off(
    tmp_path: Path,
) -> None:
    authority = ApprovalAuthority(InMemoryLedger())
    app = create_app(served_graph(tmp_path), authority=authority, authenticate=AUTHENTICATE)
    with TestClient(app):
        scheduler = app.state.aais_service.scheduler
        assert scheduler is not None and scheduler.names == ["resume_due", "orphans", "inbox"]
    quiet = ServiceSettings(resume_due_every=None, orphans_every=None, inbox_every=None)
    app = create_app(
        served_graph(tmp_path), authority=authority, authenticate=AUTHENTICATE, settings=quiet
    )
    with TestClient(app):
        assert app.state.aais_service.scheduler.names == []


def test_retention_runs_for_create_app_users_when_configured(tmp_path: Path) -> None:
    authority = ApprovalAuthority(InMemoryLedger())
    for _ in range(3):
        requested = authority.request(ACTION, origin={"harness": "t", "session_id": "s-1"})
        authority.decide(build_decision(requested, decision="approve", actor=ALICE))
    settings = ServiceSettings(
        retention=RetentionPolicy(keep_last=1),
        resume_due_every=None,
        orphans_every=None,
        inbox_every=None,
    )
    app = create_app(
        served_graph(tmp_path), authority=authority, authenticate=AUTHENTICATE, settings=settings
    )
    with TestClient(app):
        scheduler = app.state.aais_service.scheduler
        assert scheduler.names == ["retention"]
        for _ in range(200):
            if scheduler.passes["retention"]:
                break
            asyncio.run(asyncio.sleep(0.02))
    assert len(authority.ledger.contents().requests) == 1


def pending_three(monkeypatch: pytest.MonkeyPatch) -> tuple[ApprovalAuthority, list[int]]:
    """An authority with three pending requests, and the sizes of the batches of rows it
    is asked to vouch for from then on."""
    authority = ApprovalAuthority(InMemoryLedger())
    for n in range(3):
        authority.request(
            {**ACTION, "arguments": {"n": n}}, origin={"harness": "t", "session_id": "s-1"}
        )
    vouched: list[int] = []
    vouch = authority.vouched_requests

    def counted(rows: Any) -> Any:
        vouched.append(len(rows))
        return vouch(rows)

    monkeypatch.setattr(authority, "vouched_requests", counted)
    return authority, vouched


@pytest.mark.parametrize("inbox_every", [60.0, None])
def test_the_inbox_job_checks_what_is_pending_before_the_first_snapshot(
    inbox_every: float | None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    authority, vouched = pending_three(monkeypatch)
    settings = ServiceSettings(resume_due_every=None, orphans_every=None, inbox_every=inbox_every)
    app = create_app(
        served_graph(tmp_path), authority=authority, authenticate=AUTHENTICATE, settings=settings
    )
    with TestClient(app) as client:
        scheduler = app.state.aais_service.scheduler
        if inbox_every is not None:
            for _ in range(500):
                if scheduler.passes["inbox"]:
                    break
                time.sleep(0.01)
            assert vouched == [3]  # at the start, before anyone asked
        before = len(vouched)
        answer = client.get("/approvals/snapshot", headers={"authorization": "Bearer t0ken"})
        assert len(answer.json()["snapshot"]["pending"]) == 3
    assert vouched[before:] == ([] if inbox_every is not None else [3])


def test_a_snapshot_asked_for_while_the_inbox_job_works_waits_for_its_pass(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import threading

    import aais_agui.service

    authority, vouched = pending_three(monkeypatch)
    writing, release = threading.Event(), threading.Event()
    write = aais_agui.service.envelope_text

    def held(snapshot: Any) -> str:  # the job's pass, held while it writes the text
        writing.set()
        assert release.wait(10)
        return write(snapshot)

    monkeypatch.setattr(aais_agui.service, "envelope_text", held)
    settings = ServiceSettings(resume_due_every=None, orphans_every=None)
    app = create_app(
        served_graph(tmp_path), authority=authority, authenticate=AUTHENTICATE, settings=settings
    )
    shown: list[int] = []
    with TestClient(app) as client:
        assert writing.wait(10)

        def ask() -> None:
            answer = client.get("/approvals/snapshot", headers={"authorization": "Bearer t0ken"})
            shown.append(len(answer.json()["snapshot"]["pending"]))

        asking = threading.Thread(target=ask)
        asking.start()
        asking.join(0.5)
        assert asking.is_alive() and shown == []  # it waits for the job's pass
        release.set()
        asking.join(10)
    assert shown == [3] and vouched == [3]


def test_a_failing_job_is_logged_by_name_and_stops_no_other(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ran: list[str] = []

    async def broken() -> None:
        raise RuntimeError("boom")

    async def steady() -> None:
        ran.append("steady")

    scheduler = Scheduler(
        [PeriodicJob("broken", 0.01, broken), PeriodicJob("steady", 0.01, steady)]
    )

    async def serve() -> None:
        async with scheduler.running():
            while scheduler.passes["broken"] < 3 or len(ran) < 3:
                await asyncio.sleep(0.01)

    with caplog.at_level(logging.ERROR, logger="aais_agui.scheduler"):
        asyncio.run(asyncio.wait_for(serve(), timeout=30))
    assert len(ran) >= 3
    assert any("scheduled job broken failed" in record.getMessage() for record in caplog.records)


def test_serve_no_watch_switches_off_the_watcher_jobs_only() -> None:
    from aais_agui.cli import _parser, service_settings

    watching = service_settings(_parser().parse_args(["serve", "pkg:graph"]))
    assert (watching.resume_due_every, watching.orphans_every) == (0.5, 30.0)
    quiet = service_settings(_parser().parse_args(["serve", "pkg:graph", "--no-watch"]))
    assert (quiet.resume_due_every, quiet.orphans_every) == (None, None)
    assert quiet.deliveries_every == watching.deliveries_every

"""The server's ledger upkeep: retention passes and tip publications, each when due."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

import pytest

from aais_agui.cli import _parser, service_settings
from aais_agui.ledger_upkeep import LedgerUpkeep, upkeep_banner
from aais_agui.service import ApprovalService, ServiceSettings
from aais_langgraph import ApprovalAuthority, SqliteLedger, build_decision
from aais_langgraph.ledger import FileWitness, RetentionPolicy, check_witnessed

ACTION = {"kind": "process.exec", "name": "shell.exec", "summary": "ls", "arguments": {"n": 1}}
ACTOR = {"id": "alice", "type": "human"}


def approve(authority: ApprovalAuthority, count: int) -> None:
    for _ in range(count):
        requested = authority.request(ACTION, origin={"harness": "t", "session_id": "s-1"})
        authority.decide(build_decision(requested, decision="approve", actor=ACTOR))


def lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_tick_compacts_when_due_and_publishes_when_the_tip_moved(tmp_path: Path) -> None:
    witness = tmp_path / "witness.jsonl"
    settings = ServiceSettings(
        retention=RetentionPolicy(keep_last=1),
        retention_every=100.0,
        witnesses=(str(witness),),
        witness_every=1000.0,
    )
    with SqliteLedger.from_path(tmp_path / "ledger.db") as ledger:
        authority = ApprovalAuthority(ledger)
        approve(authority, 3)
        upkeep = LedgerUpkeep(ledger, settings, key=None)

        asyncio.run(upkeep.tick(now=0.0))  # compaction, then the moved tip published
        assert len(ledger.contents().requests) == 1
        assert lines(witness)[-1]["index"] == ledger.audit_tip()[0]  # type: ignore[index]

        asyncio.run(upkeep.tick(now=10.0))  # nothing moved, nothing due
        assert len(lines(witness)) == 1

        approve(authority, 1)  # a resolution batch moves the tip
        asyncio.run(upkeep.tick(now=20.0))
        assert len(lines(witness)) == 2
        assert len(ledger.contents().requests) == 2  # retention is not due before 100s

        asyncio.run(upkeep.tick(now=120.0))
        assert len(ledger.contents().requests) == 1
        published = FileWitness(witness).latest()
        assert published is not None and check_witnessed(ledger, published).ok
        assert authority.verify_audit().ok


def test_the_heartbeat_publishes_an_unmoved_tip(tmp_path: Path) -> None:
    witness = tmp_path / "witness.jsonl"
    settings = ServiceSettings(witnesses=(str(witness),), witness_every=60.0)
    with SqliteLedger.from_path(tmp_path / "ledger.db") as ledger:
        approve(ApprovalAuthority(ledger), 1)
        upkeep = LedgerUpkeep(ledger, settings, key=None)
        for moment in (0.0, 30.0, 61.0):
            asyncio.run(upkeep.tick(now=moment))
    assert len(lines(witness)) == 2


def test_a_failing_witness_does_not_stop_the_upkeep(tmp_path: Path) -> None:
    settings = ServiceSettings(
        retention=RetentionPolicy(keep_last=0), witnesses=(str(tmp_path / "missing" / "w.jsonl"),)
    )
    with SqliteLedger.from_path(tmp_path / "ledger.db") as ledger:
        approve(ApprovalAuthority(ledger), 2)
        asyncio.run(LedgerUpkeep(ledger, settings, key=None).tick(now=0.0))
        assert ledger.contents().requests == []


def test_serve_options_give_the_settings() -> None:
    args = _parser().parse_args(
        [
            "serve",
            "pkg:graph",
            "--retention-last",
            "10",
            "--witness",
            "w.jsonl",
            "--witness",
            "http://127.0.0.1:9/tips",
            "--retention-every",
            "60",
        ]
    )

    settings = service_settings(args)

    assert settings.retention == RetentionPolicy(keep_last=10)
    assert settings.witnesses == ("w.jsonl", "http://127.0.0.1:9/tips")
    assert settings.retention_every == 60.0
    idle = service_settings(_parser().parse_args(["serve", "pkg:graph"]))
    assert idle.retention is None and idle.witnesses == () and upkeep_banner(idle) == []


def test_a_negative_retention_is_refused_by_name() -> None:
    args = argparse.Namespace(retention_days=None, retention_last=-1)
    with pytest.raises(ValueError, match="--retention-last"):
        service_settings(args)


def test_the_service_runs_the_witness_job_in_the_background_and_stops(tmp_path: Path) -> None:
    witness = tmp_path / "witness.jsonl"
    settings = ServiceSettings(witnesses=(str(witness),), witness_poll=0.01)
    assert upkeep_banner(settings) == [f"witness    {witness}"]

    async def serve() -> None:
        service = ApprovalService(None, ApprovalAuthority(ledger), settings=settings)
        async with service.lifespan():
            assert service.scheduler is not None and service.scheduler.names == ["inbox", "witness"]
            while not witness.exists():
                await asyncio.sleep(0.01)
        assert service.scheduler is None

    with SqliteLedger.from_path(tmp_path / "ledger.db") as ledger:
        approve(ApprovalAuthority(ledger), 1)
        asyncio.run(asyncio.wait_for(serve(), timeout=30))
    assert lines(witness)[0]["index"] == 2

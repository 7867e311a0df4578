"""The AAE lifecycle with its APPROVE step answered through the AAIS authority."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from aae import ApprovalDeniedError, ApprovalTimeoutError, Decision
from aae.lifecycle import compute_approved_steps_hash

from aais_langgraph import ApprovalAuthority, SqliteLedger, build_decision
from aais_langgraph.aae import (
    CLAIM_PREFIX,
    AAISApproval,
    ApprovalAlreadyUsedError,
    aae_request_id,
    areattach,
    recorded_approver,
    stored_proposal,
)
from aais_langgraph.protocol import AAISValidationError, build_request

from .support import ALICE, answer, events, lifecycle, proposal, wait_for_pending


@pytest.fixture
def authority(tmp_path: Path) -> ApprovalAuthority:
    ledger = SqliteLedger(tmp_path / "approvals.db")
    ledger.setup()
    return ApprovalAuthority(ledger)


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def test_approve_grants_and_the_token_binds_the_approved_steps(
    authority: ApprovalAuthority, tmp_path: Path
) -> None:
    client, sink = lifecycle(authority)
    note = tmp_path / "note.txt"
    plan = proposal(note)
    run = asyncio.create_task(client.execute(plan))
    [request] = await wait_for_pending(authority)
    assert request.id == aae_request_id(plan)
    assert request.action.arguments["approved_steps_hash"] == compute_approved_steps_hash(
        plan.steps
    )
    resolved = await answer(authority, request.id, "approve")
    assert resolved.resolution.outcome == "approved"

    result = await run
    assert result.decision is Decision.ALLOW
    assert result.approval_outcome == "granted"
    assert _lines(note) == ["hello"]
    chain = await events(sink, plan.proposal_id)
    [minted] = [e for e in chain if e.event_type == "token_minted"]
    assert minted.payload["approved_steps_hash"] == request.action.arguments["approved_steps_hash"]


async def test_the_approver_is_the_recorded_actor_not_the_decision_body(
    authority: ApprovalAuthority, tmp_path: Path
) -> None:
    client, sink = lifecycle(authority)
    plan = proposal(tmp_path / "note.txt")
    run = asyncio.create_task(client.execute(plan))
    [request] = await wait_for_pending(authority)
    await answer(
        authority, request.id, "approve", actor=ALICE, body_actor={"id": "mallory", "type": "human"}
    )
    await run
    [granted] = [
        e for e in await events(sink, plan.proposal_id) if e.event_type == "approval_granted"
    ]
    assert granted.payload["approver_id"] == "alice"
    assert granted.actor == "human:alice"


@pytest.mark.parametrize("how", ["deny", "cancel", "supersede"])
async def test_every_other_resolution_denies_and_runs_nothing(
    authority: ApprovalAuthority, tmp_path: Path, how: str
) -> None:
    client, sink = lifecycle(authority)
    note = tmp_path / "note.txt"
    plan = proposal(note)
    run = asyncio.create_task(client.execute(plan))
    [request] = await wait_for_pending(authority)
    if how == "deny":
        await answer(authority, request.id, "deny")
    elif how == "cancel":
        await authority.acancel(request.id)
    else:
        await authority.asupersede(request.id)
    with pytest.raises(ApprovalDeniedError):
        await run
    assert not note.exists()
    kinds = [e.event_type for e in await events(sink, plan.proposal_id)]
    assert "approval_denied" in kinds and "token_minted" not in kinds


async def test_a_forged_digest_is_refused_and_the_request_stays_answerable(
    authority: ApprovalAuthority, tmp_path: Path
) -> None:
    client, _ = lifecycle(authority)
    note = tmp_path / "note.txt"
    run = asyncio.create_task(client.execute(proposal(note)))
    [request] = await wait_for_pending(authority)
    requested = await authority.aget_request(request.id)
    assert requested is not None
    forged = build_decision(requested, decision="approve", actor=ALICE).to_json()
    forged["decision"]["action_digest"] = "sha256:" + "0" * 64
    assert (await authority.adecide(forged, actor=ALICE)).resolution.outcome == "stale"
    assert not run.done() and await authority.aget_resolution(request.id) is None
    await answer(authority, request.id, "approve")
    assert (await run).approval_outcome == "granted"
    assert _lines(note) == ["hello"]


async def test_expiry_by_the_authority_clock_times_out(tmp_path: Path) -> None:
    now = [datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)]
    authority = ApprovalAuthority(clock=lambda: now[0])
    client, sink = lifecycle(authority, timeout_seconds=60)
    note = tmp_path / "note.txt"
    plan = proposal(note)
    run = asyncio.create_task(client.execute(plan))
    [request] = await wait_for_pending(authority)
    assert request.expires_at == "2026-11-30T12:01:00.000000Z"
    now[0] += timedelta(seconds=60)
    with pytest.raises(ApprovalTimeoutError):
        await run
    recorded = await authority.aget_resolution(request.id)
    assert recorded is not None and recorded.resolution.outcome == "expired"
    assert not note.exists()
    assert "approval_timeout" in [e.event_type for e in await events(sink, plan.proposal_id)]


async def test_a_short_real_expiry_times_out(authority: ApprovalAuthority, tmp_path: Path) -> None:
    client, _ = lifecycle(authority, timeout_seconds=1)
    note = tmp_path / "note.txt"
    with pytest.raises(ApprovalTimeoutError):
        await client.execute(proposal(note))
    assert not note.exists()


async def test_a_late_decision_after_expiry_does_not_grant(tmp_path: Path) -> None:
    now = [datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)]
    authority = ApprovalAuthority(clock=lambda: now[0])
    client, _ = lifecycle(authority, timeout_seconds=60)
    note = tmp_path / "note.txt"
    run = asyncio.create_task(client.execute(proposal(note)))
    [request] = await wait_for_pending(authority)
    requested = authority.get_request(request.id)
    assert requested is not None
    # No await between the clock moving and the decision: the waiter cannot expire it first.
    now[0] += timedelta(minutes=5)
    decided = build_decision(requested, decision="approve", actor=ALICE)
    assert authority.decide(decided, actor=ALICE).resolution.outcome == "expired"
    with pytest.raises(ApprovalTimeoutError):
        await run
    assert not note.exists()


async def test_two_executions_of_one_proposal_share_one_request_and_one_grant(
    authority: ApprovalAuthority, tmp_path: Path
) -> None:
    note = tmp_path / "note.txt"
    plan = proposal(note)
    first, _ = lifecycle(authority)
    second, _ = lifecycle(authority)
    runs = [asyncio.create_task(first.execute(plan)), asyncio.create_task(second.execute(plan))]
    [request] = await wait_for_pending(authority)
    await asyncio.sleep(0.1)  # both lifecycles are waiting on the same request
    assert len((await authority.asnapshot()).snapshot.pending) == 1
    await answer(authority, request.id, "approve")
    results = await asyncio.gather(*runs, return_exceptions=True)
    assert sorted(type(r).__name__ for r in results) == [
        "ApprovalAlreadyUsedError",
        "LifecycleResult",
    ]
    assert _lines(note) == ["hello"]


async def test_a_used_approval_is_not_granted_again(
    authority: ApprovalAuthority, tmp_path: Path
) -> None:
    note = tmp_path / "note.txt"
    plan = proposal(note)
    client, _ = lifecycle(authority)
    run = asyncio.create_task(client.execute(plan))
    [request] = await wait_for_pending(authority)
    await answer(authority, request.id, "approve")
    await run
    with pytest.raises(ApprovalAlreadyUsedError):
        await areattach(client, authority, request.id)
    with pytest.raises(ApprovalAlreadyUsedError):
        await client.execute(plan)
    assert _lines(note) == ["hello"]
    assert (
        authority.ledger.acquire_lease(
            CLAIM_PREFIX + request.id, "someone", ttl=1.0, now=time.time() + 50 * 365 * 86400
        )
        is None
    )  # the claim outlives any realistic run


async def test_a_changed_proposal_asks_again(authority: ApprovalAuthority, tmp_path: Path) -> None:
    note = tmp_path / "note.txt"
    plan = proposal(note, "hello", proposal_id="p-1")
    changed = proposal(note, "HELLO", proposal_id="p-1")
    assert aae_request_id(plan) != aae_request_id(changed)
    assert aae_request_id(plan) != aae_request_id(plan, strictness="strict_template")
    client, _ = lifecycle(authority)
    run = asyncio.create_task(client.execute(plan))
    [request] = await wait_for_pending(authority)
    await answer(authority, request.id, "approve")
    await run
    run = asyncio.create_task(client.execute(changed))
    pending = await wait_for_pending(authority)
    assert [r.id for r in pending] == [aae_request_id(changed)]
    await answer(authority, pending[0].id, "deny")
    with pytest.raises(ApprovalDeniedError):
        await run
    assert _lines(note) == ["hello"]


async def test_stored_proposal_rebuilds_the_exact_proposal(
    authority: ApprovalAuthority, tmp_path: Path
) -> None:
    plan = proposal(tmp_path / "note.txt")
    client, _ = lifecycle(authority)
    run = asyncio.create_task(client.execute(plan))
    [request] = await wait_for_pending(authority)
    assert stored_proposal(authority, request.id) == plan
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert await authority.aget_resolution(request.id) is None  # still pending, answerable


def test_stored_proposal_refuses_a_request_that_is_not_a_bridge_request(
    authority: ApprovalAuthority,
) -> None:
    requested = authority.request(
        {
            "kind": "aae.proposal",
            "name": "aae.execute",
            "summary": "x",
            "arguments": {"proposal": {}},
        },
        origin={"harness": "t", "session_id": "s"},
    )
    with pytest.raises(AAISValidationError, match="/request/action/arguments/proposal"):
        stored_proposal(authority, requested.request.id)
    other = authority.request(
        {"kind": "fs.write", "name": "w", "summary": "x", "arguments": {}},
        origin={"harness": "t", "session_id": "s"},
    )
    with pytest.raises(AAISValidationError, match="/request/action/kind"):
        stored_proposal(authority, other.request.id)


async def test_a_stored_request_with_another_digest_under_the_id_never_grants(
    authority: ApprovalAuthority, tmp_path: Path
) -> None:
    """An id collision (or a ledger row swapped under the id) fails closed."""
    note = tmp_path / "note.txt"
    plan = proposal(note)
    impostor = build_request(
        {"kind": "aae.proposal", "name": "aae.execute", "summary": "other", "arguments": {}},
        origin={"harness": "t", "session_id": "acme"},
        request_id=aae_request_id(plan),
    )
    authority.add(impostor)
    await answer(authority, impostor.request.id, "approve")
    client, _ = lifecycle(authority)
    with pytest.raises(ApprovalDeniedError):
        await client.execute(plan)
    assert not note.exists()


def test_poll_interval_must_be_positive(authority: ApprovalAuthority) -> None:
    with pytest.raises(ValueError, match="poll_interval"):
        AAISApproval(authority, poll_interval=0)


def test_the_recorded_approver_survives_event_compaction(authority: ApprovalAuthority) -> None:
    requested = authority.request(
        {"kind": "fs.write", "name": "w", "summary": "x", "arguments": {}},
        origin={"harness": "t", "session_id": "s"},
    )
    decided = build_decision(
        requested, decision="approve", actor={"id": "mallory", "type": "human"}
    )
    authority.decide(decided, actor=ALICE)
    resolved = authority.get_resolution(requested.request.id)
    assert resolved is not None
    assert recorded_approver(authority, resolved) == "alice"
    authority.ledger.compact_events(authority.ledger.last_sequence() + 1)
    assert authority.ledger.events_after(0) == []
    assert recorded_approver(authority, resolved) == "alice"  # from the audit chain


def test_a_resolution_without_a_decision_has_no_approver(authority: ApprovalAuthority) -> None:
    requested = authority.request(
        {"kind": "fs.write", "name": "w", "summary": "x", "arguments": {}},
        origin={"harness": "t", "session_id": "s"},
    )
    assert recorded_approver(authority, authority.cancel(requested.request.id)) is None


def test_importing_aais_langgraph_does_not_import_the_aae_sdk() -> None:
    code = "import sys, aais_langgraph, aais_langgraph.gate; assert 'aae' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)

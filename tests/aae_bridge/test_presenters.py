"""An AAE approval is an ordinary pending request without a LangGraph thread: the inbox
snapshot, the SSE stream, the HTTP decisions endpoint and the CLI list and answer it."""

from __future__ import annotations

import asyncio
import getpass
import io
import json
from pathlib import Path
from typing import Any, TypedDict

import httpx
import pytest
from aae import ApprovalDeniedError
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph

from aais_agui import bearer_token_authenticator, create_app
from aais_langgraph import ApprovalAuthority, SqliteLedger, build_decision, pending_approvals
from aais_langgraph.cli import main as cli
from agui.http_support import serve, sse_messages

from .support import ALICE, events, lifecycle, proposal, wait_for_pending


class State(TypedDict, total=False):
    text: str


def _graph() -> Any:
    builder = StateGraph(State)
    builder.add_node("echo", lambda state: state)
    builder.add_edge(START, "echo")
    return builder.compile(checkpointer=InMemorySaver())


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "approvals.db"
    SqliteLedger(path).setup()
    return path


def _authority(db: Path) -> ApprovalAuthority:
    return ApprovalAuthority(SqliteLedger(db))


async def test_pending_approvals_lists_a_request_without_a_thread(db: Path, tmp_path: Path) -> None:
    authority = _authority(db)
    client, _ = lifecycle(authority)
    run = asyncio.create_task(client.execute(proposal(tmp_path / "note.txt")))
    [request] = await wait_for_pending(authority)
    stored = authority.get_stored_request(request.id)
    assert stored is not None and stored.thread_id is None
    listed = pending_approvals(authority, _graph()).snapshot.pending
    assert [r.id for r in listed] == [request.id]
    await authority.acancel(request.id)
    with pytest.raises(ApprovalDeniedError):
        await run


async def test_http_snapshot_stream_and_decision_answer_an_aae_approval(
    db: Path, tmp_path: Path
) -> None:
    authority = _authority(db)
    app = create_app(
        _graph(),
        authority=authority,
        authenticate=bearer_token_authenticator({"alice-token": ALICE}),
        inbox=False,
    )
    client, sink = lifecycle(authority)
    note = tmp_path / "note.txt"
    plan = proposal(note)
    run = asyncio.create_task(client.execute(plan))
    [request] = await wait_for_pending(authority)
    auth = {"Authorization": "Bearer alice-token"}
    with serve(app) as base:
        async with httpx.AsyncClient(base_url=base, headers=auth, timeout=30) as http:
            snapshot = (await http.get("/approvals/snapshot")).json()
            assert [r["id"] for r in snapshot["snapshot"]["pending"]] == [request.id]
            async with http.stream("GET", "/approvals/events") as stream:
                lines = stream.aiter_lines()
                first = await _first_message(lines)
            assert first["data"]["type"] == "approval.snapshot"
            assert [r["id"] for r in first["data"]["snapshot"]["pending"]] == [request.id]

            requested = await authority.aget_request(request.id)
            assert requested is not None
            body = build_decision(
                requested, decision="approve", actor={"id": "mallory", "type": "human"}
            ).to_json()
            response = await http.post(f"/approvals/{request.id}/decisions", json=body)
            assert response.status_code == 200, response.text
            assert response.json()["resolution"]["outcome"] == "approved"
            result = await run
    assert result.approval_outcome == "granted"
    assert note.read_text() == "hello\n"
    [granted] = [
        e for e in await events(sink, plan.proposal_id) if e.event_type == "approval_granted"
    ]
    assert granted.payload["approver_id"] == "alice"


async def _first_message(lines: Any) -> dict[str, Any]:
    buffered: list[str] = []
    async for line in lines:
        buffered.append(line)
        if line == "" and any(item.startswith("data:") for item in buffered):
            return next(sse_messages(iter(buffered)))
    raise AssertionError("the stream ended before its first message")


def _cli(db: Path, *args: str) -> tuple[int, str]:
    out = io.StringIO()
    code = cli(["--db", str(db), *args], stdin=io.StringIO(""), stdout=out)
    return code, out.getvalue()


async def test_cli_lists_and_answers_an_aae_approval(db: Path, tmp_path: Path) -> None:
    authority = _authority(db)
    client, sink = lifecycle(authority)
    plan = proposal(tmp_path / "note.txt")
    run = asyncio.create_task(client.execute(plan))
    [request] = await wait_for_pending(authority)
    code, listing = await asyncio.to_thread(_cli, db, "pending")
    assert code == 0 and request.id in listing and "1 pending" in listing
    code, shown = await asyncio.to_thread(_cli, db, "show", request.id)
    assert code == 0 and "approved_steps_hash" in shown
    code, said = await asyncio.to_thread(_cli, db, "deny", request.id, "--yes")
    assert code == 0 and "denied" in said
    with pytest.raises(ApprovalDeniedError):
        await run
    [denied] = [
        e for e in await events(sink, plan.proposal_id) if e.event_type == "approval_denied"
    ]
    assert denied.payload["approver_id"] == getpass.getuser()
    assert not (tmp_path / "note.txt").exists()
    exported = [
        json.loads(line)
        for line in (await asyncio.to_thread(_cli, db, "audit", "export"))[1].splitlines()
    ]
    assert any(
        e["kind"] == "decided" and e["payload"]["request_id"] == request.id for e in exported
    )

"""A real AAE lifecycle for the bridge tests: a file-writing tool, an always-ask policy,
JWT tokens, and the AAISApproval delivery over a given authority."""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from aae import (
    BlastRadius,
    Context,
    Decision,
    Effect,
    LifecycleClient,
    PolicyDecision,
    Preview,
    Proposal,
    Step,
    StepPreview,
)
from aae.audit import AuditSink, InMemoryAuditSink
from aae.tokens import JwtSigner
from aae.tools import InMemoryToolRegistry, StepResult, Tool
from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
)

from aais_langgraph import ApprovalAuthority, build_decision
from aais_langgraph.aae import AAISApproval

ALICE = {"id": "alice", "type": "human", "authenticated_by": "test"}
MALLORY = {"id": "mallory", "type": "human"}
ISSUER = "aais-langgraph-tests"


class AlwaysAsk:
    """An AAE policy that requires a human for every proposal."""

    def __init__(self) -> None:
        self.evaluations = 0

    async def evaluate(
        self, proposal: Proposal, preview: Preview, context: dict[str, Any]
    ) -> PolicyDecision:
        self.evaluations += 1
        now = context["now"]
        return PolicyDecision(
            decision_id=uuid.uuid4().hex,
            proposal_id=proposal.proposal_id,
            decision=Decision.REQUIRE_APPROVAL,
            policy_version="always-ask/v1",
            rules_evaluated=["always_ask"],
            reason="file writes need a human",
            required_approvers=["ops"],
            expires_at=now + timedelta(minutes=10),
            decided_at=now,
        )


def write_note_tool() -> Tool:
    """``write_note``: appends ``text`` and a newline to the file at ``path``."""

    async def preview(step: Step) -> StepPreview:
        return StepPreview(
            step_index=0,
            predicted_effects=[Effect(type="file_write", target=step.args["path"])],
        )

    async def commit(step: Step, token: Any) -> StepResult:
        path = Path(step.args["path"])
        with path.open("a", encoding="utf-8") as handle:
            handle.write(step.args["text"] + "\n")
        return StepResult(success=True, outputs={"written": len(step.args["text"])})

    return Tool(
        name="write_note",
        plan_schema={
            "type": "object",
            "properties": {"path": {"type": "string"}, "text": {"type": "string"}},
            "required": ["path", "text"],
            "additionalProperties": False,
        },
        preview_fn=preview,
        commit_fn=commit,
        default_blast_radius=BlastRadius.SINGLE_HOST,
    )


def signer() -> JwtSigner:
    key = ed25519.Ed25519PrivateKey.generate()
    private = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    public = key.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
    return JwtSigner(
        active_kid="k1",
        active_private_key=private,
        trusted_public_keys={"k1": public},
        issuer=ISSUER,
    )


def lifecycle(
    authority: ApprovalAuthority,
    *,
    audit: AuditSink | None = None,
    timeout_seconds: int = 600,
    poll_interval: float = 0.02,
) -> tuple[LifecycleClient, AuditSink]:
    """A LifecycleClient whose approvals go through ``authority``."""
    registry = InMemoryToolRegistry()
    registry.register(write_note_tool())
    sink = audit if audit is not None else InMemoryAuditSink()
    client = LifecycleClient(
        registry=registry,
        policy=AlwaysAsk(),
        audit=sink,
        approvals=AAISApproval(authority, poll_interval=poll_interval),
        tokens=signer(),
        issuer=ISSUER,
        approval_timeout_seconds=timeout_seconds,
    )
    return client, sink


def proposal(path: Path, text: str = "hello", *, proposal_id: str | None = None) -> Proposal:
    return Proposal(
        proposal_id=proposal_id or uuid.uuid4().hex,
        agent_id="notes-agent",
        tenant_id="acme",
        intent="Write a note",
        context=Context(rationale="the user asked for a note"),
        steps=[
            Step(
                tool="write_note",
                args={"path": str(path), "text": text},
                blast_radius=BlastRadius.SINGLE_HOST,
            )
        ],
        submitted_at=datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc),
    )


async def wait_for_pending(authority: ApprovalAuthority, count: int = 1) -> list[Any]:
    """The pending requests once ``count`` of them are stored (the lifecycle is waiting)."""
    for _ in range(2000):
        pending = (await authority.asnapshot()).snapshot.pending
        if len(pending) >= count:
            return list(pending)
        await asyncio.sleep(0.01)
    raise AssertionError("the AAE lifecycle never raised its approval request")


async def answer(
    authority: ApprovalAuthority,
    request_id: str,
    decision: str,
    *,
    actor: dict[str, Any] = ALICE,
    body_actor: dict[str, Any] = MALLORY,
) -> Any:
    """Record a decision the way a presenter does: the channel's actor replaces the body's."""
    requested = await authority.aget_request(request_id)
    assert requested is not None
    decided = build_decision(requested, decision=decision, actor=body_actor)  # type: ignore[arg-type]
    return await authority.adecide(decided, actor=actor)


async def events(sink: AuditSink, proposal_id: str) -> list[Any]:
    return list(await sink.read(proposal_id))  # type: ignore[attr-defined]

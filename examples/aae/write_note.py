"""AAE's lifecycle (PROPOSE -> PREVIEW -> APPROVE -> COMMIT -> AUDIT) with its APPROVE step
answered through AAIS approvals: the request waits in a SQLite ledger, where the
``aais-langgraph`` CLI, the inbox page and the HTTP decisions endpoint see it.

    python examples/aae/write_note.py --db aae.db note.txt "hello"   # waits for a human
    aais-langgraph --db aae.db approve <request-id>                   # from another terminal
    python examples/aae/write_note.py --db aae.db --reattach <id>    # after a restart

Needs the ``aae`` extra (``.venv-aae`` after ``bash scripts/install.sh``).
"""

from __future__ import annotations

import argparse
import asyncio
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from aae import (
    ApprovalDeniedError,
    ApprovalTimeoutError,
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
from aae.audit import JsonlAuditSink
from aae.tokens import JwtSigner
from aae.tools import InMemoryToolRegistry, StepResult, Tool
from cryptography.hazmat.primitives import serialization as pem
from cryptography.hazmat.primitives.asymmetric import ed25519

from aais_langgraph import ApprovalAuthority, SqliteLedger
from aais_langgraph.aae import AAISApproval, ApprovalAlreadyUsedError, aae_request_id, areattach


class AskAHuman:
    """AAE policy: every proposal needs a human (AAE re-evaluates it after the grant)."""

    async def evaluate(self, proposal: Proposal, preview: Preview, ctx: dict[str, Any]) -> Any:
        now = ctx["now"]
        return PolicyDecision(
            decision_id=uuid.uuid4().hex,
            proposal_id=proposal.proposal_id,
            decision=Decision.REQUIRE_APPROVAL,
            policy_version="ask/v1",
            rules_evaluated=["ask"],
            reason="writing files needs a human",
            expires_at=now + timedelta(minutes=10),
            decided_at=now,
        )


async def preview(step: Step) -> StepPreview:
    return StepPreview(
        step_index=0, predicted_effects=[Effect(type="file_write", target=step.args["path"])]
    )


async def commit(step: Step, token: Any) -> StepResult:
    Path(step.args["path"]).write_text(step.args["text"] + "\n", encoding="utf-8")
    return StepResult(success=True, outputs={"bytes": len(step.args["text"]) + 1})


def client(authority: ApprovalAuthority, audit: Path) -> LifecycleClient:
    registry = InMemoryToolRegistry()
    schema = {
        "type": "object",
        "required": ["path", "text"],
        "properties": {"path": {"type": "string"}, "text": {"type": "string"}},
    }
    registry.register(Tool("write_note", schema, preview, commit, BlastRadius.SINGLE_HOST))
    key = ed25519.Ed25519PrivateKey.generate()  # tokens are minted and verified in this process
    private = key.private_bytes(pem.Encoding.PEM, pem.PrivateFormat.PKCS8, pem.NoEncryption())
    public = key.public_key().public_bytes(pem.Encoding.PEM, pem.PublicFormat.SubjectPublicKeyInfo)
    tokens = JwtSigner(
        active_kid="k",
        active_private_key=private,
        trusted_public_keys={"k": public},
        issuer="example",
    )
    return LifecycleClient(
        registry=registry,
        policy=AskAHuman(),
        audit=JsonlAuditSink(audit),
        approvals=AAISApproval(authority),
        tokens=tokens,
        issuer="example",
    )


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="aae.db", help="the SQLite ledger (shared with the CLI)")
    parser.add_argument("--reattach", metavar="REQUEST_ID", help="re-run a stored proposal")
    parser.add_argument("path", nargs="?", default="note.txt")
    parser.add_argument("text", nargs="?", default="hello from AAE")
    args = parser.parse_args()
    ledger = SqliteLedger(args.db)
    ledger.setup()
    authority = ApprovalAuthority(ledger)
    lifecycle = client(authority, Path(args.db).with_suffix(".aae-audit.jsonl"))
    try:
        if args.reattach:
            result = await areattach(lifecycle, authority, args.reattach)
        else:
            proposal = Proposal(
                proposal_id=uuid.uuid4().hex,
                agent_id="notes-agent",
                tenant_id="example",
                intent=f"Write a note to {args.path}",
                context=Context(rationale="asked to"),
                steps=[
                    Step(
                        tool="write_note",
                        args={"path": args.path, "text": args.text},
                        blast_radius=BlastRadius.SINGLE_HOST,
                    )
                ],
                submitted_at=datetime.now(timezone.utc),
            )
            request_id = aae_request_id(proposal)
            print(f"waiting for approval {request_id}", flush=True)
            print(f"  approve: aais-langgraph --db {args.db} approve {request_id}", flush=True)
            result = await lifecycle.execute(proposal)
    except (ApprovalDeniedError, ApprovalTimeoutError, ApprovalAlreadyUsedError) as error:
        print(f"not executed: {type(error).__name__}", flush=True)
        return 1
    outputs = [step.outputs for step in result.step_results]
    print(f"{result.approval_outcome}: {outputs}; AAE audit chain tip {result.audit_chain_tip}")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))

"""A host process for the restart test: runs (or re-attaches) one AAE execution whose
approval lives in a SQLite ledger, with AAE's audit chain in a JSONL file.

    python -m aae_bridge.restart_worker start DB AUDIT PROPOSAL_JSON   # waits for a human
    python -m aae_bridge.restart_worker reattach DB AUDIT REQUEST_ID   # prints the result

Exit status: 0 done, 3 the approval was already used, 4 denied, 5 timed out.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from aae import ApprovalDeniedError, ApprovalTimeoutError, Proposal
from aae.audit import JsonlAuditSink

from aais_langgraph import ApprovalAuthority, SqliteLedger
from aais_langgraph.aae import ApprovalAlreadyUsedError, areattach

from .support import lifecycle


async def _main(command: str, db: str, audit: str, subject: str) -> int:
    ledger = SqliteLedger(db)
    ledger.setup()
    authority = ApprovalAuthority(ledger)
    client, _ = lifecycle(authority, audit=JsonlAuditSink(audit), poll_interval=0.05)
    try:
        if command == "start":
            proposal = Proposal.model_validate_json(Path(subject).read_text())
            result = await client.execute(proposal)
        else:
            result = await areattach(client, authority, subject)
    except ApprovalAlreadyUsedError:
        print(json.dumps({"error": "ApprovalAlreadyUsedError"}))
        return 3
    except ApprovalDeniedError:
        return 4
    except ApprovalTimeoutError:
        return 5
    print(
        json.dumps(
            {
                "decision": result.decision.value,
                "approval_outcome": result.approval_outcome,
                "outputs": [step.outputs for step in result.step_results],
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(_main(*sys.argv[1:5])))

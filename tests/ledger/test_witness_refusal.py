"""Without a key, a served process with a witness refuses to act on a history the witness
contradicts: it checks at start (and after each retention pass), and then every gate,
grant and resume meets an integrity error instead of a row someone rewrote."""

from __future__ import annotations

import asyncio
from pathlib import Path

from aais_agui.service import ApprovalService, ServiceSettings
from aais_langgraph import ApprovalAuthority, SqliteLedger, build_decision
from aais_langgraph.ledger import FileWitness, LedgerIntegrityError, publish_tip
from hostile.report import refused

from .forgery import forge_compaction, write

CATEGORY = "tampering"
ACTION = {"kind": "tool_call", "name": "shell", "summary": "Run ls", "arguments": {"command": "ls"}}
ORIGIN = {"harness": "tests", "session_id": "sess_1"}
CHOICES = [
    {
        "decision": "approve",
        "scope": "persistent",
        "label": "Always",
        "scope_constraints": {"command_prefix": "ls"},
    },
    {"decision": "deny", "scope": "once", "label": "Deny"},
]


async def _started(service: ApprovalService) -> None:
    async with service.lifespan():
        pass


def _revoked_then_revived(ledger: SqliteLedger, path: Path, witness: Path) -> ApprovalAuthority:
    """A persistent grant, revoked, witnessed; then a forged compaction that hides the
    revocation (no key: nothing is sealed)."""
    authority = ApprovalAuthority(ledger)
    requested = authority.request(ACTION, origin=ORIGIN, request_id="apr_always", choices=CHOICES)
    decided = build_decision(
        requested, decision="approve", scope="persistent", actor={"id": "alex", "type": "human"}
    )
    authority.decide(decided)
    (grant,) = ledger.list_grants()
    assert authority.revoke_grant(grant.grant_id)
    published = publish_tip(ledger, [FileWitness(witness)])
    assert published is not None
    tip = (published.index, published.entry_hash)
    write(
        ledger,
        path,
        forge_compaction(ledger.contents(), tip, hide=lambda entry: entry.kind == "revoked"),
    )
    return authority


def test_a_served_process_refuses_a_grant_its_witness_shows_was_revived(tmp_path: Path) -> None:
    witness, path = tmp_path / "witness.jsonl", tmp_path / "ledger.db"
    with SqliteLedger.from_path(path) as ledger:
        _revoked_then_revived(ledger, path, witness)
        authority = ApprovalAuthority(ledger)  # a new process, serving with the witness
        assert authority.match_grant(ACTION, ORIGIN) is not None  # what it would act on
        settings = ServiceSettings(witnesses=(str(witness),), witness_every=3600.0)

        asyncio.run(_started(ApprovalService(None, authority, settings=settings)))

        with refused(CATEGORY, LedgerIntegrityError):
            authority.match_grant(ACTION, ORIGIN)
        with refused(CATEGORY, LedgerIntegrityError):
            authority.execution("apr_always")


def test_a_served_process_whose_witness_agrees_acts_as_before(tmp_path: Path) -> None:
    witness, path = tmp_path / "witness.jsonl", tmp_path / "ledger.db"
    with SqliteLedger.from_path(path) as ledger:
        authority = ApprovalAuthority(ledger)
        requested = authority.request(ACTION, origin=ORIGIN, request_id="apr_a", choices=CHOICES)
        authority.decide(
            build_decision(
                requested,
                decision="approve",
                scope="persistent",
                actor={"id": "a", "type": "human"},
            )
        )
        assert publish_tip(ledger, [FileWitness(witness)]) is not None
        settings = ServiceSettings(witnesses=(str(witness),), witness_every=3600.0)

        asyncio.run(_started(ApprovalService(None, authority, settings=settings)))

        assert authority.match_grant(ACTION, ORIGIN) is not None

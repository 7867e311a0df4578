"""``audit verify [--witness]`` against a forged compaction of a SQLite ledger.

The forgery rewrites the chain behind a ``compacted`` checkpoint that claims to end at
the witnessed tip, hiding a revocation. With the authority key, ``audit verify`` alone
refuses the unsealed checkpoint; with a witness, ``--witness`` refuses the missing
witnessed entry that no witnessed compaction removed, key or not.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from aais_langgraph import ApprovalAuthority, SqliteLedger, build_decision
from aais_langgraph.cli import main
from aais_langgraph.ledger import FileWitness
from hostile.report import record
from ledger.forgery import forge_compaction, write_sqlite

ACTION = {"kind": "process.exec", "name": "shell.exec", "summary": "ls", "arguments": {"n": 1}}
CHOICES = [
    {"decision": "approve", "scope": "once", "label": "Approve once"},
    {
        "decision": "approve",
        "scope": "persistent",
        "label": "Always",
        "scope_constraints": {"command_prefix": "ls"},
    },
    {"decision": "deny", "scope": "once", "label": "Deny"},
]
ACTOR = {"id": "alice", "type": "human"}
KEY = "k" * 40


def run_cli(db: Path, *args: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(["--db", str(db), *args], stdin=io.StringIO(""), stdout=out)
    return code, out.getvalue()


def _revoked_then_forged(db: Path, witness: Path, key: str | None) -> None:
    with SqliteLedger.from_path(db) as ledger:
        authority = ApprovalAuthority(ledger, key=key)
        requested = authority.request(
            ACTION, origin={"harness": "t", "session_id": "s-1"}, choices=CHOICES
        )
        authority.decide(
            build_decision(requested, decision="approve", scope="persistent", actor=ACTOR)
        )
    code, out = run_cli(db, "audit", "publish", "--witness", str(witness))
    assert code == 0, out
    with SqliteLedger.from_path(db) as ledger:
        authority = ApprovalAuthority(ledger, key=key)
        (grant,) = ledger.list_grants()
        assert authority.revoke_grant(grant.grant_id)
        latest = FileWitness(witness).latest()
        assert latest is not None
        forged = forge_compaction(
            ledger.contents(),
            (latest.index, latest.entry_hash),
            hide=lambda entry: entry.kind == "revoked",
        )
    write_sqlite(db, forged)
    with SqliteLedger.from_path(db) as ledger:
        (revived,) = ledger.list_grants(include_revoked=True)
        assert revived.revoked_at is None


@pytest.mark.parametrize("key", [None, KEY], ids=["no-key", "key"])
def test_a_forged_compaction_fails_audit_verify_witness(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: str | None
) -> None:
    if key is not None:
        monkeypatch.setenv("AAIS_AUTHORITY_KEY", key)
    db, witness = tmp_path / "ledger.db", tmp_path / "witness.jsonl"
    _revoked_then_forged(db, witness, key)

    alone, alone_out = run_cli(db, "audit", "verify")
    code, out = run_cli(db, "audit", "verify", "--witness", str(witness))

    caught = [code != 0] + ([alone != 0] if key is not None else [])
    record("compaction forgery", len(caught), failed_open=caught.count(False))
    assert code == 1, out
    if key is None:
        assert alone == 0, alone_out  # without a key or a witness, nothing can tell
        assert "no witnessed compaction removed it" in out
    else:  # the ledger's own verification already fails: the checkpoint is unsealed
        assert alone == 1, alone_out
        assert "compaction checkpoint" in alone_out and "seal" in alone_out

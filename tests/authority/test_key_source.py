"""The authority key has one source: the key an authority was given (in code or from the
environment) is what its served retention job, its witness and its verification use."""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

import pytest

from aais_agui.service import ApprovalService, ServiceSettings
from aais_langgraph import ApprovalAuthority, SqliteLedger, build_decision
from aais_langgraph.authority.keys import AUTHORITY_KEY_FILE_VAR, AUTHORITY_KEY_VAR
from aais_langgraph.ledger import FileWitness, RetentionPolicy, check_witness

KEY = b"k" * 32
ACTION = {"kind": "process.exec", "name": "shell.exec", "summary": "ls", "arguments": {"n": 1}}
ACTOR = {"id": "alice", "type": "human"}


@pytest.fixture(autouse=True)
def _no_key_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(AUTHORITY_KEY_VAR, raising=False)
    monkeypatch.delenv(AUTHORITY_KEY_FILE_VAR, raising=False)


def approve(authority: ApprovalAuthority, count: int) -> None:
    for _ in range(count):
        requested = authority.request(ACTION, origin={"harness": "t", "session_id": "s-1"})
        authority.decide(build_decision(requested, decision="approve", actor=ACTOR))


async def _served_until_compacted(
    service: ApprovalService, ledger: SqliteLedger, witness: Path | None = None
) -> None:
    """Serve until a retention pass compacted the ledger (and ``witness`` holds a tip)."""
    async with service.lifespan():
        while ledger.audit_entries(limit=1)[0].index == 0 or (
            witness is not None and not FileWitness(witness).publications()
        ):
            await asyncio.sleep(0.01)


def test_the_served_retention_job_seals_with_the_key_given_in_code(tmp_path: Path) -> None:
    settings = ServiceSettings(retention=RetentionPolicy(keep_last=1), retention_every=0.01)
    with SqliteLedger.from_path(tmp_path / "ledger.db") as ledger:
        authority = ApprovalAuthority(ledger, key=KEY)
        approve(authority, 3)

        asyncio.run(
            _served_until_compacted(ApprovalService(None, authority, settings=settings), ledger)
        )

        (checkpoint,) = [e for e in ledger.audit_entries() if e.kind == "compacted"]
        assert "mac" in checkpoint.payload
        assert authority.verify_audit().ok


def test_the_served_witness_seals_with_the_key_given_in_code(tmp_path: Path) -> None:
    witness = tmp_path / "witness.jsonl"
    settings = ServiceSettings(
        retention=RetentionPolicy(keep_last=1),
        retention_every=0.01,
        witnesses=(str(witness),),
        witness_every=0.01,
    )
    with SqliteLedger.from_path(tmp_path / "ledger.db") as ledger:
        authority = ApprovalAuthority(ledger, key=KEY)
        approve(authority, 3)

        service = ApprovalService(None, authority, settings=settings)
        asyncio.run(_served_until_compacted(service, ledger, witness))

        published = FileWitness(witness).publications()
        assert published and all(item.mac is not None for item in published)
        assert check_witness(ledger, published, key=authority.key).ok


def test_the_authority_key_is_the_one_resolved_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(AUTHORITY_KEY_VAR, KEY.decode())
    with SqliteLedger.from_path(tmp_path / "ledger.db") as ledger:
        authority = ApprovalAuthority(ledger)

        assert authority.key == KEY
        assert ledger.authority_key == KEY


def _reads_the_key(path: Path) -> bool:
    """Whether a module calls a key resolver, names the key's variables in code, or spells
    them as a string outside its docstrings."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in RESOLVERS:
            return True
        if isinstance(node, ast.Attribute) and node.attr in RESOLVERS:
            return True
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings
            and (AUTHORITY_KEY_VAR in node.value)
        ):
            return True
    return False


RESOLVERS = {"load_authority_key", "resolve_key", "AUTHORITY_KEY_VAR", "AUTHORITY_KEY_FILE_VAR"}


def test_the_key_is_resolved_in_one_place_only() -> None:
    root = Path(__file__).resolve().parents[2]
    found = sorted(
        str(path.relative_to(root))
        for package in ("aais_langgraph", "aais_agui")
        for path in (root / package).rglob("*.py")
        if _reads_the_key(path)
    )

    assert found == [
        "aais_langgraph/authority/authority.py",  # ApprovalAuthority: the one call
        "aais_langgraph/authority/keys.py",  # the resolver itself
    ], found

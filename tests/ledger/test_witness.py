"""Witnesses of the audit tip through the library: publications, their seals, the verdicts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aais_langgraph.ledger import (
    FileWitness,
    HttpWitness,
    InMemoryLedger,
    WitnessedTip,
    WitnessError,
    check_witnessed,
    open_witness,
    publish_tip,
)

KEY = b"k" * 32


def _ledger(entries: int) -> InMemoryLedger:
    ledger = InMemoryLedger()
    for number in range(entries):
        ledger.append_audit("conflict", {"request_id": f"apr_{number}"})
    return ledger


def test_the_latest_publication_is_read_back_from_a_long_file(tmp_path: Path) -> None:
    witness = FileWitness(tmp_path / "tips.jsonl")
    ledger = _ledger(1)
    for _ in range(1500):  # well past the tail that is read
        published = publish_tip(ledger, [witness])
        ledger.append_audit("conflict", {"request_id": "apr_more"})

    assert witness.latest() == published
    assert published is not None and published.index == 1499


def test_nothing_published_reads_as_none(tmp_path: Path) -> None:
    assert FileWitness(tmp_path / "none.jsonl").latest() is None
    assert publish_tip(InMemoryLedger(), [FileWitness(tmp_path / "w.jsonl")]) is None


def test_the_verdicts_ok_rollback_and_fork() -> None:
    ledger = _ledger(3)
    tip = ledger.audit_tip()
    assert tip is not None
    seen = WitnessedTip(tip[0], tip[1], "2026-12-01T00:00:00Z")
    ledger.append_audit("conflict", {"request_id": "apr_next"})

    assert check_witnessed(ledger, seen).verdict == "ok"
    ahead = WitnessedTip(9, tip[1], seen.published_at)
    assert check_witnessed(ledger, ahead).verdict == "rollback"
    other = WitnessedTip(tip[0], "sha256:" + "0" * 64, seen.published_at)
    forked = check_witnessed(ledger, other)
    assert forked.verdict == "fork" and "sha256:" not in forked.message


def test_with_a_key_only_sealed_publications_count(tmp_path: Path) -> None:
    ledger = _ledger(2)
    witness = FileWitness(tmp_path / "tips.jsonl")
    published = publish_tip(ledger, [witness], key=KEY)
    assert published is not None and published.mac is not None

    assert check_witnessed(ledger, published, key=KEY).ok
    assert check_witnessed(ledger, published, key=b"x" * 32).verdict == "unsealed"
    bare = WitnessedTip(published.index, published.entry_hash, published.published_at)
    assert check_witnessed(ledger, bare, key=KEY).verdict == "unsealed"


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ({"index": -1, "hash": "sha256:ab", "published_at": "t"}, "index"),
        ({"index": 1, "hash": "md5:secret-value", "published_at": "t"}, "hash"),
        ({"index": 1, "hash": "sha256:ab"}, "published_at"),
        ({"index": 1, "hash": "sha256:ab", "published_at": "t", "mac": 5}, "mac"),
    ],
)
def test_a_malformed_publication_names_the_field(document: dict[str, object], field: str) -> None:
    with pytest.raises(WitnessError, match=f"witness: {field}") as raised:
        WitnessedTip.from_json(document)
    assert "secret-value" not in str(raised.value)


def test_a_witness_target_is_a_file_or_an_http_url(tmp_path: Path) -> None:
    assert isinstance(open_witness(str(tmp_path / "w.jsonl")), FileWitness)
    assert isinstance(open_witness("https://witness.example/tips"), HttpWitness)
    with pytest.raises(ValueError, match="witness"):
        HttpWitness("ftp://witness.example/tips")


def test_a_publication_is_one_json_line(tmp_path: Path) -> None:
    path = tmp_path / "tips.jsonl"
    published = publish_tip(_ledger(1), [FileWitness(path)])
    assert published is not None

    assert json.loads(path.read_text()) == {
        "tip": published.tip,
        "index": 0,
        "hash": published.entry_hash,
        "published_at": published.published_at,
    }

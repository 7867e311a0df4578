"""``audit publish|verify --witness``: a restored backup is a rollback, a rewritten chain a fork."""

from __future__ import annotations

import io
import json
import sqlite3
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from aais_langgraph import ApprovalAuthority, SqliteLedger, build_decision
from aais_langgraph.cli import main
from aais_langgraph.ledger import chain_hash

ACTION = {"kind": "process.exec", "name": "shell.exec", "summary": "ls", "arguments": {"n": 1}}
ACTOR = {"id": "alice", "type": "human"}
KEY = "k" * 40


def run_cli(db: Path, *args: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(["--db", str(db), *args], stdin=io.StringIO(""), stdout=out)
    return code, out.getvalue()


def approve(db: Path, count: int) -> None:
    with SqliteLedger.from_path(db) as ledger:
        authority = ApprovalAuthority(ledger)
        for _ in range(count):
            requested = authority.request(ACTION, origin={"harness": "t", "session_id": "s-1"})
            authority.decide(build_decision(requested, decision="approve", actor=ACTOR))


def backup(db: Path, to: Path) -> None:
    with sqlite3.connect(db) as source, sqlite3.connect(to) as target:
        source.backup(target)


def restore(db: Path, backup_file: Path) -> None:
    for suffix in ("-wal", "-shm"):
        db.with_name(db.name + suffix).unlink(missing_ok=True)
    db.write_bytes(backup_file.read_bytes())


def rewrite_chain(db: Path, from_index: int) -> None:
    """Edit entry ``from_index``'s timestamp and recompute the chain and tip after it: the
    ledger alone still verifies."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT idx, kind, occurred_at, payload, prev_hash FROM aais_audit "
            "WHERE idx >= ? ORDER BY idx",
            (from_index,),
        ).fetchall()
        prev = rows[0][4]
        for index, kind, occurred_at, payload, _ in rows:
            if index == from_index:
                occurred_at = "2020-01-01T00:00:00Z"
            entry_hash = chain_hash(index, kind, occurred_at, json.loads(payload), prev)
            conn.execute(
                "UPDATE aais_audit SET occurred_at = ?, prev_hash = ?, entry_hash = ? "
                "WHERE idx = ?",
                (occurred_at, prev, entry_hash, index),
            )
            prev = entry_hash
        conn.execute(
            "UPDATE aais_meta SET value = ? WHERE key = 'audit_tip'",
            (json.dumps([rows[-1][0], prev]),),
        )


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.db"
    approve(path, 2)
    return path


def test_a_published_tip_verifies_while_the_ledger_grows(db: Path, tmp_path: Path) -> None:
    witness = tmp_path / "witness.jsonl"
    code, out = run_cli(db, "audit", "publish", "--witness", str(witness))
    assert code == 0 and "published tip 5:sha256:" in out
    approve(db, 1)

    code, out = run_cli(db, "audit", "verify", "--witness", str(witness))

    assert code == 0, out
    assert "witnessed tip 5 is in the chain, unchanged" in out
    assert json.loads(witness.read_text().splitlines()[-1])["tip"].startswith("5:sha256:")


def test_a_restored_backup_is_reported_as_a_rollback(db: Path, tmp_path: Path) -> None:
    witness = tmp_path / "witness.jsonl"
    saved = tmp_path / "backup.db"
    backup(db, saved)
    approve(db, 2)
    assert run_cli(db, "audit", "publish", "--witness", str(witness))[0] == 0
    restore(db, saved)

    assert run_cli(db, "audit", "verify")[0] == 0  # alone, the old ledger looks fine
    code, out = run_cli(db, "audit", "verify", "--witness", str(witness))

    assert code == 3, out
    assert "ROLLBACK: the ledger ends at entry 5, but entry 11 was witnessed" in out


def test_a_rewritten_chain_is_reported_as_a_fork(db: Path, tmp_path: Path) -> None:
    witness = tmp_path / "witness.jsonl"
    assert run_cli(db, "audit", "publish", "--witness", str(witness))[0] == 0
    rewrite_chain(db, from_index=3)

    assert run_cli(db, "audit", "verify")[0] == 0  # recomputed: the chain alone verifies
    code, out = run_cli(db, "audit", "verify", "--witness", str(witness))

    assert code == 4, out
    assert "FORK: entry 5 differs from the one witnessed" in out


def test_with_a_key_an_unsealed_or_forged_publication_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    witness = tmp_path / "witness.jsonl"
    monkeypatch.setenv("AAIS_AUTHORITY_KEY", KEY)
    db = tmp_path / "sealed.db"
    approve(db, 2)
    code, out = run_cli(db, "audit", "publish", "--witness", str(witness))
    assert code == 0 and "sealed" in out
    assert json.loads(witness.read_text())["mac"].startswith("hmac-sha256:")
    assert run_cli(db, "audit", "verify", "--witness", str(witness))[0] == 0

    forged = {**json.loads(witness.read_text()), "index": 0}
    witness.write_text(json.dumps(forged) + "\n")
    code, out = run_cli(db, "audit", "verify", "--witness", str(witness))

    assert code == 1, out
    assert "no valid seal" in out


def test_an_unreadable_witness_is_one_error_line(db: Path, tmp_path: Path) -> None:
    witness = tmp_path / "witness.jsonl"
    witness.write_text("not json\n")

    code, out = run_cli(db, "audit", "verify", "--witness", str(witness))

    assert code == 2
    assert out.splitlines()[-1] == "error: witness file: a line is not JSON"


class _Receiver(BaseHTTPRequestHandler):
    published: list[bytes] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).published.append(body)
        self.send_response(204)
        self.end_headers()

    def do_GET(self) -> None:
        if not self.published:
            self.send_response(404)
            self.end_headers()
            return
        body = self.published[-1]
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def http_witness() -> Iterator[str]:
    _Receiver.published = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/tips"
    finally:
        server.shutdown()
        server.server_close()


def test_an_http_witness_receives_the_tip_and_catches_a_rollback(
    db: Path, tmp_path: Path, http_witness: str
) -> None:
    saved = tmp_path / "backup.db"
    backup(db, saved)
    assert run_cli(db, "audit", "verify", "--witness", http_witness)[1].endswith(
        "witness: nothing published yet\n"
    )
    approve(db, 1)
    assert run_cli(db, "audit", "publish", "--witness", http_witness)[0] == 0
    assert json.loads(_Receiver.published[-1])["index"] == 8
    assert run_cli(db, "audit", "verify", "--witness", http_witness)[0] == 0

    restore(db, saved)
    code, out = run_cli(db, "audit", "verify", "--witness", http_witness)

    assert code == 3 and "ROLLBACK" in out
